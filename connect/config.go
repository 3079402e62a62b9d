package connect

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Type is a setting's type, named as Kafka Connect's validation reports
// it.
type Type string

// The types of a setting.
const (
	TypeString   Type = "STRING"
	TypeInt      Type = "INT"
	TypeBoolean  Type = "BOOLEAN"
	TypeList     Type = "LIST" // comma-separated
	TypePassword Type = "PASSWORD"
)

// Importance is how much a setting matters, as Kafka Connect ranks it.
type Importance string

// The importances of a setting.
const (
	High   Importance = "HIGH"
	Medium Importance = "MEDIUM"
	Low    Importance = "LOW"
)

// Key describes one setting of a plugin.
type Key struct {
	Name string
	Type Type
	// Required: the setting has no default and must be given.
	Required bool
	// Default is the value of a setting not given, as text.
	Default    string
	Doc        string
	Importance Importance
	Group      string
	// Allowed lists the values the setting may take; empty: any of its
	// type.
	Allowed []string
	// FoldCase: a value matches Allowed in any case, as Kafka Connect's
	// enum settings do (UPSERT, upsert).
	FoldCase bool
	// Check checks a value beyond its type; nil: nothing more.
	Check func(value string) error
}

// ConfigDef is the settings a plugin takes.
type ConfigDef struct {
	Keys []Key
}

// FieldError names a setting whose value is wrong, and why.
type FieldError struct {
	Field  string
	Reason string
}

func (e *FieldError) Error() string { return fmt.Sprintf("setting %q: %s", e.Field, e.Reason) }

// ErrInvalidConfig is matched by every error of Parse.
var ErrInvalidConfig = errors.New("invalid connector configuration")

// Is makes a FieldError match ErrInvalidConfig.
func (e *FieldError) Is(target error) bool { return target == ErrInvalidConfig }

// Value is one setting as Validate found it.
type Value struct {
	Key Key
	// Value is the value given, or the default; Given says which.
	Value  string
	Given  bool
	Errors []string
}

// Validation is what Validate found of every setting of a definition.
type Validation struct {
	Values     []Value
	ErrorCount int
}

// Validate checks values against every key of d, and returns what it
// found of each, errors included. Settings d does not define are not
// looked at (the runtime's own, and other plugins').
func (d *ConfigDef) Validate(values map[string]string) Validation {
	var out Validation
	for _, k := range d.Keys {
		v, given := values[k.Name]
		if !given {
			v = k.Default
		}
		val := Value{Key: k, Value: v, Given: given}
		if err := k.check(v, given); err != nil {
			val.Errors = append(val.Errors, err.Error())
			out.ErrorCount++
		}
		out.Values = append(out.Values, val)
	}
	return out
}

// Parse validates values and returns the settings they make. Its error
// joins a *FieldError for every setting that is wrong.
func (d *ConfigDef) Parse(values map[string]string) (Config, error) {
	var errs []error
	cfg := Config{values: map[string]string{}}
	for _, v := range d.Validate(values).Values {
		for _, e := range v.Errors {
			errs = append(errs, &FieldError{Field: v.Key.Name, Reason: e})
		}
		cfg.values[v.Key.Name] = v.Value
	}
	if len(errs) > 0 {
		return Config{}, errors.Join(errs...)
	}
	return cfg, nil
}

// check checks one value of k.
func (k Key) check(v string, given bool) error {
	if k.Required && (!given || strings.TrimSpace(v) == "") {
		return errors.New("is required")
	}
	if v == "" {
		return nil
	}
	switch k.Type {
	case TypeInt:
		if _, err := strconv.Atoi(v); err != nil {
			return fmt.Errorf("%q is not a whole number", v)
		}
	case TypeBoolean:
		if _, err := strconv.ParseBool(v); err != nil {
			return fmt.Errorf("%q is not true or false", v)
		}
	}
	if len(k.Allowed) > 0 && !slices.ContainsFunc(k.Allowed, func(a string) bool { return a == v || (k.FoldCase && strings.EqualFold(a, v)) }) {
		return fmt.Errorf("%q is not one of %s", v, strings.Join(k.Allowed, ", "))
	}
	if k.Check != nil {
		return k.Check(v)
	}
	return nil
}

// Config is a plugin's settings, parsed by its ConfigDef: every setting it
// defines has a value of its type (the default when not given).
type Config struct {
	values map[string]string
}

// String returns the setting name.
func (c Config) String(name string) string { return c.values[name] }

// Int returns the setting name, 0 when it is empty.
func (c Config) Int(name string) int {
	n, _ := strconv.Atoi(c.values[name]) // Parse checked it
	return n
}

// Bool returns the setting name, false when it is empty.
func (c Config) Bool(name string) bool {
	b, _ := strconv.ParseBool(c.values[name]) // Parse checked it
	return b
}

// List returns the setting name split at commas, without blanks.
func (c Config) List(name string) []string { return SplitList(c.values[name]) }

// SplitList splits a comma-separated setting into its items, trimmed,
// leaving out blanks.
func SplitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}
