package transform

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/causeway-stream/causeway/connect"
)

// schemaCache keeps what a transform made of each schema it was given, so
// that records of one schema keep sharing one (a sink caches its work per
// schema).
type schemaCache struct {
	mu sync.Mutex
	m  map[*connect.Schema]*connect.Schema
}

// of is what change makes of in, made once; nil for nil.
func (c *schemaCache) of(in *connect.Schema, change func(*connect.Schema) *connect.Schema) *connect.Schema {
	if in == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if out, ok := c.m[in]; ok {
		return out
	}
	if c.m == nil || len(c.m) >= 1000 {
		c.m = map[*connect.Schema]*connect.Schema{}
	}
	out := change(in)
	c.m[in] = out
	return out
}

// partOf is where r's key (or value) lies.
func partOf(r *Record, key bool) *[]byte {
	if key {
		return &r.Key
	}
	return &r.Value
}

// schemaOf is where r's key's (or value's) schema lies.
func schemaOf(r *Record, key bool) **connect.Schema {
	if key {
		return &r.KeySchema
	}
	return &r.ValueSchema
}

// replace is ReplaceField.
type replace struct {
	key     bool
	exclude map[string]bool
	include map[string]bool
	renames map[string]string
	schemas *schemaCache
}

// newReplace takes Kafka's names and their older ones (blacklist,
// whitelist).
func newReplace(s settings, key bool) (Transform, error) {
	r := &replace{key: key, exclude: set(append(s.list("exclude"), s.list("blacklist")...)),
		include: set(append(s.list("include"), s.list("whitelist")...)), renames: map[string]string{}, schemas: &schemaCache{}}
	for _, pair := range s.list("renames") {
		from, to, ok := strings.Cut(pair, ":")
		if !ok || from == "" || to == "" {
			return r, &connect.FieldError{Field: s.key("renames"), Reason: fmt.Sprintf("%q is not old:new", pair)}
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

// keep is the name a field keeps, and whether it is kept.
func (t *replace) keep(name string) (string, bool) {
	if t.exclude[name] || (t.include != nil && !t.include[name]) {
		return "", false
	}
	if to, ok := t.renames[name]; ok {
		return to, true
	}
	return name, true
}

func (t *replace) Apply(r Record) (Record, error) {
	b, _, m, err := decodePart(&r, t.key)
	if m == nil {
		return r, err
	}
	out := make(map[string]json.RawMessage, len(m))
	for name, v := range m {
		if to, ok := t.keep(name); ok {
			out[to] = v
		}
	}
	sp := schemaOf(&r, t.key)
	*sp = t.schemas.of(*sp, func(in *connect.Schema) *connect.Schema {
		s := *in
		s.Fields = nil
		for _, f := range in.Fields {
			if to, ok := t.keep(f.Field); ok {
				f.Field = to
				s.Fields = append(s.Fields, f)
			}
		}
		return &s
	})
	*b, err = json.Marshal(out)
	return r, err
}

// valueToKey is ValueToKey.
type valueToKey struct {
	fields  []string
	schemas *schemaCache
}

func newValueToKey(s settings, _ bool) (Transform, error) {
	fields := s.list("fields")
	if len(fields) == 0 {
		return nil, s.missing("fields")
	}
	return valueToKey{fields: fields, schemas: &schemaCache{}}, nil
}

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
	r.KeySchema = t.schemas.of(r.ValueSchema, func(in *connect.Schema) *connect.Schema {
		s := &connect.Schema{Type: "struct"}
		for _, f := range t.fields {
			if fs := in.FieldSchema(f); fs != nil {
				s.Fields = append(s.Fields, *fs)
			}
		}
		return s
	})
	r.Key, err = json.Marshal(key)
	return r, err
}

// extract is ExtractField.
type extract struct {
	key   bool
	field string
}

func newExtract(s settings, key bool) (Transform, error) {
	if s.get("field") == "" {
		return nil, s.missing("field")
	}
	return extract{key: key, field: s.get("field")}, nil
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
	if sp := schemaOf(&r, t.key); *sp != nil {
		*sp = (*sp).FieldSchema(t.field) // a field's schema is part of its struct's: shared
	}
	return r, nil
}

// hoist is HoistField.
type hoist struct {
	key     bool
	field   string
	schemas *schemaCache
}

func newHoist(s settings, key bool) (Transform, error) {
	if s.get("field") == "" {
		return nil, s.missing("field")
	}
	return hoist{key: key, field: s.get("field"), schemas: &schemaCache{}}, nil
}

func (t hoist) Apply(r Record) (Record, error) {
	b := partOf(&r, t.key)
	if *b == nil {
		return r, nil
	}
	name, err := json.Marshal(t.field)
	if err != nil {
		return r, err
	}
	*b = append(append(append(append([]byte{'{'}, name...), ':'), *b...), '}')
	sp := schemaOf(&r, t.key)
	*sp = t.schemas.of(*sp, func(in *connect.Schema) *connect.Schema {
		f := *in
		f.Field = t.field
		return &connect.Schema{Type: "struct", Fields: []connect.Schema{f}}
	})
	return r, nil
}

// insertField is InsertField: fields with the record's topic,
// partition, offset and timestamp, and one static field.
type insertField struct {
	key                                       bool
	topic, partition, offset, stamp, constant string
	value                                     string
	schemas                                   *schemaCache
}

func newInsert(s settings, key bool) (Transform, error) {
	name := func(k string) string { return strings.TrimRight(s.get(k), "!?") } // Kafka's required/optional marks
	t := insertField{key: key, topic: name("topic.field"), partition: name("partition.field"), offset: name("offset.field"),
		stamp: name("timestamp.field"), constant: name("static.field"), value: s.get("static.value"), schemas: &schemaCache{}}
	if t.topic+t.partition+t.offset+t.stamp+t.constant == "" {
		return nil, &connect.FieldError{Field: s.key("topic.field"), Reason: "no field to insert: give topic.field, partition.field, offset.field, timestamp.field or static.field"}
	}
	return t, nil
}

// fields are the fields t inserts into r, with their schemas.
func (t insertField) fields(r Record) ([]string, []json.RawMessage, []connect.Schema) {
	var names []string
	var vals []json.RawMessage
	var schemas []connect.Schema
	add := func(name string, v []byte, s connect.Schema) {
		if name != "" {
			s.Optional, s.Field = true, name
			names, vals, schemas = append(names, name), append(vals, v), append(schemas, s)
		}
	}
	topic, _ := json.Marshal(r.Topic)
	add(t.topic, topic, connect.Schema{Type: "string"})
	add(t.partition, fmt.Append(nil, r.Partition), connect.Schema{Type: "int32"})
	add(t.offset, fmt.Append(nil, r.Offset), connect.Schema{Type: "int64"})
	stamp := []byte("null")
	if !r.Timestamp.IsZero() {
		stamp = fmt.Append(nil, r.Timestamp.UnixMilli())
	}
	add(t.stamp, stamp, connect.Schema{Type: "int64", Name: connect.LogicalTimestamp, Version: 1})
	constant, _ := json.Marshal(t.value)
	add(t.constant, constant, connect.Schema{Type: "string"})
	return names, vals, schemas
}

func (t insertField) Apply(r Record) (Record, error) {
	b, _, m, err := decodePart(&r, t.key)
	if m == nil {
		return r, err
	}
	names, vals, schemas := t.fields(r)
	for i, n := range names {
		m[n] = vals[i]
	}
	sp := schemaOf(&r, t.key)
	*sp = t.schemas.of(*sp, func(in *connect.Schema) *connect.Schema {
		s := *in
		s.Fields = append(append([]connect.Schema(nil), in.Fields...), schemas...)
		return &s
	})
	*b, err = json.Marshal(m)
	return r, err
}

// mask is MaskField.
type mask struct {
	key         bool
	fields      []string
	replacement string
}

func newMask(s settings, key bool) (Transform, error) {
	fields := s.list("fields")
	if len(fields) == 0 {
		return nil, s.missing("fields")
	}
	return mask{key: key, fields: fields, replacement: s.get("replacement")}, nil
}

func (t mask) Apply(r Record) (Record, error) {
	b, what, m, err := decodePart(&r, t.key)
	if m == nil {
		return r, err
	}
	for _, f := range t.fields {
		v, ok := m[f]
		if !ok || string(v) == "null" {
			continue
		}
		switch v[0] {
		case '"':
			m[f], _ = json.Marshal(t.replacement)
		case '{':
			m[f] = json.RawMessage(`{}`)
		case '[':
			m[f] = json.RawMessage(`[]`)
		case 't', 'f':
			m[f] = json.RawMessage(`false`)
		default:
			m[f] = json.RawMessage(`0`)
			if t.replacement != "" {
				if !json.Valid([]byte(t.replacement)) {
					return r, fmt.Errorf("the replacement %q cannot stand for the number in the %s's field %q", t.replacement, what, f)
				}
				m[f] = json.RawMessage(t.replacement)
			}
		}
	}
	*b, err = json.Marshal(m)
	return r, err
}
