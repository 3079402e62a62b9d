package transform

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/causeway-stream/causeway/connect"
	"github.com/causeway-stream/causeway/framework"
)

// dropHeaders is DropHeaders.
type dropHeaders struct{ names []string }

func newDropHeaders(s settings, _ bool) (Transform, error) {
	names := s.list("headers")
	if len(names) == 0 {
		return nil, s.missing("headers")
	}
	return dropHeaders{names: names}, nil
}

func (t dropHeaders) Apply(r Record) (Record, error) {
	r.Headers = slices.DeleteFunc(slices.Clone(r.Headers), func(h framework.Header) bool { return slices.Contains(t.names, h.Key) })
	return r, nil
}

// insertHeader is InsertHeader: a header with a literal value.
type insertHeader struct{ name, value string }

func newInsertHeader(s settings, _ bool) (Transform, error) {
	if s.get("header") == "" {
		return nil, s.missing("header")
	}
	if _, ok := s.cfg[s.key("value.literal")]; !ok {
		return nil, s.missing("value.literal")
	}
	return insertHeader{name: s.get("header"), value: s.get("value.literal")}, nil
}

func (t insertHeader) Apply(r Record) (Record, error) {
	r.Headers = append(slices.Clone(r.Headers), framework.Header{Key: t.name, Value: []byte(t.value)})
	return r, nil
}

// headerFrom is HeaderFrom: fields of the key (or value) copied or moved
// into headers, a string as its text, anything else as its JSON.
type headerFrom struct {
	key            bool
	fields, names  []string
	move           bool
	replaceSchemas *schemaCache
}

func newHeaderFrom(s settings, key bool) (Transform, error) {
	t := headerFrom{key: key, fields: s.list("fields"), names: s.list("headers"), replaceSchemas: &schemaCache{}}
	switch op := s.get("operation"); op {
	case "move":
		t.move = true
	case "copy":
	default:
		return nil, &connect.FieldError{Field: s.key("operation"), Reason: fmt.Sprintf("%q is not copy or move", op)}
	}
	if len(t.fields) == 0 || len(t.fields) != len(t.names) {
		return nil, &connect.FieldError{Field: s.key("headers"), Reason: "must name one header for each of fields"}
	}
	return t, nil
}

func (t headerFrom) Apply(r Record) (Record, error) {
	b, _, m, err := decodePart(&r, t.key)
	if m == nil {
		return r, err
	}
	r.Headers = slices.Clone(r.Headers)
	for i, f := range t.fields {
		v, ok := m[f]
		if !ok {
			continue
		}
		var text string
		if json.Unmarshal(v, &text) != nil {
			text = string(v)
		}
		r.Headers = append(r.Headers, framework.Header{Key: t.names[i], Value: []byte(text)})
		if t.move {
			delete(m, f)
		}
	}
	if !t.move {
		return r, nil
	}
	sp := schemaOf(&r, t.key)
	*sp = t.replaceSchemas.of(*sp, func(in *connect.Schema) *connect.Schema {
		s := *in
		s.Fields = slices.DeleteFunc(slices.Clone(in.Fields), func(f connect.Schema) bool { return slices.Contains(t.fields, f.Field) })
		return &s
	})
	*b, err = json.Marshal(m)
	return r, err
}
