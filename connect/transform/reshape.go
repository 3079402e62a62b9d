package transform

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/causeway-stream/causeway/connect"
)

// castTypes are the types Cast casts to.
var castTypes = []string{"int8", "int16", "int32", "int64", "float32", "float64", "boolean", "string"}

// cast is Cast: spec is field:type pairs, or one type for the whole key
// (or value).
type cast struct {
	key     bool
	whole   string            // the type of the whole, or ""
	fields  map[string]string // field: type
	schemas *schemaCache
}

func newCast(s settings, key bool) (Transform, error) {
	t := cast{key: key, fields: map[string]string{}, schemas: &schemaCache{}}
	spec := s.list("spec")
	if len(spec) == 0 {
		return nil, s.missing("spec")
	}
	for _, p := range spec {
		field, typ, pair := strings.Cut(p, ":")
		if !pair {
			field, typ = "", p
		}
		if !slices.Contains(castTypes, typ) {
			return nil, &connect.FieldError{Field: s.key("spec"), Reason: fmt.Sprintf("%q: %q is not one of %s", p, typ, strings.Join(castTypes, ", "))}
		}
		if !pair {
			if len(spec) > 1 {
				return nil, &connect.FieldError{Field: s.key("spec"), Reason: "one type for the whole, or field:type pairs, not both"}
			}
			t.whole = typ
		}
		t.fields[field] = typ
	}
	return t, nil
}

func (t cast) Apply(r Record) (Record, error) {
	b := partOf(&r, t.key)
	if *b == nil {
		return r, nil
	}
	sp := schemaOf(&r, t.key)
	if t.whole != "" {
		v, err := castValue(*b, t.whole)
		if err != nil {
			return r, err
		}
		*b = v
		*sp = t.schemas.of(*sp, func(in *connect.Schema) *connect.Schema {
			return &connect.Schema{Type: t.whole, Optional: in.Optional}
		})
		return r, nil
	}
	_, what, m, err := decodePart(&r, t.key)
	if m == nil {
		return r, err
	}
	for f, typ := range t.fields {
		v, ok := m[f]
		if !ok || string(v) == "null" {
			continue
		}
		if m[f], err = castValue(v, typ); err != nil {
			return r, fmt.Errorf("the %s's field %q: %w", what, f, err)
		}
	}
	*sp = t.schemas.of(*sp, func(in *connect.Schema) *connect.Schema {
		s := *in
		s.Fields = slices.Clone(in.Fields)
		for i, f := range s.Fields {
			if typ, ok := t.fields[f.Field]; ok {
				s.Fields[i] = connect.Schema{Type: typ, Optional: f.Optional, Field: f.Field}
			}
		}
		return &s
	})
	*b, err = json.Marshal(m)
	return r, err
}

// castValue is the JSON value v cast to typ, as Kafka's Cast casts it.
func castValue(v []byte, typ string) ([]byte, error) {
	if string(v) == "null" {
		return v, nil
	}
	var f float64
	var text string
	switch {
	case v[0] == '"':
		if err := json.Unmarshal(v, &text); err != nil {
			return nil, err
		}
		if typ == "string" {
			return v, nil
		}
		if typ == "boolean" {
			b, err := strconv.ParseBool(text)
			if err != nil {
				return nil, fmt.Errorf("%s is not a boolean", v)
			}
			return strconv.AppendBool(nil, b), nil
		}
		var err error
		if f, err = strconv.ParseFloat(text, 64); err != nil {
			return nil, fmt.Errorf("%s is not a number", v)
		}
	case string(v) == "true" || string(v) == "false":
		if typ == "string" {
			return json.Marshal(string(v))
		}
		if typ == "boolean" {
			return v, nil
		}
		if string(v) == "true" {
			f = 1
		}
	case v[0] == '{' || v[0] == '[':
		return nil, fmt.Errorf("an object or array cannot be cast to %s", typ)
	default:
		if typ == "string" {
			return json.Marshal(string(v))
		}
		var err error
		if f, err = strconv.ParseFloat(string(v), 64); err != nil {
			return nil, fmt.Errorf("%s is not a number", v)
		}
	}
	switch typ {
	case "boolean":
		return strconv.AppendBool(nil, f != 0), nil
	case "float32", "float64":
		return strconv.AppendFloat(nil, f, 'g', -1, 64), nil
	}
	bits := map[string]int{"int8": 8, "int16": 16, "int32": 32, "int64": 64}[typ]
	n := math.Trunc(f)
	if n < -math.Pow(2, float64(bits-1)) || n >= math.Pow(2, float64(bits-1)) {
		return nil, fmt.Errorf("%s does not fit an %s", v, typ)
	}
	return strconv.AppendInt(nil, int64(n), 10), nil
}

// flatten is Flatten: nested objects become fields named by their path.
type flatten struct {
	key       bool
	delimiter string
	schemas   *schemaCache
}

func newFlatten(s settings, key bool) (Transform, error) {
	d := s.get("delimiter")
	if d == "" {
		d = "."
	}
	return flatten{key: key, delimiter: d, schemas: &schemaCache{}}, nil
}

func (t flatten) Apply(r Record) (Record, error) {
	b, _, m, err := decodePart(&r, t.key)
	if m == nil {
		return r, err
	}
	out := map[string]json.RawMessage{}
	if err := t.flat("", m, out); err != nil {
		return r, err
	}
	sp := schemaOf(&r, t.key)
	*sp = t.schemas.of(*sp, func(in *connect.Schema) *connect.Schema {
		s := *in
		s.Fields = t.flatFields("", in.Fields, false, nil)
		return &s
	})
	*b, err = json.Marshal(out)
	return r, err
}

func (t flatten) flat(path string, m map[string]json.RawMessage, out map[string]json.RawMessage) error {
	for name, v := range m {
		if path != "" {
			name = path + t.delimiter + name
		}
		if len(v) > 0 && v[0] == '{' {
			var inner map[string]json.RawMessage
			if err := json.Unmarshal(v, &inner); err != nil {
				return err
			}
			if err := t.flat(name, inner, out); err != nil {
				return err
			}
			continue
		}
		out[name] = v
	}
	return nil
}

// flatFields are fields flattened under path; a field under an optional
// struct is optional.
func (t flatten) flatFields(path string, fields []connect.Schema, optional bool, out []connect.Schema) []connect.Schema {
	for _, f := range fields {
		name := f.Field
		if path != "" {
			name = path + t.delimiter + name
		}
		if f.Type == "struct" {
			out = t.flatFields(name, f.Fields, optional || f.Optional, out)
			continue
		}
		f.Field, f.Optional = name, f.Optional || optional
		out = append(out, f)
	}
	return out
}
