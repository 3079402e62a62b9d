package pgcdc

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/causeway-stream/causeway/connect"
	"github.com/causeway-stream/causeway/connect/internal/jsontext"
)

// column is one column of a captured table.
type column struct {
	name   string
	oid    uint32
	typmod int32
	key    bool
}

// table is what the connector knows of a captured table: from the
// catalog at the snapshot, from the log's Relation messages after.
type table struct {
	schema, name string
	// topic is the topic of its events (settings.topic), and qualified
	// its name as a transaction's event counts name it, each made once.
	topic, qualified string
	// valueCap is the longest event value written for it so far (up to
	// maxValueCap), the room the next is given at first.
	valueCap int
	columns  []column
	// keySchema and valueSchema are the Connect schemas of its events'
	// key and of the row in before and after.
	keySchema, valueSchema *connect.Schema
	envelope               *connect.Schema
}

// Debezium's semantic types, by the names their schemas carry.
const (
	debeziumDate          = "io.debezium.time.Date"
	debeziumTime          = "io.debezium.time.Time"
	debeziumMicroTime     = "io.debezium.time.MicroTime"
	debeziumTimestamp     = "io.debezium.time.Timestamp"
	debeziumMicroTS       = "io.debezium.time.MicroTimestamp"
	debeziumZonedTS       = "io.debezium.time.ZonedTimestamp"
	debeziumUUID          = "io.debezium.data.Uuid"
	debeziumJSON          = "io.debezium.data.Json"
	debeziumVariableScale = "io.debezium.data.VariableScaleDecimal"
)

// fieldSchema is the Connect schema a column's values have in events.
func (s *settings) fieldSchema(c column) connect.Schema {
	// Every column but the key's may be null in an event: the before of
	// a delete under REPLICA IDENTITY DEFAULT holds the key alone.
	f := connect.Schema{Field: c.name, Optional: !c.key}
	switch c.oid {
	case pgtype.BoolOID:
		f.Type = "boolean"
	case pgtype.Int2OID:
		f.Type = "int16"
	case pgtype.Int4OID, pgtype.OIDOID:
		f.Type = "int32"
	case pgtype.Int8OID:
		f.Type = "int64"
	case pgtype.Float4OID:
		f.Type = "float32"
	case pgtype.Float8OID:
		f.Type = "float64"
	case pgtype.NumericOID:
		s.numericSchema(&f, c.typmod)
	case pgtype.DateOID:
		f.Type, f.Name = "int32", debeziumDate
		if s.connectTime == "connect" {
			f.Name, f.Version = connect.LogicalDate, 1
		}
	case pgtype.TimeOID:
		f.Type, f.Name = "int64", debeziumMicroTime
		switch {
		case s.connectTime == "connect":
			f.Type, f.Name, f.Version = "int32", connect.LogicalTime, 1
		case c.typmod >= 0 && c.typmod <= 3:
			f.Type, f.Name = "int32", debeziumTime
		}
	case pgtype.TimestampOID:
		f.Type, f.Name = "int64", debeziumMicroTS
		switch {
		case s.connectTime == "connect":
			f.Name, f.Version = connect.LogicalTimestamp, 1
		case c.typmod >= 0 && c.typmod <= 3:
			f.Name = debeziumTimestamp
		}
	case pgtype.TimestamptzOID:
		f.Type, f.Name = "string", debeziumZonedTS
	case pgtype.ByteaOID:
		f.Type = "bytes"
	case pgtype.UUIDOID:
		f.Type, f.Name = "string", debeziumUUID
	case pgtype.JSONOID, pgtype.JSONBOID:
		f.Type, f.Name = "string", debeziumJSON
	default:
		f.Type = "string"
	}
	return f
}

func (s *settings) numericSchema(f *connect.Schema, typmod int32) {
	switch {
	case s.decimalsAs == "double":
		f.Type = "float64"
	case s.decimalsAs == "string":
		f.Type = "string"
	case typmod >= 4:
		scale, precision := (typmod-4)&0xffff, ((typmod-4)>>16)&0xffff
		f.Type, f.Name, f.Version = "bytes", connect.LogicalDecimal, 1
		f.Parameters = map[string]string{"scale": strconv.Itoa(int(scale)), "connect.decimal.precision": strconv.Itoa(int(precision))}
	default:
		f.Type, f.Name = "struct", debeziumVariableScale
		f.Fields = []connect.Schema{{Type: "int32", Field: "scale"}, {Type: "bytes", Field: "value"}}
	}
}

// appendValue appends the JSON payload of a column's value, given in
// Postgres's text form, as fieldSchema types it.
func (s *settings) appendValue(b []byte, c column, f *connect.Schema, text []byte) ([]byte, error) {
	v := string(text)
	switch f.Type {
	case "boolean":
		return strconv.AppendBool(b, v == "t" || v == "true"), nil
	case "int16", "int32", "int64":
		return s.appendInteger(b, c, f, v)
	case "float32", "float64":
		if _, err := strconv.ParseFloat(v, 64); err != nil {
			// NaN and the infinities have no JSON number: as text.
			return jsontext.AppendString(b, v), nil
		}
		return append(b, v...), nil
	case "bytes":
		raw, err := s.rawBytes(c, f, v)
		if err != nil {
			return nil, err
		}
		return jsontext.AppendString(b, base64.StdEncoding.EncodeToString(raw)), nil
	case "struct": // VariableScaleDecimal
		scale, unscaled, err := decimalParts(v, -1)
		if err != nil {
			return nil, err
		}
		b = append(b, `{"scale":`...)
		b = strconv.AppendInt(b, int64(scale), 10)
		b = append(b, `,"value":`...)
		b = jsontext.AppendString(b, base64.StdEncoding.EncodeToString(twosComplement(unscaled)))
		return append(b, '}'), nil
	}
	if f.Name == debeziumZonedTS {
		t, err := parseTimestamp(v, true)
		if err != nil {
			return nil, err
		}
		return jsontext.AppendString(b, t.UTC().Format("2006-01-02T15:04:05.999999Z07:00")), nil
	}
	return jsontext.AppendString(b, v), nil
}

// appendInteger writes integers and the temporal types held in them.
func (s *settings) appendInteger(b []byte, c column, f *connect.Schema, v string) ([]byte, error) {
	switch c.oid {
	case pgtype.DateOID:
		t, err := time.Parse(time.DateOnly, v)
		if err != nil {
			return nil, fmt.Errorf("date %q: %w", v, err)
		}
		return strconv.AppendInt(b, t.Unix()/86400, 10), nil
	case pgtype.TimeOID:
		t, err := time.Parse("15:04:05.999999", v)
		if err != nil {
			return nil, fmt.Errorf("time %q: %w", v, err)
		}
		micros := int64(t.Hour())*3600e6 + int64(t.Minute())*60e6 + int64(t.Second())*1e6 + int64(t.Nanosecond()/1000)
		if f.Type == "int32" {
			return strconv.AppendInt(b, micros/1000, 10), nil
		}
		return strconv.AppendInt(b, micros, 10), nil
	case pgtype.TimestampOID:
		t, err := parseTimestamp(v, false)
		if err != nil {
			return nil, err
		}
		if f.Name == debeziumMicroTS {
			return strconv.AppendInt(b, t.UnixMicro(), 10), nil
		}
		return strconv.AppendInt(b, t.UnixMilli(), 10), nil
	}
	if _, err := strconv.ParseInt(v, 10, 64); err != nil {
		return nil, fmt.Errorf("integer %q: %w", v, err)
	}
	return append(b, v...), nil
}

// rawBytes is the bytes a bytes-typed value stands for: a bytea's, or a
// Decimal's unscaled value.
func (s *settings) rawBytes(c column, f *connect.Schema, v string) ([]byte, error) {
	if f.Name == connect.LogicalDecimal {
		scale, _ := strconv.Atoi(f.Parameters["scale"])
		_, unscaled, err := decimalParts(v, scale)
		if err != nil {
			return nil, err
		}
		return twosComplement(unscaled), nil
	}
	if c.oid == pgtype.ByteaOID {
		raw, err := hex.DecodeString(strings.TrimPrefix(v, `\x`))
		if err != nil {
			return nil, fmt.Errorf("bytea: %w", err)
		}
		return raw, nil
	}
	return []byte(v), nil
}

// parseTimestamp reads a timestamp's text, with its zone when zoned.
func parseTimestamp(v string, zoned bool) (time.Time, error) {
	layout := "2006-01-02 15:04:05.999999999"
	if zoned {
		layout += "Z07"
		if i := strings.LastIndexAny(v, "+-"); i > 0 && strings.Contains(v[i:], ":") {
			layout += ":00"
		}
	}
	t, err := time.Parse(layout, v)
	if err != nil {
		return t, fmt.Errorf("timestamp %q: %w", v, err)
	}
	return t, nil
}

// decimalParts reads a numeric's text as its scale and unscaled value;
// with scale at least 0, at that scale.
func decimalParts(v string, scale int) (int, *big.Int, error) {
	intPart, frac, _ := strings.Cut(v, ".")
	if scale < 0 {
		scale = len(frac)
	}
	for len(frac) < scale {
		frac += "0"
	}
	digits := intPart + frac[:scale]
	n, ok := new(big.Int).SetString(digits, 10)
	if !ok {
		return 0, nil, fmt.Errorf("numeric %q is not a number (NaN and infinities have no exact form: give decimal.handling.mode=string)", v)
	}
	return scale, n, nil
}

// twosComplement is n's big-endian two's-complement bytes, as Connect's
// Decimal holds its unscaled value.
func twosComplement(n *big.Int) []byte {
	if n.Sign() >= 0 {
		b := n.Bytes()
		if len(b) == 0 || b[0]&0x80 != 0 {
			b = append([]byte{0}, b...)
		}
		return b
	}
	// The fewest bytes that hold n with its sign bit: those of -n-1
	// and one bit more.
	length := (new(big.Int).Not(n).BitLen() + 8) / 8
	mod := new(big.Int).Lsh(big.NewInt(1), uint(length*8))
	b := new(big.Int).Add(mod, n).Bytes()
	for len(b) < length {
		b = append([]byte{0xff}, b...)
	}
	return b
}

func base64Of(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
