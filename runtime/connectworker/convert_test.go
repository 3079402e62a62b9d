//go:build cgo

package connectworker

import (
	"testing"

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
