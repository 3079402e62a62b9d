//go:build cgo

package connectworker

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/hamba/avro/v2"

	"github.com/causeway-stream/causeway/connect"
)

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
