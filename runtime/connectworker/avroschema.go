//go:build cgo

package connectworker

import (
	"encoding/json"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/hamba/avro/v2"

	"github.com/causeway-stream/causeway/connect"
)

// avroPlan is how the Avro converter reads the records of one writer's
// schema: the schema, and the Connect schema it hands on with them.
type avroPlan struct {
	schema avro.Schema
	// api decodes with caches of its own (see writePlan).
	api     avro.API
	connect *connect.Schema
}

// newAvroPlan parses a writer's schema as the registry gives it.
func newAvroPlan(text string) (*avroPlan, error) {
	s, err := avro.ParseWithCache(text, "", &avro.SchemaCache{})
	if err != nil {
		return nil, fmt.Errorf("the writer's schema: %w", err)
	}
	cs, err := connectSchemaOf(s)
	if err != nil {
		return nil, err
	}
	return &avroPlan{schema: s, api: avro.Config{}.Freeze(), connect: cs}, nil
}

// connectSchemaOf is the Connect schema of an Avro schema, as Confluent's
// AvroConverter maps them: a record is a struct, a union with null an
// optional value, an enum a string, and the logical types decimal, date,
// time-millis and timestamp-millis Connect's; what the connect.*
// properties say (a name, version, doc, parameters, int8 or int16: see
// avroSchemaOf) is taken back.
func connectSchemaOf(s avro.Schema) (*connect.Schema, error) {
	out, err := connectSchemaOfType(s)
	if err != nil {
		return nil, err
	}
	if p, ok := s.(interface{ Prop(string) any }); ok {
		withConnectProps(out, p)
	}
	return out, nil
}

// withConnectProps sets on c what the connect.* properties of its Avro
// schema say.
func withConnectProps(c *connect.Schema, p interface{ Prop(string) any }) {
	if t, ok := p.Prop(propType).(string); ok && (t == "int8" || t == "int16") && c.Type == "int32" {
		c.Type = t
	}
	if n, ok := p.Prop(propName).(string); ok && c.Type != "struct" {
		c.Name = n
	}
	if v, ok := p.Prop(propVersion).(float64); ok {
		c.Version = int(v)
	}
	if d, ok := p.Prop(propDoc).(string); ok {
		c.Doc = d
	}
	if params, ok := p.Prop(propParameters).(map[string]any); ok {
		c.Parameters = map[string]string{}
		for k, v := range params {
			c.Parameters[k] = fmt.Sprint(v)
		}
	}
}

func connectSchemaOfType(s avro.Schema) (*connect.Schema, error) {
	switch t := s.(type) {
	case *avro.RefSchema:
		return connectSchemaOf(t.Schema())
	case *avro.RecordSchema:
		out := &connect.Schema{Type: "struct", Name: t.FullName(), Doc: t.Doc()}
		if strings.HasPrefix(out.Name, defaultNamespace+"."+defaultRecordName) {
			out.Name = "" // a struct that had no name
		}
		for _, f := range t.Fields() {
			fs, err := connectSchemaOf(f.Type())
			if err != nil {
				return nil, fmt.Errorf("field %q: %w", f.Name(), err)
			}
			c := *fs
			c.Field = f.Name()
			if f.HasDefault() && f.Default() != nil {
				if b, err := json.Marshal(toConnect(f.Default(), f.Type())); err == nil {
					c.Default = b
				}
			}
			out.Fields = append(out.Fields, c)
		}
		return out, nil
	case *avro.UnionSchema:
		if !t.Nullable() || len(t.Types()) != 2 {
			return nil, fmt.Errorf("a union of %d types other than with null has no Connect type here", len(t.Types()))
		}
		inner, err := connectSchemaOf(nonNull(t))
		if err != nil {
			return nil, err
		}
		c := *inner
		c.Optional = true
		return &c, nil
	case *avro.ArraySchema:
		items, err := connectSchemaOf(t.Items())
		if err != nil {
			return nil, err
		}
		return &connect.Schema{Type: "array", Items: items}, nil
	case *avro.MapSchema:
		values, err := connectSchemaOf(t.Values())
		if err != nil {
			return nil, err
		}
		return &connect.Schema{Type: "map", Keys: &connect.Schema{Type: "string"}, Values: values}, nil
	case *avro.EnumSchema:
		return &connect.Schema{Type: "string"}, nil
	case *avro.FixedSchema:
		if d, ok := t.Logical().(*avro.DecimalLogicalSchema); ok {
			return decimalSchema(d), nil
		}
		return &connect.Schema{Type: "bytes"}, nil
	case *avro.PrimitiveSchema:
		return primitiveSchema(t), nil
	}
	return nil, fmt.Errorf("the Avro type %q has no Connect type here", s.Type())
}

func decimalSchema(d *avro.DecimalLogicalSchema) *connect.Schema {
	return &connect.Schema{Type: "bytes", Name: connect.LogicalDecimal, Version: 1, Parameters: map[string]string{"scale": strconv.Itoa(d.Scale())}}
}

func primitiveSchema(t *avro.PrimitiveSchema) *connect.Schema {
	var logical avro.LogicalType
	if l := t.Logical(); l != nil {
		logical = l.Type()
	}
	switch {
	case logical == avro.Decimal:
		return decimalSchema(t.Logical().(*avro.DecimalLogicalSchema))
	case logical == avro.Date:
		return &connect.Schema{Type: "int32", Name: connect.LogicalDate, Version: 1}
	case logical == avro.TimeMillis:
		return &connect.Schema{Type: "int32", Name: connect.LogicalTime, Version: 1}
	case logical == avro.TimestampMillis:
		return &connect.Schema{Type: "int64", Name: connect.LogicalTimestamp, Version: 1}
	}
	typ := map[avro.Type]string{avro.Int: "int32", avro.Long: "int64", avro.Float: "float32", avro.Double: "float64",
		avro.Boolean: "boolean", avro.String: "string", avro.Bytes: "bytes"}[t.Type()]
	if typ == "" {
		typ = "string" // null alone: never a value
	}
	return &connect.Schema{Type: typ}
}

// nonNull is the branch of a union with null that is not null.
func nonNull(u *avro.UnionSchema) avro.Schema {
	for _, b := range u.Types() {
		if b.Type() != avro.Null {
			return b
		}
	}
	return u.Types()[0]
}

// toConnect is a value decoded from Avro (hamba/avro's Go values) in
// Kafka Connect's JSON form of its Connect schema: a union's branch
// unwrapped, a timestamp in milliseconds, a date in days, a time of day
// in milliseconds, a decimal as its number.
func toConnect(v any, s avro.Schema) any {
	if v == nil {
		return nil
	}
	switch t := s.(type) {
	case *avro.RefSchema:
		return toConnect(v, t.Schema())
	case *avro.UnionSchema:
		if m, ok := v.(map[string]any); ok && len(m) == 1 && t.Nullable() {
			for _, inner := range m {
				return toConnect(inner, nonNull(t))
			}
		}
		return toConnect(v, nonNull(t))
	case *avro.RecordSchema:
		m, ok := v.(map[string]any)
		if !ok {
			return v
		}
		out := make(map[string]any, len(m))
		for _, f := range t.Fields() {
			if fv, ok := m[f.Name()]; ok {
				out[f.Name()] = toConnect(fv, f.Type())
			}
		}
		return out
	case *avro.ArraySchema:
		if a, ok := v.([]any); ok {
			out := make([]any, len(a))
			for i, x := range a {
				out[i] = toConnect(x, t.Items())
			}
			return out
		}
	case *avro.MapSchema:
		if m, ok := v.(map[string]any); ok {
			out := make(map[string]any, len(m))
			for k, x := range m {
				out[k] = toConnect(x, t.Values())
			}
			return out
		}
	}
	return logicalValue(v, s)
}

// logicalValue is a value of a primitive or fixed schema s in Connect's
// JSON form: hamba/avro gives dates and timestamps as times, times of day
// as durations, decimals as rationals.
func logicalValue(v any, s avro.Schema) any {
	var logical avro.LogicalSchema
	switch t := s.(type) {
	case *avro.PrimitiveSchema:
		logical = t.Logical()
	case *avro.FixedSchema:
		logical = t.Logical()
	}
	if logical == nil {
		return v
	}
	switch x := v.(type) {
	case time.Time:
		switch logical.Type() {
		case avro.Date:
			days := x.Unix() / 86400
			if x.Unix() < 0 && x.Unix()%86400 != 0 {
				days-- // floor, before 1970
			}
			return days
		case avro.TimestampMicros:
			return x.UnixMicro()
		}
		return x.UnixMilli()
	case time.Duration:
		if logical.Type() == avro.TimeMicros {
			return x.Microseconds()
		}
		return x.Milliseconds()
	case *big.Rat:
		if d, ok := logical.(*avro.DecimalLogicalSchema); ok {
			return json.Number(x.FloatString(d.Scale()))
		}
	}
	return v
}
