//go:build cgo

package registry_test

import (
	"encoding/binary"
	"testing"

	"github.com/confluentinc/confluent-kafka-go/v2/schemaregistry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/driver"
	"github.com/causeway-stream/causeway/framework/dsl"
	"github.com/causeway-stream/causeway/framework/serde"
	"github.com/causeway-stream/causeway/framework/serde/registry"
)

type order struct {
	ID     string `avro:"id" json:"id"`
	Amount int64  `avro:"amount" json:"amount"`
}

func mockClient(t *testing.T) schemaregistry.Client {
	t.Helper()
	c, err := schemaregistry.NewClient(schemaregistry.NewConfig("mock://"))
	require.NoError(t, err)
	return c
}

// wireSchemaID reads the schema id of the Confluent wire format: a zero
// magic byte, then the id in 4 big-endian bytes.
func wireSchemaID(t *testing.T, b []byte) int {
	t.Helper()
	require.Greater(t, len(b), 5)
	require.Equal(t, byte(0), b[0], "magic byte")
	return int(binary.BigEndian.Uint32(b[1:5]))
}

// Each format round-trips through the registry, registers its schema under
// the topic's subject, and writes the wire format other clients read.
func TestRegistrySerdesRoundTrip(t *testing.T) {
	tests := []struct {
		name    string
		subject string
		run     func(t *testing.T, c schemaregistry.Client) []byte
	}{
		{"avro value", "orders-value", func(t *testing.T, c schemaregistry.Client) []byte {
			s, err := registry.Avro[order](c, "orders", registry.Value, registry.Options{})
			require.NoError(t, err)
			b, err := s.Serialize(order{ID: "o-1", Amount: 20})
			require.NoError(t, err)
			got, err := s.Deserialize(b)
			require.NoError(t, err)
			assert.Equal(t, order{ID: "o-1", Amount: 20}, got)
			return b
		}},
		{"json schema key", "orders-key", func(t *testing.T, c schemaregistry.Client) []byte {
			s, err := registry.JSONSchema[order](c, "orders", registry.Key, registry.Options{})
			require.NoError(t, err)
			b, err := s.Serialize(order{ID: "o-2", Amount: 5})
			require.NoError(t, err)
			got, err := s.Deserialize(b)
			require.NoError(t, err)
			assert.Equal(t, order{ID: "o-2", Amount: 5}, got)
			return b
		}},
		{"protobuf value", "names-value", func(t *testing.T, c schemaregistry.Client) []byte {
			s, err := registry.Protobuf[*wrapperspb.StringValue](c, "names", registry.Value, registry.Options{})
			require.NoError(t, err)
			b, err := s.Serialize(wrapperspb.String("ada"))
			require.NoError(t, err)
			got, err := s.Deserialize(b)
			require.NoError(t, err)
			assert.True(t, proto.Equal(wrapperspb.String("ada"), got), "got %v", got)
			return b
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mockClient(t)
			b := tt.run(t, c)
			meta, err := c.GetLatestSchemaMetadata(tt.subject)
			require.NoError(t, err, "no schema under %s", tt.subject)
			assert.Equal(t, meta.ID, wireSchemaID(t, b))
		})
	}
}

// Bytes that are not in the wire format are an error naming the topic,
// not a zero value.
func TestRegistrySerdesRefuseForeignBytes(t *testing.T) {
	c := mockClient(t)
	avro, err := registry.Avro[order](c, "orders", registry.Value, registry.Options{})
	require.NoError(t, err)
	jsonSchema, err := registry.JSONSchema[order](c, "orders", registry.Value, registry.Options{})
	require.NoError(t, err)
	pb, err := registry.Protobuf[*wrapperspb.StringValue](c, "names", registry.Value, registry.Options{})
	require.NoError(t, err)
	plain := []byte(`{"id":"o-1","amount":20}`)
	_, err = avro.Deserialize(plain)
	assert.ErrorContains(t, err, "orders")
	_, err = jsonSchema.Deserialize(plain)
	assert.ErrorContains(t, err, "orders")
	_, err = pb.Deserialize(plain)
	assert.ErrorContains(t, err, "names")
}

// A registry serde plugs into a topology like any other; a record it
// cannot read is bad input, handled by the topology's policy.
func TestRegistrySerdeInATopology(t *testing.T) {
	c := mockClient(t)
	in, err := registry.Avro[order](c, "orders", registry.Value, registry.Options{})
	require.NoError(t, err)
	out, err := registry.Avro[order](c, "doubled", registry.Value, registry.Options{})
	require.NoError(t, err)
	b := dsl.NewBuilder("orders")
	dsl.MapValues(dsl.From(b, "orders", serde.Codec[string, order]{Key: serde.String(), Value: in}),
		func(_ string, o order) (order, error) { o.Amount *= 2; return o, nil }).
		WithSerdes(serde.String(), out).To("doubled")
	b.OnBadInput(framework.LogAndSkip, "")
	topo, err := b.Build()
	require.NoError(t, err)
	d, err := driver.New(topo)
	require.NoError(t, err)
	_, _, err = driver.NewInput(d, "orders", serde.String(), in).Pipe("o-1", order{ID: "o-1", Amount: 21})
	require.NoError(t, err)
	_, _, err = d.Pipe("orders", framework.Record{Key: []byte("o-2"), Value: []byte("not avro")})
	require.NoError(t, err)
	require.NoError(t, d.Run())
	got, err := driver.NewOutput(d, "doubled", serde.String(), out).All()
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, order{ID: "o-1", Amount: 42}, got[0].Value)
	require.Len(t, d.Dropped(), 1, "the record that is not Avro is reported")
}

// With UseLatest the serde writes with the subject's registered schema,
// and a JSON Schema serde refuses a value that schema does not allow.
func TestJSONSchemaChecksWhatItWrites(t *testing.T) {
	c := mockClient(t)
	_, err := c.Register("strict-value", schemaregistry.SchemaInfo{SchemaType: "JSON", Schema: `{"type":"object",
		"properties":{"id":{"type":"string"},"amount":{"type":"integer","minimum":0}},"required":["id","amount"]}`}, false)
	require.NoError(t, err)
	s, err := registry.JSONSchema[order](c, "strict", registry.Value, registry.Options{UseLatest: true})
	require.NoError(t, err)
	_, err = s.Serialize(order{ID: "o-1", Amount: 3})
	require.NoError(t, err)
	_, err = s.Serialize(order{ID: "o-2", Amount: -3})
	assert.ErrorContains(t, err, "strict")
}
