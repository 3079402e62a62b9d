// Package transform is Causeway's single message transforms: Kafka
// Connect's most used ones, configured as Kafka Connect configures them,
// working on JSON keys and values.
//
//	"transforms": "key,drop",
//	"transforms.key.type": "org.apache.kafka.connect.transforms.ValueToKey",
//	"transforms.key.fields": "id",
//	"transforms.drop.type": "org.apache.kafka.connect.transforms.ReplaceField$Value",
//	"transforms.drop.exclude": "internal_note",
//
// The types, with or without Kafka Connect's package prefix:
//
//   - ReplaceField$Key, ReplaceField$Value: exclude (fields dropped),
//     include (the only fields kept), renames (old:new pairs).
//   - ValueToKey: fields: the key becomes an object of these fields of the
//     value.
//   - ExtractField$Key, ExtractField$Value: field: the key (or value)
//     becomes the value of that one field.
//   - RegexRouter: regex, replacement: a topic the regular expression
//     matches whole is renamed ($1 names a group, as in Java).
//
// A record whose key or value a transform needs as an object and is not
// one fails with an error naming the transform; a tombstone (no value)
// passes value transforms unchanged.
package transform

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/causeway-stream/causeway/connect"
)

// Record is what a transform sees of a record: its topic, key and value.
type Record struct {
	Topic      string
	Key, Value []byte
}

// Transform changes one record.
type Transform interface {
	Apply(r Record) (Record, error)
}

// Chain is the transforms of a connector, in order.
type Chain struct {
	steps []step
}

type step struct {
	alias string
	t     Transform
}

// Apply runs r through every transform of c, in order. Its error names the
// transform that failed.
func (c *Chain) Apply(r Record) (Record, error) {
	for _, s := range c.steps {
		var err error
		if r, err = s.t.Apply(r); err != nil {
			return r, fmt.Errorf("transform %q: %w", s.alias, err)
		}
	}
	return r, nil
}

// Empty reports whether c has no transforms.
func (c *Chain) Empty() bool { return c == nil || len(c.steps) == 0 }

// Routes reports whether a transform of c can change a record's topic.
func (c *Chain) Routes() bool {
	return c != nil && slices.ContainsFunc(c.steps, func(s step) bool {
		_, ok := s.t.(router)
		return ok
	})
}

const prefix = "org.apache.kafka.connect.transforms."

// Parse makes the chain the connector settings cfg name under
// "transforms". Every error is a *connect.FieldError naming the setting
// that is wrong.
func Parse(cfg map[string]string) (*Chain, error) {
	c := &Chain{}
	var errs []error
	for _, alias := range connect.SplitList(cfg["transforms"]) {
		key := func(name string) string { return "transforms." + alias + "." + name }
		typ := strings.TrimPrefix(cfg[key("type")], prefix)
		field := func(name string) string { return cfg[key(name)] }
		var t Transform
		var err error
		switch typ {
		case "":
			err = &connect.FieldError{Field: key("type"), Reason: "is required"}
		case "ReplaceField$Key", "ReplaceField$Value":
			t, err = newReplace(typ == "ReplaceField$Key", connect.SplitList(field("exclude")), connect.SplitList(field("include")), connect.SplitList(field("renames")), key("renames"))
		case "ValueToKey":
			fields := connect.SplitList(field("fields"))
			if len(fields) == 0 {
				err = &connect.FieldError{Field: key("fields"), Reason: "is required"}
			}
			t = valueToKey{fields: fields}
		case "ExtractField$Key", "ExtractField$Value":
			if field("field") == "" {
				err = &connect.FieldError{Field: key("field"), Reason: "is required"}
			}
			t = extract{key: typ == "ExtractField$Key", field: field("field")}
		case "RegexRouter":
			t, err = newRouter(field("regex"), field("replacement"), key("regex"))
		default:
			err = &connect.FieldError{Field: key("type"), Reason: fmt.Sprintf("%q is not a transform Causeway has (ReplaceField, ValueToKey, ExtractField, RegexRouter)", cfg[key("type")])}
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		c.steps = append(c.steps, step{alias: alias, t: t})
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return c, nil
}

// decodePart decodes the key (or value) of r as a JSON object, and
// returns it with where it lies and its name; m is nil when r has none (a
// tombstone's value), or on an error.
func decodePart(r *Record, key bool) (b *[]byte, what string, m map[string]json.RawMessage, err error) {
	b, what = &r.Value, "value"
	if key {
		b, what = &r.Key, "key"
	}
	if *b == nil {
		return b, what, nil, nil
	}
	m, err = object(*b, what)
	return b, what, m, err
}

// object decodes b as a JSON object, keeping each field's bytes.
func object(b []byte, what string) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil || m == nil {
		return nil, fmt.Errorf("the record's %s is not a JSON object", what)
	}
	return m, nil
}

// replace is ReplaceField.
type replace struct {
	key     bool
	exclude map[string]bool
	include map[string]bool
	renames map[string]string
}

func newReplace(key bool, exclude, include, renames []string, renamesField string) (replace, error) {
	r := replace{key: key, exclude: set(exclude), include: set(include), renames: map[string]string{}}
	for _, pair := range renames {
		from, to, ok := strings.Cut(pair, ":")
		if !ok || from == "" || to == "" {
			return r, &connect.FieldError{Field: renamesField, Reason: fmt.Sprintf("%q is not old:new", pair)}
		}
		r.renames[from] = to
	}
	return r, nil
}

func set(names []string) map[string]bool {
	if len(names) == 0 {
		return nil
	}
	m := map[string]bool{}
	for _, n := range names {
		m[n] = true
	}
	return m
}

func (t replace) Apply(r Record) (Record, error) {
	b, _, m, err := decodePart(&r, t.key)
	if m == nil {
		return r, err
	}
	out := make(map[string]json.RawMessage, len(m))
	for name, v := range m {
		if t.exclude[name] || (t.include != nil && !t.include[name]) {
			continue
		}
		if to, ok := t.renames[name]; ok {
			name = to
		}
		out[name] = v
	}
	*b, err = json.Marshal(out)
	return r, err
}

// valueToKey is ValueToKey.
type valueToKey struct{ fields []string }

func (t valueToKey) Apply(r Record) (Record, error) {
	if r.Value == nil {
		return r, nil
	}
	m, err := object(r.Value, "value")
	if err != nil {
		return r, err
	}
	key := make(map[string]json.RawMessage, len(t.fields))
	for _, f := range t.fields {
		v, ok := m[f]
		if !ok {
			return r, fmt.Errorf("the record's value has no field %q", f)
		}
		key[f] = v
	}
	r.Key, err = json.Marshal(key)
	return r, err
}

// extract is ExtractField.
type extract struct {
	key   bool
	field string
}

func (t extract) Apply(r Record) (Record, error) {
	b, what, m, err := decodePart(&r, t.key)
	if m == nil {
		return r, err
	}
	v, ok := m[t.field]
	if !ok {
		return r, fmt.Errorf("the record's %s has no field %q", what, t.field)
	}
	*b = v
	return r, nil
}

// router is RegexRouter.
type router struct {
	re          *regexp.Regexp
	replacement string
}

// javaGroup finds Java's $1 group references, to write them as Go's ${1}.
var javaGroup = regexp.MustCompile(`\$(\d+)`)

func newRouter(expr, replacement, field string) (router, error) {
	if expr == "" {
		return router{}, &connect.FieldError{Field: field, Reason: "is required"}
	}
	re, err := regexp.Compile("^(?:" + expr + ")$")
	if err != nil {
		return router{}, &connect.FieldError{Field: field, Reason: err.Error()}
	}
	return router{re: re, replacement: javaGroup.ReplaceAllString(replacement, "$${$1}")}, nil
}

func (t router) Apply(r Record) (Record, error) {
	if t.re.MatchString(r.Topic) {
		r.Topic = t.re.ReplaceAllString(r.Topic, t.replacement)
	}
	return r, nil
}
