package postgres

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/causeway-stream/causeway/connect"
)

// ErrTruncateEvent is the error of a Debezium truncate event: no row
// stands for it.
var ErrTruncateEvent = errors.New("a truncate event: the sink writes rows, and leaves a table's truncation to its operator")

// changeEvent reads a Debezium change event (an envelope of before, after,
// source and op, which the sink reads as Debezium's own JDBC sink does,
// without ExtractNewRecordState) as the row it leaves: after for a create,
// read or update; a tombstone of its key for a delete. ok is false for a
// record that is not one: its schema is not an envelope's, or, without a
// schema, it lacks op, source or after.
func changeEvent(r connect.Record) (out connect.Record, ok bool, err error) {
	if r.Value == nil || !looksLikeEvent(r) {
		return r, false, nil
	}
	var ev struct {
		Op    string          `json:"op"`
		After json.RawMessage `json:"after"`
	}
	if err := json.Unmarshal(r.Value, &ev); err != nil || ev.Op == "" {
		return r, false, nil //nolint:nilerr // not an event after all: written as it is
	}
	switch ev.Op {
	case "c", "r", "u":
		r.Value = ev.After
		if r.ValueSchema != nil {
			r.ValueSchema = r.ValueSchema.FieldSchema("after")
		}
	case "d":
		r.Value, r.ValueSchema = nil, nil
	case "t":
		return r, true, ErrTruncateEvent
	default:
		return r, true, fmt.Errorf("a change event's op %q is not c, r, u, d or t", ev.Op)
	}
	return r, true, nil
}

// rowsOfEvents reads the change events among recs as their rows
// (changeEvent), and returns the others as they are; an event no row
// stands for (a truncate) is refused.
func rowsOfEvents(recs []connect.Record) ([]connect.Record, []connect.Rejected) {
	first := slices.IndexFunc(recs, looksLikeEvent)
	if first < 0 {
		return recs, nil // the common case: no event, nothing copied
	}
	var rejected []connect.Rejected
	out := append(make([]connect.Record, 0, len(recs)), recs[:first]...)
	for _, r := range recs[first:] {
		row, _, err := changeEvent(r)
		if err != nil {
			rejected = append(rejected, connect.Rejected{Record: r, Err: err})
			continue
		}
		out = append(out, row)
	}
	return out, rejected
}

// looksLikeEvent reports whether r's value is shaped as a change event:
// by its schema when it has one, else by its top-level fields.
func looksLikeEvent(r connect.Record) bool {
	if r.Value == nil {
		return false
	}
	if s := r.ValueSchema; s != nil {
		return s.Type == "struct" && strings.HasSuffix(s.Name, ".Envelope") && s.FieldSchema("op") != nil && s.FieldSchema("after") != nil
	}
	v := r.Value
	return len(v) > 0 && v[0] == '{' && bytes.Contains(v, []byte(`"op"`)) && bytes.Contains(v, []byte(`"source"`)) && bytes.Contains(v, []byte(`"after"`))
}
