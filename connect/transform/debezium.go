package transform

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/causeway-stream/causeway/connect"
)

// ExtractNewRecordState is Debezium's transform that turns a change
// event (an envelope of before, after, source and op) into the row it
// leaves: its after, as a sink of rows wants it.
const ExtractNewRecordState = "io.debezium.transforms.ExtractNewRecordState"

// ErrTruncate is the error of a truncate event reaching
// ExtractNewRecordState: no row stands for it, and dropping it would let
// the sink's table keep what the source's lost.
var ErrTruncate = errors.New("a truncate event has no row (leave t out of the source's skipped.operations, or send it elsewhere with a predicate)")

// newRecordState is ExtractNewRecordState: delete.handling.mode drop
// (the default: a delete event is dropped), none (it becomes a tombstone
// of its key) or rewrite (its before, with __deleted "true"; other rows
// get "false"); drop.tombstones true (the default) drops tombstones.
// Records that are not change events (no op) pass as they are.
type newRecordState struct {
	deletes        string
	dropTombstones bool
	schemas        *schemaCache
}

func newNewRecordState(s settings, _ bool) (Transform, error) {
	for name := range s.cfg {
		if rest, ok := strings.CutPrefix(name, s.prefix); ok && !slices.Contains([]string{"type", "predicate", "negate", "delete.handling.mode", "drop.tombstones"}, rest) {
			return nil, &connect.FieldError{Field: name, Reason: "is not supported: ExtractNewRecordState takes delete.handling.mode and drop.tombstones"}
		}
	}
	t := newRecordState{deletes: "drop", dropTombstones: true, schemas: &schemaCache{}}
	if v := s.get("delete.handling.mode"); v != "" {
		if !slices.Contains([]string{"drop", "none", "rewrite"}, v) {
			return nil, &connect.FieldError{Field: s.key("delete.handling.mode"), Reason: fmt.Sprintf("%q is not one of drop, none, rewrite", v)}
		}
		t.deletes = v
	}
	switch v := s.get("drop.tombstones"); v {
	case "", "true":
	case "false":
		t.dropTombstones = false
	default:
		return nil, &connect.FieldError{Field: s.key("drop.tombstones"), Reason: fmt.Sprintf("%q is not true or false", v)}
	}
	return t, nil
}

func (t newRecordState) Apply(r Record) (Record, error) {
	if r.Value == nil {
		if t.dropTombstones {
			return r, connect.ErrFiltered
		}
		return r, nil
	}
	m, err := object(r.Value, "value")
	if err != nil {
		return r, err
	}
	var op string
	if raw, ok := m["op"]; !ok || json.Unmarshal(raw, &op) != nil {
		return r, nil // not a change event: a heartbeat, a schema change
	}
	switch op {
	case "c", "r", "u":
		return t.row(r, m, "after", "false")
	case "d":
		switch t.deletes {
		case "drop":
			return r, connect.ErrFiltered
		case "none":
			r.Value, r.ValueSchema = nil, nil
			return r, nil
		}
		return t.row(r, m, "before", "true")
	case "t":
		return r, ErrTruncate
	}
	return r, fmt.Errorf("a change event's op %q is not c, r, u, d or t", op)
}

// row makes the record's value the row in field, with __deleted when
// deletes are rewritten.
func (t newRecordState) row(r Record, m map[string]json.RawMessage, field, deleted string) (Record, error) {
	row := m[field]
	if t.deletes != "rewrite" {
		r.Value = row
		if r.ValueSchema != nil {
			r.ValueSchema = r.ValueSchema.FieldSchema(field)
		}
		return r, nil
	}
	fields, err := object(row, "value's "+field)
	if err != nil {
		return r, err
	}
	fields["__deleted"] = json.RawMessage(`"` + deleted + `"`)
	if r.Value, err = json.Marshal(fields); err != nil {
		return r, err
	}
	r.ValueSchema = t.schemas.of(r.ValueSchema.FieldSchema(field), func(in *connect.Schema) *connect.Schema {
		out := *in
		out.Fields = append(slices.Clone(in.Fields), connect.Schema{Type: "string", Optional: true, Field: "__deleted"})
		return &out
	})
	return r, nil
}
