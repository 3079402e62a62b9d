//go:build cgo

package connectworker

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/connect"
)

// valueSchema is a Debezium row's value with every kind of field a
// source gives: named logical types of Connect's and Debezium's, an
// optional field of each kind, an array and a map.
const valueSchema = `{"type": "struct", "name": "shop.public.orders.Value", "optional": true, "fields": [
	{"field": "id", "type": "int32"},
	{"field": "code", "type": "int16"},
	{"field": "small", "type": "int8", "optional": true},
	{"field": "note", "type": "string", "optional": true},
	{"field": "price", "type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "version": 1, "optional": true,
	 "parameters": {"scale": "2", "connect.decimal.precision": "10"}},
	{"field": "placed", "type": "int64", "name": "io.debezium.time.MicroTimestamp", "version": 1},
	{"field": "day", "type": "int32", "name": "org.apache.kafka.connect.data.Date", "version": 1, "optional": true},
	{"field": "at", "type": "int64", "name": "org.apache.kafka.connect.data.Timestamp", "version": 1},
	{"field": "paid", "type": "boolean"},
	{"field": "weight", "type": "float64", "optional": true},
	{"field": "ratio", "type": "float32"},
	{"field": "raw", "type": "bytes", "optional": true},
	{"field": "tags", "type": "array", "items": {"type": "string"}, "optional": true},
	{"field": "attrs", "type": "map", "keys": {"type": "string"}, "values": {"type": "int64", "optional": true}}
]}`

// envelopeSchema is Debezium's envelope of it: before and after share the
// one record.
var envelopeSchema = `{"type": "struct", "name": "shop.public.orders.Envelope", "version": 1, "fields": [
	{"field": "before", ` + valueSchema[1:] + `,
	{"field": "after", ` + valueSchema[1:] + `,
	{"field": "source", "type": "struct", "name": "io.debezium.connector.postgresql.Source", "fields": [
		{"field": "lsn", "type": "int64", "optional": true}, {"field": "txId", "type": "int64", "optional": true}]},
	{"field": "op", "type": "string"},
	{"field": "ts_ms", "type": "int64", "optional": true}
]}`

// Records written with the Avro converter and read back with it, through
// one registry, come back with their Connect schema whole (names,
// versions and parameters of every field, int8 and int16, what is
// optional) and their values as the JsonConverter gives them; a decimal's
// bytes come back as its number, as the reader gives every Avro decimal.
func TestAvroWrittenBySourcesReadsBackWhole(t *testing.T) {
	key, err := newAvroWriter("mock://roundtrip", true)
	require.NoError(t, err)
	value, err := newAvroWriter("mock://roundtrip", false)
	require.NoError(t, err)
	client, err := registryClient("mock://roundtrip")
	require.NoError(t, err)
	readKey, readValue := newAvroToJSON(client, true), newAvroToJSON(client, false)

	for _, tt := range []struct {
		name, schema, data, want string
		key                      bool
	}{
		{name: "Debezium's key", key: true, schema: `{"type": "struct", "name": "shop.public.orders.Key", "fields": [{"field": "id", "type": "int32"}]}`,
			data: `{"id": 7}`, want: `{"id": 7}`},
		{name: "a key that is a string", key: true, schema: `{"type": "string"}`, data: `"o-1"`, want: `"o-1"`},
		{name: "an insert", schema: envelopeSchema,
			data: `{"before": null, "after": {"id": 1, "code": -300, "small": 5, "note": "gift", "price": "MDk=", "placed": 1700000000123456,
				"day": 19700, "at": 1700000000123, "paid": true, "weight": 1.25, "ratio": 0.5, "raw": "AQI=", "tags": ["a", "b"], "attrs": {"x": 1, "y": null}},
				"source": {"lsn": 23456, "txId": 750}, "op": "c", "ts_ms": 1700000000200}`,
			want: `{"before": null, "after": {"id": 1, "code": -300, "small": 5, "note": "gift", "price": 123.45, "placed": 1700000000123456,
				"day": 19700, "at": 1700000000123, "paid": true, "weight": 1.25, "ratio": 0.5, "raw": "AQI=", "tags": ["a", "b"], "attrs": {"x": 1, "y": null}},
				"source": {"lsn": 23456, "txId": 750}, "op": "c", "ts_ms": 1700000000200}`},
		{name: "a delete, optional fields null", schema: envelopeSchema,
			data: `{"before": {"id": 2, "code": 1, "placed": 0, "at": -1000, "paid": false, "ratio": 0, "attrs": {}}, "after": null,
				"source": {"lsn": null, "txId": null}, "op": "d", "ts_ms": null}`,
			want: `{"before": {"id": 2, "code": 1, "small": null, "note": null, "price": null, "placed": 0, "day": null, "at": -1000, "paid": false,
				"weight": null, "ratio": 0, "raw": null, "tags": null, "attrs": {}}, "after": null, "source": {"lsn": null, "txId": null}, "op": "d", "ts_ms": null}`},
		{name: "a struct without a name", schema: `{"type": "struct", "fields": [{"field": "n", "type": "int8"},
			{"field": "inner", "type": "struct", "optional": true, "fields": [{"field": "s", "type": "string"}]}]}`,
			data: `{"n": -2, "inner": {"s": "x"}}`, want: `{"n": -2, "inner": {"s": "x"}}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			schema, err := connect.ParseSchema([]byte(tt.schema))
			require.NoError(t, err)
			w, r := value, readValue
			if tt.key {
				w, r = key, readKey
			}
			b, err := w.write("shop.public.orders", []byte(tt.data), schema)
			require.NoError(t, err)
			require.Equal(t, byte(0), b[0], "the wire format's magic byte")
			got, gotSchema, err := r.Read("shop.public.orders", b)
			require.NoError(t, err)
			assert.JSONEq(t, tt.want, string(got))
			want, err := json.Marshal(schema)
			require.NoError(t, err)
			back, err := json.Marshal(gotSchema)
			require.NoError(t, err)
			assert.JSONEq(t, string(want), string(back), "the Connect schema, read back")
		})
	}
}

// The Avro schema is the one Confluent's AvroData makes of Debezium's
// key (as registered by Debezium with the AvroConverter), and of a
// timestamp of Debezium's.
func TestAvroSchemasAreConfluents(t *testing.T) {
	for _, tt := range []struct{ connect, avro string }{
		{`{"type": "struct", "name": "dbserver1.inventory.customers.Key", "fields": [{"field": "id", "type": "int32"}]}`,
			`{"type": "record", "name": "Key", "namespace": "dbserver1.inventory.customers", "fields": [{"name": "id", "type": "int"}],
			  "connect.name": "dbserver1.inventory.customers.Key"}`},
		{`{"type": "int64", "name": "io.debezium.time.Timestamp", "version": 1}`,
			`{"type": "long", "connect.version": 1, "connect.name": "io.debezium.time.Timestamp"}`},
		{`{"type": "struct", "fields": [{"field": "price", "type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "version": 1, "optional": true, "parameters": {"scale": "2"}}]}`,
			`{"type": "record", "name": "ConnectDefault", "namespace": "io.confluent.connect.avro", "fields": [{"name": "price", "default": null, "type": ["null",
			  {"type": "bytes", "scale": 2, "precision": 64, "connect.version": 1, "connect.parameters": {"scale": "2"},
			   "connect.name": "org.apache.kafka.connect.data.Decimal", "logicalType": "decimal"}]}]}`},
	} {
		s, err := connect.ParseSchema([]byte(tt.connect))
		require.NoError(t, err)
		got, err := avroSchemaOf(s)
		require.NoError(t, err)
		assert.JSONEq(t, tt.avro, got)
	}
}

// What Avro cannot hold fails the record, naming the field.
func TestAvroRefusesValuesItsSchemaDoesNotAllow(t *testing.T) {
	w, err := newAvroWriter("mock://refuse", false)
	require.NoError(t, err)
	schema, err := connect.ParseSchema([]byte(valueSchema))
	require.NoError(t, err)
	for data, want := range map[string]string{
		`{"id": null, "code": 1, "placed": 0, "at": 0, "paid": true, "ratio": 1, "attrs": {}}`:      "id: null",
		`{"id": 1, "code": 70000, "placed": 0, "at": 0, "paid": true, "ratio": 1, "attrs": {}}`:     "code: 70000",
		`{"id": 1, "code": 1, "placed": "x", "at": 0, "paid": true, "ratio": 1, "attrs": {}}`:       "placed: x",
		`{"id": 1, "code": 1, "placed": 0, "at": 0, "paid": true, "ratio": 1, "attrs": {"k": "v"}}`: "attrs.k: v",
	} {
		_, err := w.write("t", []byte(data), schema)
		assert.ErrorContains(t, err, want)
	}
	_, err = w.write("t", []byte(`{}`), nil)
	assert.ErrorContains(t, err, "no schema")
}

// A table whose columns change keeps its records' names: its events
// before and after the change are written and read each with its own
// schema (hamba/avro's shared caches took one for the other).
func TestAvroSchemasOfOneNameEvolve(t *testing.T) {
	w, err := newAvroWriter("mock://evolve", false)
	require.NoError(t, err)
	client, err := registryClient("mock://evolve")
	require.NoError(t, err)
	r := newAvroToJSON(client, false)
	envelope := func(fields string) string {
		v := `{"type": "struct", "name": "shop.public.t.Value", "optional": true, "fields": [` + fields + `]}`
		return `{"type": "struct", "name": "shop.public.t.Envelope", "fields": [{"field": "before", ` + v[1:] + `, {"field": "after", ` + v[1:] + `,
			{"field": "op", "type": "string"}]}`
	}
	for _, tt := range []struct{ fields, data string }{
		{`{"field": "id", "type": "int32"}, {"field": "code", "type": "int16"}`, `{"before": null, "after": {"id": 1, "code": 2}, "op": "c"}`},
		{`{"field": "id", "type": "int32"}, {"field": "note", "type": "string", "optional": true}`, `{"before": null, "after": {"id": 1, "note": "n"}, "op": "c"}`},
		{`{"field": "id", "type": "int32"}, {"field": "code", "type": "int16"}`, `{"before": {"id": 1, "code": 2}, "after": null, "op": "d"}`},
	} {
		s, err := connect.ParseSchema([]byte(envelope(tt.fields)))
		require.NoError(t, err)
		b, err := w.write("shop.public.t", []byte(tt.data), s)
		require.NoError(t, err, tt.fields)
		got, _, err := r.Read("shop.public.t", b)
		require.NoError(t, err)
		assert.JSONEq(t, tt.data, string(got))
	}
}
