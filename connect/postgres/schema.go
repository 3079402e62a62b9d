package postgres

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/causeway-stream/causeway/connect"
	"github.com/causeway-stream/causeway/connect/internal/jsonscan"
	"github.com/causeway-stream/causeway/connect/internal/jsontext"
)

// A record whose converter read a schema beside it (the JsonConverter's
// envelope) holds its data in Kafka Connect's JSON form, in which a
// Decimal is base64 bytes, a Date a day number, a Time or Timestamp a
// count of milliseconds and bytes base64. render turns each such field
// into the text Postgres's input function for the column reads, so that
// json_populate_record and COPY take the row as they take schemaless
// JSON. Fields of the other types are passed on untouched; a schema
// without such fields costs nothing (an empty plan).

// fieldPlan is how one field of a struct is rendered.
type fieldPlan struct {
	name   string
	schema *connect.Schema
}

// planOf lists the fields of the struct schema s that need rendering.
func planOf(s *connect.Schema) []fieldPlan {
	var out []fieldPlan
	for i := range s.Fields {
		f := &s.Fields[i]
		if f.Name == connect.LogicalDecimal || f.Name == connect.LogicalDate || f.Name == connect.LogicalTime ||
			f.Name == connect.LogicalTimestamp || f.Type == "bytes" {
			out = append(out, fieldPlan{name: f.Field, schema: f})
		}
	}
	return out
}

// plan returns the cached plan of s.
func (t *task) plan(s *connect.Schema) []fieldPlan {
	p, ok := t.plans[s]
	if !ok {
		if len(t.plans) > 1000 {
			clear(t.plans)
		}
		p = planOf(s)
		t.plans[s] = p
	}
	return p
}

// render returns the struct obj (its schema s) with its logical and bytes
// fields as Postgres reads them; obj itself when none needs it.
func (t *task) render(obj []byte, s *connect.Schema) ([]byte, error) {
	if s == nil {
		return obj, nil
	}
	if s.Type != "struct" {
		return nil, fmt.Errorf("the schema is a %s, not a struct: a row needs fields", s.Type)
	}
	p := t.plan(s)
	if len(p) == 0 {
		return obj, nil
	}
	out := make([]byte, 0, len(obj)+32)
	out = append(out, '{')
	var ferr error
	err := jsonscan.EachField(obj, func(name string, v []byte) {
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = jsontext.AppendString(out, name)
		out = append(out, ':')
		for _, f := range p {
			if f.name == name && string(v) != "null" {
				r, err := renderValue(v, f.schema, t.s.zone)
				if err != nil && ferr == nil {
					ferr = fmt.Errorf("field %q: %w", name, err)
				}
				v = r
				break
			}
		}
		out = append(out, v...)
	})
	if err != nil {
		return nil, fmt.Errorf("the value is not a JSON object: %w", err)
	}
	if ferr != nil {
		return nil, ferr
	}
	return append(out, '}'), nil
}

// renderValue is one value v of schema s as Postgres reads it, in JSON.
func renderValue(v []byte, s *connect.Schema, zone *time.Location) ([]byte, error) {
	switch s.Name {
	case connect.LogicalDecimal:
		if v[0] != '"' {
			return v, nil // decimal.format NUMERIC: a number already
		}
		return decimalText(v, s.Parameters["scale"])
	case connect.LogicalDate, connect.LogicalTime, connect.LogicalTimestamp:
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s is not a whole number for a %s", v, s.Name[strings.LastIndexByte(s.Name, '.')+1:])
		}
		var text string
		switch s.Name {
		case connect.LogicalDate:
			text = time.Unix(n*86400, 0).UTC().Format(time.DateOnly)
		case connect.LogicalTime:
			text = time.UnixMilli(n).UTC().Format("15:04:05.000")
		default:
			text = time.UnixMilli(n).In(zone).Format("2006-01-02T15:04:05.000-07:00")
		}
		return jsontext.AppendString(nil, text), nil
	}
	b, err := base64Of(v)
	if err != nil {
		return nil, err
	}
	return jsontext.AppendString(nil, `\x`+hex.EncodeToString(b)), nil
}

func base64Of(v []byte) ([]byte, error) {
	s, err := strconv.Unquote(string(v))
	if err != nil {
		return nil, fmt.Errorf("%s is not a base64 string", v)
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("%s is not base64: %w", v, err)
	}
	return b, nil
}

// decimalText is a Connect Decimal's bytes (big-endian two's complement,
// base64 in v) with scale, as a JSON number.
func decimalText(v []byte, scale string) ([]byte, error) {
	b, err := base64Of(v)
	if err != nil {
		return nil, err
	}
	sc, err := strconv.Atoi(scale)
	if err != nil || sc < 0 {
		return nil, fmt.Errorf("a Decimal without a scale parameter (%q)", scale)
	}
	n := new(big.Int).SetBytes(b)
	if len(b) > 0 && b[0]&0x80 != 0 { // negative: subtract 2^(8*len)
		n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
	}
	digits := n.String()
	neg := strings.HasPrefix(digits, "-")
	digits = strings.TrimPrefix(digits, "-")
	if sc > 0 {
		if len(digits) <= sc {
			digits = strings.Repeat("0", sc-len(digits)+1) + digits
		}
		digits = digits[:len(digits)-sc] + "." + digits[len(digits)-sc:]
	}
	if neg {
		digits = "-" + digits
	}
	return []byte(digits), nil
}

// columnType is the Postgres type of a column auto.create or auto.evolve
// makes for a field of schema s, as Confluent's JDBC sink maps them, with
// structs and maps as jsonb.
func columnType(s *connect.Schema) (string, error) {
	switch s.Name {
	case connect.LogicalDecimal:
		return "DECIMAL", nil
	case connect.LogicalDate:
		return "DATE", nil
	case connect.LogicalTime:
		return "TIME", nil
	case connect.LogicalTimestamp:
		return "TIMESTAMP", nil
	}
	switch s.Type {
	case "int8", "int16":
		return "SMALLINT", nil
	case "int32":
		return "INT", nil
	case "int64":
		return "BIGINT", nil
	case "float32":
		return "REAL", nil
	case "float64":
		return "DOUBLE PRECISION", nil
	case "boolean":
		return "BOOLEAN", nil
	case "string":
		return "TEXT", nil
	case "bytes":
		return "BYTEA", nil
	case "struct", "map":
		return "JSONB", nil
	case "array":
		if t := s.Items.Type; t == "array" || t == "struct" || t == "map" {
			return "JSONB", nil // nested: kept as JSON
		}
		elem, err := columnType(s.Items)
		if err != nil {
			return "", err
		}
		return elem + "[]", nil
	}
	return "", fmt.Errorf("no column type for %q", s.Type)
}

// columnDef is a column's definition for a field named name of schema s:
// its type, NOT NULL unless optional, and its default.
func (t *task) columnDef(name string, s *connect.Schema) (string, error) {
	typ, err := columnType(s)
	if err != nil {
		return "", fmt.Errorf("field %q: %w", name, err)
	}
	def := quoteIdent(name) + " " + typ
	if !s.Optional {
		def += " NOT NULL"
	}
	if s.Default != nil && string(s.Default) != "null" {
		v := []byte(s.Default)
		if s.Name != "" || s.Type == "bytes" {
			if v, err = renderValue(v, s, t.s.zone); err != nil {
				return "", fmt.Errorf("field %q's default: %w", name, err)
			}
		}
		text := string(v)
		if unq, err := strconv.Unquote(text); err == nil {
			text = unq
		}
		def += " DEFAULT " + quoteLiteral(text)
	}
	return def, nil
}

// quoteIdent quotes one name as an SQL identifier.
func quoteIdent(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }

// quoteLiteral quotes text as an SQL string literal.
func quoteLiteral(text string) string { return "'" + strings.ReplaceAll(text, "'", "''") + "'" }

// errNoSchema is the reason a record cannot make or evolve a table.
var errNoSchema = errors.New("the record has no schema to make columns from (read values with the JsonConverter and schemas.enable=true)")
