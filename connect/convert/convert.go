// Package convert reads records' keys and values as Kafka Connect's
// converters wrote them, configured as Kafka Connect configures them
// (key.converter, value.converter and their prefixed settings), into what
// a sink takes: the JSON of the data in Kafka Connect's JSON form, and its
// schema when the format carries one.
//
// The converters, by their Apache Kafka class names:
//
//   - JsonConverter: with schemas.enable true (the default, as Kafka
//     Connect's), each record is an envelope {"schema": ..., "payload":
//     ...}: the payload is the data and the schema says its types; with
//     false, the record is the data, schemaless.
//   - StringConverter: the bytes are a UTF-8 string.
//   - ByteArrayConverter: the bytes as they are (base64 in the JSON, as
//     Connect's JSON form writes bytes).
//   - IntegerConverter, LongConverter, ShortConverter, FloatConverter,
//     DoubleConverter, BooleanConverter: Kafka's own serializers' bytes
//     (big-endian, IEEE 754, one byte for a boolean).
//
// Confluent's Avro converter needs the Schema Registry and is made by the
// connect worker (runtime/connectworker).
package convert

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/causeway-stream/causeway/connect"
	"github.com/causeway-stream/causeway/connect/internal/jsonscan"
)

// The converters' class names, as Kafka Connect configurations give them.
const (
	JSON      = "org.apache.kafka.connect.json.JsonConverter"
	String    = "org.apache.kafka.connect.storage.StringConverter"
	ByteArray = "org.apache.kafka.connect.converters.ByteArrayConverter"
	Integer   = "org.apache.kafka.connect.converters.IntegerConverter"
	Long      = "org.apache.kafka.connect.converters.LongConverter"
	Short     = "org.apache.kafka.connect.converters.ShortConverter"
	Float     = "org.apache.kafka.connect.converters.FloatConverter"
	Double    = "org.apache.kafka.connect.converters.DoubleConverter"
	Boolean   = "org.apache.kafka.connect.converters.BooleanConverter"
	// Avro is Confluent's Avro converter, over the Schema Registry.
	Avro = "io.confluent.connect.avro.AvroConverter"
)

// Classes lists every class New knows, Avro included.
var Classes = []string{JSON, String, ByteArray, Integer, Long, Short, Float, Double, Boolean, Avro}

// The JsonConverter's settings.
const (
	SchemasEnable          = "schemas.enable"
	SchemasCacheSize       = "schemas.cache.size"
	DecimalFormat          = "decimal.format"
	ReplaceNullWithDefault = "replace.null.with.default"
)

// Converter reads the bytes of a record's key or value.
type Converter interface {
	// Read returns data in Kafka Connect's JSON form (a Decimal still as
	// its base64 bytes, a Date as its day number, bytes as base64) and
	// its schema, nil when the format carries none. data is never nil:
	// a tombstone's value and a missing key are not converted. The error
	// says what is wrong with data.
	Read(topic string, data []byte) ([]byte, *connect.Schema, error)
}

// ErrUnknownClass is returned by New and Def for a class they do not know.
var ErrUnknownClass = errors.New("unknown converter class")

// Def is the settings a converter class takes, without their prefix
// (schemas.enable, not value.converter.schemas.enable).
func Def(class string) (*connect.ConfigDef, error) {
	switch class {
	case JSON:
		return &connect.ConfigDef{Keys: []connect.Key{
			{Name: SchemasEnable, Type: connect.TypeBoolean, Default: "true", Importance: connect.High,
				Doc: "Each record is a {\"schema\", \"payload\"} envelope (true), or the data alone (false)."},
			{Name: SchemasCacheSize, Type: connect.TypeInt, Default: "1000", Importance: connect.Low, Check: atLeastOne,
				Doc: "How many distinct schemas are kept parsed."},
			{Name: DecimalFormat, Type: connect.TypeString, Default: "BASE64", Allowed: []string{"BASE64", "NUMERIC"}, Importance: connect.Low,
				Doc: "How decimals are written; either form is read whatever this says."},
			{Name: ReplaceNullWithDefault, Type: connect.TypeBoolean, Default: "true", Importance: connect.Low,
				Doc: "A struct field that is null or missing takes its schema's default."},
		}}, nil
	case String:
		return &connect.ConfigDef{Keys: []connect.Key{
			{Name: "encoding", Type: connect.TypeString, Default: "UTF8", Allowed: []string{"UTF8", "UTF-8", "utf8", "utf-8"}, Importance: connect.Low,
				Doc: "The strings' character set: UTF-8 only."},
		}}, nil
	case ByteArray, Integer, Long, Short, Float, Double, Boolean, Avro:
		return &connect.ConfigDef{}, nil
	}
	return nil, fmt.Errorf("%w %q (known: %s)", ErrUnknownClass, class, strings.Join(Classes, ", "))
}

// New returns the converter class, with its settings (unprefixed, as Def
// names them). Avro is not made here: it needs a Schema Registry client.
func New(class string, settings map[string]string) (Converter, error) {
	def, err := Def(class)
	if err != nil {
		return nil, err
	}
	cfg, err := def.Parse(settings)
	if err != nil {
		return nil, err
	}
	switch class {
	case JSON:
		if !cfg.Bool(SchemasEnable) {
			return schemaless{}, nil
		}
		return &envelope{max: cfg.Int(SchemasCacheSize), defaults: cfg.Bool(ReplaceNullWithDefault), cache: map[string]*parsed{}}, nil
	case String:
		return stringConverter{}, nil
	case ByteArray:
		return byteArray{}, nil
	case Integer, Long, Short, Float, Double, Boolean:
		return number(class), nil
	}
	return nil, fmt.Errorf("%w: %s needs a Schema Registry client", ErrUnknownClass, class)
}

func atLeastOne(v string) error {
	if n, err := strconv.Atoi(v); err == nil && n < 1 {
		return errors.New("must be at least 1")
	}
	return nil
}

// schemaless is the JsonConverter with schemas.enable false.
type schemaless struct{}

func (schemaless) Read(_ string, data []byte) ([]byte, *connect.Schema, error) {
	if !json.Valid(data) {
		return nil, nil, errors.New("JsonConverter: not JSON")
	}
	return data, nil, nil
}

// envelope is the JsonConverter with schemas.enable true.
type envelope struct {
	max      int
	defaults bool
	mu       sync.Mutex
	// cache holds parsed schemas by their JSON text.
	cache map[string]*parsed
}

// parsed is a schema with what reading its payloads needs.
type parsed struct {
	schema *connect.Schema
	// defaulted: a struct with fields that have defaults, so a payload
	// may need them filled in.
	defaulted bool
}

func (e *envelope) Read(_ string, data []byte) ([]byte, *connect.Schema, error) {
	var rawSchema, payload []byte
	var other string
	err := jsonscan.EachField(data, func(name string, v []byte) {
		switch name {
		case "schema":
			rawSchema = v
		case "payload":
			payload = v
		default:
			other = name
		}
	})
	if err != nil || payload == nil || rawSchema == nil || other != "" {
		return nil, nil, errors.New(`JsonConverter: schemas.enable is true, so the data must be an object of exactly "schema" and "payload"; plain JSON needs schemas.enable=false`)
	}
	p, err := e.schemaOf(rawSchema)
	if err != nil {
		return nil, nil, fmt.Errorf("JsonConverter: %w", err)
	}
	if p == nil {
		return payload, nil, nil // "schema": null: schemaless data
	}
	if p.defaulted && e.defaults {
		if payload, err = fillDefaults(payload, p.schema); err != nil {
			return nil, nil, fmt.Errorf("JsonConverter: %w", err)
		}
	}
	return payload, p.schema, nil
}

func (e *envelope) schemaOf(raw []byte) (*parsed, error) {
	if string(raw) == "null" {
		return nil, nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if p, ok := e.cache[string(raw)]; ok {
		return p, nil
	}
	s, err := connect.ParseSchema(raw)
	if err != nil {
		return nil, err
	}
	p := &parsed{schema: s}
	for _, f := range s.Fields {
		if f.Default != nil {
			p.defaulted = true
		}
	}
	if len(e.cache) >= e.max {
		clear(e.cache)
	}
	e.cache[string(raw)] = p
	return p, nil
}

// fillDefaults sets each field of the struct payload that is null or
// missing, and has a default in s, to that default.
func fillDefaults(payload []byte, s *connect.Schema) ([]byte, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(payload, &obj); err != nil || obj == nil {
		return payload, nil // not a struct: the sink says what is wrong with it
	}
	changed := false
	for _, f := range s.Fields {
		if v, ok := obj[f.Field]; f.Default != nil && (!ok || string(v) == "null") {
			obj[f.Field] = f.Default
			changed = true
		}
	}
	if !changed {
		return payload, nil
	}
	return json.Marshal(obj)
}

// stringConverter is the StringConverter.
type stringConverter struct{}

func (stringConverter) Read(_ string, data []byte) ([]byte, *connect.Schema, error) {
	if !utf8.Valid(data) {
		return nil, nil, errors.New("StringConverter: not UTF-8")
	}
	b, err := json.Marshal(string(data))
	return b, &connect.Schema{Type: "string", Optional: true}, err
}

// byteArray is the ByteArrayConverter.
type byteArray struct{}

func (byteArray) Read(_ string, data []byte) ([]byte, *connect.Schema, error) {
	b, err := json.Marshal(base64.StdEncoding.EncodeToString(data))
	return b, &connect.Schema{Type: "bytes", Optional: true}, err
}

// number is one of the converters of Kafka's number and boolean
// serializers, by class.
type number string

func (n number) Read(_ string, data []byte) ([]byte, *connect.Schema, error) {
	size := map[number]int{Integer: 4, Long: 8, Short: 2, Float: 4, Double: 8, Boolean: 1}[n]
	if len(data) != size {
		return nil, nil, fmt.Errorf("%s: %d bytes, want %d", n.short(), len(data), size)
	}
	var text, typ string
	switch n {
	case Integer:
		text, typ = strconv.FormatInt(int64(int32(binary.BigEndian.Uint32(data))), 10), "int32"
	case Long:
		text, typ = strconv.FormatInt(int64(binary.BigEndian.Uint64(data)), 10), "int64"
	case Short:
		text, typ = strconv.FormatInt(int64(int16(binary.BigEndian.Uint16(data))), 10), "int16"
	case Float:
		f := float64(math.Float32frombits(binary.BigEndian.Uint32(data)))
		text, typ = strconv.FormatFloat(f, 'g', -1, 32), "float32"
	case Double:
		text, typ = strconv.FormatFloat(math.Float64frombits(binary.BigEndian.Uint64(data)), 'g', -1, 64), "float64"
	default:
		text, typ = strconv.FormatBool(data[0] != 0), "boolean"
	}
	if strings.ContainsAny(text, "NI") { // NaN, +Inf, -Inf have no JSON form
		return nil, nil, fmt.Errorf("%s: %s has no JSON form", n.short(), text)
	}
	return []byte(text), &connect.Schema{Type: typ, Optional: true}, nil
}

func (n number) short() string { return string(n)[strings.LastIndexByte(string(n), '.')+1:] }
