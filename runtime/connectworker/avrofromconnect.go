//go:build cgo

package connectworker

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/causeway-stream/causeway/connect"
)

// The Avro properties in which Confluent's AvroData keeps what a Connect
// schema says and Avro has no word for; connectSchemaOf reads them back.
const (
	propName       = "connect.name"
	propVersion    = "connect.version"
	propDoc        = "connect.doc"
	propParameters = "connect.parameters"
	propType       = "connect.type"
	// paramPrecision is the Decimal parameter that carries the precision.
	paramPrecision = "connect.decimal.precision"
)

// The record name Confluent gives a struct without a name, in its
// namespace; the second is ConnectDefault2, and so on.
const (
	defaultNamespace  = "io.confluent.connect.avro"
	defaultRecordName = "ConnectDefault"
)

// errNoAvroType is matched by the errors of avroSchemaOf and avroValueOf.
var errNoAvroType = errors.New("no Avro form")

// avroSchemaOf is the Avro schema of a Connect schema, as Confluent's
// AvroData makes it (AvroConverter with connect.meta.data on): a struct is
// a record named by the schema's name (ConnectDefault when it has none),
// each named record written once and named after, an optional value a
// union of null and it with null as its default, int8 and int16 an int
// that says which, the logical types Avro's (decimal, date, time-millis,
// timestamp-millis), and a name, version, doc or parameters of any other
// schema in the connect.* properties, so that a reader gets the schema
// back whole (Debezium's io.debezium.time.* among them).
func avroSchemaOf(s *connect.Schema) (string, error) {
	m := avroMaker{defined: map[string]bool{}}
	v, err := m.schema(s, true)
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(v)
	return string(b), err
}

// avroMaker makes the Avro schema of one Connect schema.
type avroMaker struct {
	// defined are the records written so far, by full name.
	defined  map[string]bool
	defaults int
}

// schema is s in Avro's JSON form; nullable says an optional s is
// written as a union with null (false inside a union made already).
func (m *avroMaker) schema(s *connect.Schema, nullable bool) (any, error) {
	if s.Optional && nullable {
		inner, err := m.schema(s, false)
		if err != nil {
			return nil, err
		}
		return []any{"null", inner}, nil
	}
	if s.Type == "struct" {
		return m.record(s)
	}
	out := map[string]any{}
	switch s.Type {
	case "int8", "int16":
		out["type"], out[propType] = "int", s.Type
	case "int32":
		out["type"] = "int"
	case "int64":
		out["type"] = "long"
	case "float32":
		out["type"] = "float"
	case "float64":
		out["type"] = "double"
	case "boolean", "string", "bytes":
		out["type"] = s.Type
	case "array":
		if s.Items == nil {
			return nil, fmt.Errorf("%w: an array without its items' schema", errNoAvroType)
		}
		items, err := m.schema(s.Items, true)
		if err != nil {
			return nil, err
		}
		out["type"], out["items"] = "array", items
	case "map":
		if s.Keys == nil || s.Values == nil || s.Keys.Type != "string" || s.Keys.Optional {
			// Confluent writes other maps as arrays of key and value
			// records; no source here makes one.
			return nil, fmt.Errorf("%w: a map whose keys are not strings", errNoAvroType)
		}
		values, err := m.schema(s.Values, true)
		if err != nil {
			return nil, err
		}
		out["type"], out["values"] = "map", values
	default:
		return nil, fmt.Errorf("%w: the Connect type %q", errNoAvroType, s.Type)
	}
	if err := logicalType(s, out); err != nil {
		return nil, err
	}
	m.meta(s, out, propDoc)
	if len(out) == 1 {
		return out["type"], nil // a plain primitive is written by its name
	}
	return out, nil
}

// logicalType sets the Avro logical type of Connect's logical types.
func logicalType(s *connect.Schema, out map[string]any) error {
	switch s.Name {
	case connect.LogicalDecimal:
		scale, err := strconv.Atoi(s.Parameters["scale"])
		if err != nil {
			return fmt.Errorf("%w: a Decimal without its scale", errNoAvroType)
		}
		precision := 64 // Confluent's, when the schema gives none
		if p, err := strconv.Atoi(s.Parameters[paramPrecision]); err == nil {
			precision = p
		}
		out["logicalType"], out["precision"], out["scale"] = "decimal", precision, scale
	case connect.LogicalDate:
		out["logicalType"] = "date"
	case connect.LogicalTime:
		out["logicalType"] = "time-millis"
	case connect.LogicalTimestamp:
		out["logicalType"] = "timestamp-millis"
	}
	return nil
}

// meta writes s's name, version, doc (under docKey) and parameters as
// connect.* properties.
func (m *avroMaker) meta(s *connect.Schema, out map[string]any, docKey string) {
	if s.Name != "" {
		out[propName] = s.Name
	}
	if s.Version != 0 {
		out[propVersion] = s.Version
	}
	if s.Doc != "" {
		out[docKey] = s.Doc
	}
	if len(s.Parameters) > 0 {
		out[propParameters] = s.Parameters
	}
}

// record is a struct's record, or its name when it was written already.
func (m *avroMaker) record(s *connect.Schema) (any, error) {
	full := s.Name
	if full == "" {
		m.defaults++
		full = defaultNamespace + "." + defaultRecordName
		if m.defaults > 1 {
			full += strconv.Itoa(m.defaults)
		}
	}
	if m.defined[full] {
		return full, nil
	}
	m.defined[full] = true
	out := map[string]any{"type": "record", "name": full}
	if i := strings.LastIndexByte(full, '.'); i >= 0 {
		out["namespace"], out["name"] = full[:i], full[i+1:]
	}
	fields := make([]any, 0, len(s.Fields))
	for i := range s.Fields {
		f := &s.Fields[i]
		t, err := m.schema(f, true)
		if err != nil {
			return nil, fmt.Errorf("field %q: %w", f.Field, err)
		}
		field := map[string]any{"name": f.Field, "type": t}
		switch {
		case f.Optional && f.Default == nil:
			field["default"] = nil
		case f.Default != nil && f.Type != "bytes" && f.Type != "struct" && f.Name == "":
			// A Connect default of a primitive is its Avro default too;
			// an optional field with one would need it first in the union.
			if !f.Optional {
				field["default"] = f.Default
			}
		}
		fields = append(fields, field)
	}
	out["fields"] = fields
	if s.Name != "" {
		m.meta(s, out, "doc")
	}
	return out, nil
}
