//go:build cgo

package connectworker

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/hamba/avro/v2"

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

// avroValueOf is v, a value in Kafka Connect's JSON form of the Connect
// schema s (numbers read as json.Number), as hamba/avro encodes it for
// the Avro schema as made by avroSchemaOf: a union's branch named, a
// decimal's bytes or number as a rational, a date or timestamp as a time.
// field names where v sits, for errors.
func avroValueOf(v any, s *connect.Schema, as avro.Schema, field string) (any, error) {
	if ref, ok := as.(*avro.RefSchema); ok {
		as = ref.Schema()
	}
	if v == nil {
		if s.Optional {
			return nil, nil
		}
		return nil, fmt.Errorf("%s: null, and its schema is not optional", field)
	}
	if u, ok := as.(*avro.UnionSchema); ok {
		branch := nonNull(u)
		inner, err := avroValueOf(v, s, branch, field)
		if err != nil {
			return nil, err
		}
		return map[string]any{unionBranchName(branch): inner}, nil
	}
	switch s.Type {
	case "struct":
		return structValue(v, s, as, field)
	case "array":
		a, ok := v.([]any)
		arr, isArr := as.(*avro.ArraySchema)
		if !ok || !isArr {
			return nil, fmt.Errorf("%s: %T is not an array", field, v)
		}
		out := make([]any, len(a))
		for i, x := range a {
			var err error
			if out[i], err = avroValueOf(x, s.Items, arr.Items(), fmt.Sprintf("%s[%d]", field, i)); err != nil {
				return nil, err
			}
		}
		return out, nil
	case "map":
		mv, ok := v.(map[string]any)
		ms, isMap := as.(*avro.MapSchema)
		if !ok || !isMap {
			return nil, fmt.Errorf("%s: %T is not a map", field, v)
		}
		out := make(map[string]any, len(mv))
		for k, x := range mv {
			var err error
			if out[k], err = avroValueOf(x, s.Values, ms.Values(), field+"."+k); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return primitiveValue(v, s, field)
}

// structValue is a struct's value as a record's.
func structValue(v any, s *connect.Schema, as avro.Schema, field string) (any, error) {
	mv, ok := v.(map[string]any)
	rec, isRec := as.(*avro.RecordSchema)
	if !ok || !isRec {
		return nil, fmt.Errorf("%s: %T is not a struct", field, v)
	}
	out := make(map[string]any, len(s.Fields))
	for i, f := range rec.Fields() {
		fs := &s.Fields[i]
		x, given := mv[fs.Field]
		if !given && fs.Default != nil {
			if err := json.Unmarshal(fs.Default, &x); err != nil {
				return nil, fmt.Errorf("%s.%s: its default: %w", field, fs.Field, err)
			}
		}
		var err error
		if out[f.Name()], err = avroValueOf(x, fs, f.Type(), strings.TrimPrefix(field+"."+fs.Field, ".")); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// unionBranchName is how hamba/avro names a union's branch in the map
// form of its value: a named schema by its full name, another by its type
// and logical type.
func unionBranchName(s avro.Schema) string {
	if ref, ok := s.(*avro.RefSchema); ok {
		s = ref.Schema()
	}
	if n, ok := s.(avro.NamedSchema); ok {
		return n.FullName()
	}
	name := string(s.Type())
	if p, ok := s.(*avro.PrimitiveSchema); ok && p.Logical() != nil {
		name += "." + string(p.Logical().Type())
	}
	return name
}

// primitiveValue is a primitive's value.
func primitiveValue(v any, s *connect.Schema, field string) (any, error) {
	bad := func() error { return fmt.Errorf("%s: %v is not a %s", field, v, s.Type) }
	switch s.Name {
	case connect.LogicalDecimal:
		return decimalValue(v, field)
	case connect.LogicalDate:
		n, err := integer(v, 32)
		if err != nil {
			return nil, bad()
		}
		return time.Unix(n*86400, 0).UTC(), nil
	case connect.LogicalTime:
		n, err := integer(v, 32)
		if err != nil {
			return nil, bad()
		}
		return time.Duration(n) * time.Millisecond, nil
	case connect.LogicalTimestamp:
		n, err := integer(v, 64)
		if err != nil {
			return nil, bad()
		}
		return time.UnixMilli(n).UTC(), nil
	}
	switch s.Type {
	case "int8", "int16", "int32":
		n, err := integer(v, map[string]int{"int8": 8, "int16": 16, "int32": 32}[s.Type])
		if err != nil {
			return nil, bad()
		}
		return int32(n), nil
	case "int64":
		n, err := integer(v, 64)
		if err != nil {
			return nil, bad()
		}
		return n, nil
	case "float32", "float64":
		num, ok := v.(json.Number)
		if !ok {
			return nil, bad()
		}
		f, err := num.Float64()
		if err != nil {
			return nil, bad()
		}
		if s.Type == "float32" {
			return float32(f), nil
		}
		return f, nil
	case "boolean":
		if b, ok := v.(bool); ok {
			return b, nil
		}
	case "string":
		if str, ok := v.(string); ok {
			return str, nil
		}
	case "bytes":
		if str, ok := v.(string); ok {
			if b, err := base64.StdEncoding.DecodeString(str); err == nil {
				return b, nil
			}
		}
	}
	return nil, bad()
}

// integer reads a whole number that fits in bits.
func integer(v any, bits int) (int64, error) {
	num, ok := v.(json.Number)
	if !ok {
		return 0, errNoAvroType
	}
	return strconv.ParseInt(string(num), 10, bits)
}

// decimalValue is a Decimal, given as its unscaled bytes in base64 (the
// JsonConverter's BASE64 format) or as a number (NUMERIC).
func decimalValue(v any, field string) (any, error) {
	switch x := v.(type) {
	case string:
		b, err := base64.StdEncoding.DecodeString(x)
		if err != nil {
			return nil, fmt.Errorf("%s: a Decimal's bytes: %w", field, err)
		}
		return b, nil
	case json.Number:
		r, ok := new(big.Rat).SetString(string(x))
		if !ok {
			return nil, fmt.Errorf("%s: %s is not a number", field, x)
		}
		return r, nil
	}
	return nil, fmt.Errorf("%s: %v is not a Decimal", field, v)
}
