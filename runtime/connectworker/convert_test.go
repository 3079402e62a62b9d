//go:build cgo

package connectworker

import (
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/schemaregistry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/connect"
	"github.com/causeway-stream/causeway/connect/transform"
	"github.com/causeway-stream/causeway/framework/serde/registry"
)

type avroOrder struct {
	ID       string `avro:"id"`
	Customer string `avro:"customer"`
	Amount   int    `avro:"amount"`
}

// A value written by a Schema Registry Avro serializer reaches the sink as
// the JSON object of its fields, transforms applied after; bytes that are
// not in the registry's format are refused, naming the converter.
func TestAvroValuesReachTheSinkAsJSON(t *testing.T) {
	client, err := schemaregistry.NewClient(schemaregistry.NewConfig("mock://avro"))
	require.NoError(t, err)
	ser, err := registry.Avro[avroOrder](client, "orders", registry.Value, registry.Options{})
	require.NoError(t, err)
	b, err := ser.Serialize(avroOrder{ID: "o1", Customer: "c1", Amount: 5})
	require.NoError(t, err)

	chain, err := transform.Parse(map[string]string{"transforms": "drop", "transforms.drop.type": "ReplaceField$Value", "transforms.drop.exclude": "amount"})
	require.NoError(t, err)
	convert := sinkConvert(chain, converters{value: newAvroToJSON(client, false)})
	got, err := convert(connect.Record{Topic: "orders", Key: []byte("o1"), Value: b})
	require.NoError(t, err)
	assert.JSONEq(t, `{"id": "o1", "customer": "c1"}`, string(got.Value))
	assert.Equal(t, "o1", string(got.Key))

	_, err = convert(connect.Record{Topic: "orders", Value: []byte(`{"id": "o2"}`)})
	assert.ErrorContains(t, err, "value.converter: AvroConverter")

	tomb, err := convert(connect.Record{Topic: "orders", Key: []byte("o1")})
	require.NoError(t, err)
	assert.Nil(t, tomb.Value, "a tombstone stays one")
}

type avroPayment struct {
	ID     string    `avro:"id"`
	Note   *string   `avro:"note"`
	At     time.Time `avro:"at"`
	Amount int64     `avro:"amount"`
	Blob   []byte    `avro:"blob"`
}

// An Avro value reaches the sink in Kafka Connect's JSON form with the
// Connect schema of its writer's schema, as Confluent's AvroConverter
// hands it on: a union with null unwrapped and optional, a
// timestamp-millis a Connect Timestamp in milliseconds, bytes as base64.
func TestAvroValuesCarryTheirConnectSchema(t *testing.T) {
	client, err := schemaregistry.NewClient(schemaregistry.NewConfig("mock://avro-schema"))
	require.NoError(t, err)
	ser, err := registry.Avro[avroPayment](client, "payments", registry.Value, registry.Options{})
	require.NoError(t, err)
	note := "first"
	at := time.Date(2024, 3, 1, 10, 0, 0, 0, time.UTC)
	b, err := ser.Serialize(avroPayment{ID: "p1", Note: &note, At: at, Amount: 5, Blob: []byte{1, 2}})
	require.NoError(t, err)
	conv := newAvroToJSON(client, false)
	got, schema, err := conv.Read("payments", b)
	require.NoError(t, err)
	assert.JSONEq(t, `{"id":"p1","note":"first","at":1709287200000,"amount":5,"blob":"AQI="}`, string(got))
	require.NotNil(t, schema)
	assert.Equal(t, "struct", schema.Type)
	assert.True(t, schema.FieldSchema("note").Optional)
	assert.Equal(t, "string", schema.FieldSchema("note").Type)
	assert.Equal(t, connect.LogicalTimestamp, schema.FieldSchema("at").Name)
	assert.Equal(t, "int64", schema.FieldSchema("amount").Type)
	assert.Equal(t, "bytes", schema.FieldSchema("blob").Type)

	b, err = ser.Serialize(avroPayment{ID: "p2", At: at})
	require.NoError(t, err)
	got, again, err := conv.Read("payments", b)
	require.NoError(t, err)
	assert.JSONEq(t, `{"id":"p2","note":null,"at":1709287200000,"amount":0,"blob":""}`, string(got))
	assert.Same(t, schema, again, "one writer's schema, one Connect schema")
}
