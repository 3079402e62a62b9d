package connect

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Schema is a Kafka Connect schema, in the JSON form Kafka Connect's
// JsonConverter writes beside a payload when schemas.enable is true. A
// sink reads a record's payload by it: which fields exist, of what types,
// which may be null, and the logical types (Decimal, Date, Time,
// Timestamp) whose payload is not their value as written.
type Schema struct {
	// Type is one of Connect's types: int8, int16, int32, int64,
	// float32, float64, boolean, string, bytes, array, map, struct.
	Type     string `json:"type"`
	Optional bool   `json:"optional,omitempty"`
	// Default is the value of a field not given, as the payload would
	// hold it.
	Default json.RawMessage `json:"default,omitempty"`
	// Name names a logical type (see the Logical names) or a struct.
	Name       string            `json:"name,omitempty"`
	Version    int               `json:"version,omitempty"`
	Doc        string            `json:"doc,omitempty"`
	Parameters map[string]string `json:"parameters,omitempty"`
	// Fields are a struct's fields, in order, each with its Field name.
	Fields []Schema `json:"fields,omitempty"`
	// Field is the name of a struct's field.
	Field string `json:"field,omitempty"`
	// Items is an array's element schema; Keys and Values a map's.
	Items  *Schema `json:"items,omitempty"`
	Keys   *Schema `json:"keys,omitempty"`
	Values *Schema `json:"values,omitempty"`
}

// Kafka Connect's logical types, by the names their schemas carry.
const (
	// LogicalDecimal: bytes holding a big-endian two's-complement
	// unscaled value, its scale in the "scale" parameter (or a JSON
	// number, with the JsonConverter's decimal.format NUMERIC).
	LogicalDecimal = "org.apache.kafka.connect.data.Decimal"
	// LogicalDate: int32 days since 1970-01-01.
	LogicalDate = "org.apache.kafka.connect.data.Date"
	// LogicalTime: int32 milliseconds since midnight.
	LogicalTime = "org.apache.kafka.connect.data.Time"
	// LogicalTimestamp: int64 milliseconds since the Unix epoch, UTC.
	LogicalTimestamp = "org.apache.kafka.connect.data.Timestamp"
)

// ErrBadSchema is matched by the errors of ParseSchema.
var ErrBadSchema = errors.New("invalid Connect schema")

// ParseSchema reads a schema in the JsonConverter's form and checks its
// types.
func ParseSchema(b []byte) (*Schema, error) {
	var s Schema
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadSchema, err)
	}
	if err := s.check("schema"); err != nil {
		return nil, err
	}
	return &s, nil
}

func (s *Schema) check(where string) error {
	switch s.Type {
	case "int8", "int16", "int32", "int64", "float32", "float64", "boolean", "string", "bytes":
		return nil
	case "struct":
		for i := range s.Fields {
			f := &s.Fields[i]
			if f.Field == "" {
				return fmt.Errorf("%w: field %d of %s has no name", ErrBadSchema, i, where)
			}
			if err := f.check(where + "." + f.Field); err != nil {
				return err
			}
		}
		return nil
	case "array":
		if s.Items == nil {
			return fmt.Errorf("%w: the array %s has no items schema", ErrBadSchema, where)
		}
		return s.Items.check(where + "[]")
	case "map":
		if s.Keys == nil || s.Values == nil {
			return fmt.Errorf("%w: the map %s lacks its keys or values schema", ErrBadSchema, where)
		}
		if err := s.Keys.check(where + ".keys"); err != nil {
			return err
		}
		return s.Values.check(where + ".values")
	default:
		return fmt.Errorf("%w: %s has the unknown type %q", ErrBadSchema, where, s.Type)
	}
}

// FieldSchema returns the schema of the struct field name, nil when s is
// not a struct or has no such field.
func (s *Schema) FieldSchema(name string) *Schema {
	if s == nil {
		return nil
	}
	for i := range s.Fields {
		if s.Fields[i].Field == name {
			return &s.Fields[i]
		}
	}
	return nil
}
