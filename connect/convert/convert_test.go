package convert

import (
	"encoding/base64"
	"encoding/binary"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const orderSchema = `{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"},` +
	`{"type":"string","optional":true,"field":"note"},{"type":"int32","optional":true,"default":7,"field":"qty"}],"optional":false,"name":"order"}`

// Each converter reads what Kafka Connect's converter of its class writes,
// and refuses what that converter would refuse, saying why.
func TestConvertersReadWhatKafkaConnectWrites(t *testing.T) {
	be32 := func(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
	be64 := func(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }
	tests := []struct {
		name     string
		class    string
		settings map[string]string
		give     []byte
		want     string
		wantType string // the schema's type; "" for none
		wantErr  string
	}{
		{name: "envelope", class: JSON, give: []byte(`{"schema":` + orderSchema + `,"payload":{"id":1,"note":"x","qty":2}}`),
			want: `{"id":1,"note":"x","qty":2}`, wantType: "struct"},
		{name: "envelope, payload first", class: JSON, give: []byte(`{"payload":{"id":1,"qty":2},"schema":` + orderSchema + `}`),
			want: `{"id":1,"qty":2}`, wantType: "struct"},
		{name: "a missing field takes its default", class: JSON, give: []byte(`{"schema":` + orderSchema + `,"payload":{"id":1,"note":null}}`),
			want: `{"id":1,"note":null,"qty":7}`, wantType: "struct"},
		{name: "a null field takes its default", class: JSON, give: []byte(`{"schema":` + orderSchema + `,"payload":{"id":1,"qty":null}}`),
			want: `{"id":1,"qty":7}`, wantType: "struct"},
		{name: "defaults off", class: JSON, settings: map[string]string{ReplaceNullWithDefault: "false"},
			give: []byte(`{"schema":` + orderSchema + `,"payload":{"id":1,"qty":null}}`), want: `{"id":1,"qty":null}`, wantType: "struct"},
		{name: "a null schema is schemaless", class: JSON, give: []byte(`{"schema":null,"payload":{"a":1}}`), want: `{"a":1}`},
		{name: "plain JSON with schemas on", class: JSON, give: []byte(`{"id":1}`), wantErr: "schemas.enable=false"},
		{name: "an extra field", class: JSON, give: []byte(`{"schema":null,"payload":1,"x":2}`), wantErr: `exactly "schema" and "payload"`},
		{name: "an unknown type", class: JSON, give: []byte(`{"schema":{"type":"int128"},"payload":1}`), wantErr: `unknown type "int128"`},
		{name: "a nameless field", class: JSON, give: []byte(`{"schema":{"type":"struct","fields":[{"type":"int8"}]},"payload":{}}`), wantErr: "has no name"},
		{name: "schemaless", class: JSON, settings: map[string]string{SchemasEnable: "false"}, give: []byte(`{"id":1}`), want: `{"id":1}`},
		{name: "schemaless, not JSON", class: JSON, settings: map[string]string{SchemasEnable: "false"}, give: []byte(`{"id":`), wantErr: "not JSON"},
		{name: "string", class: String, give: []byte(`o-1 "x"`), want: `"o-1 \"x\""`, wantType: "string"},
		{name: "string, not UTF-8", class: String, give: []byte{0xff}, wantErr: "not UTF-8"},
		{name: "bytes", class: ByteArray, give: []byte{0, 1, 0xff}, want: `"` + base64.StdEncoding.EncodeToString([]byte{0, 1, 0xff}) + `"`, wantType: "bytes"},
		{name: "int", class: Integer, give: be32(uint32(0xffffffff)), want: `-1`, wantType: "int32"},
		{name: "long", class: Long, give: be64(1 << 40), want: `1099511627776`, wantType: "int64"},
		{name: "short", class: Short, give: []byte{0x80, 0}, want: `-32768`, wantType: "int16"},
		{name: "float", class: Float, give: be32(math.Float32bits(1.5)), want: `1.5`, wantType: "float32"},
		{name: "double", class: Double, give: be64(math.Float64bits(-0.25)), want: `-0.25`, wantType: "float64"},
		{name: "NaN", class: Double, give: be64(math.Float64bits(math.NaN())), wantErr: "no JSON form"},
		{name: "boolean", class: Boolean, give: []byte{1}, want: `true`, wantType: "boolean"},
		{name: "a long too short", class: Long, give: []byte{1, 2}, wantErr: "LongConverter: 2 bytes, want 8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := New(tt.class, tt.settings)
			require.NoError(t, err)
			got, schema, err := c.Read("orders", tt.give)
			if tt.wantErr != "" {
				assert.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.JSONEq(t, tt.want, string(got))
			if tt.wantType == "" {
				assert.Nil(t, schema)
			} else {
				require.NotNil(t, schema)
				assert.Equal(t, tt.wantType, schema.Type)
			}
		})
	}
}

// The settings are checked by name; an unknown class is refused, naming
// the classes there are.
func TestConverterSettingsAreChecked(t *testing.T) {
	_, err := New(JSON, map[string]string{SchemasEnable: "yes"})
	assert.ErrorContains(t, err, `setting "schemas.enable": "yes" is not true or false`)
	_, err = New(String, map[string]string{"encoding": "latin1"})
	assert.ErrorContains(t, err, `"encoding"`)
	_, err = New("io.confluent.connect.protobuf.ProtobufConverter", nil)
	assert.ErrorIs(t, err, ErrUnknownClass)
	assert.ErrorContains(t, err, JSON)
}

// Parsed schemas are kept by their text, at most schemas.cache.size of
// them; a schema read again is the same one.
func TestEnvelopeSchemasAreCached(t *testing.T) {
	c, err := New(JSON, map[string]string{SchemasCacheSize: "1"})
	require.NoError(t, err)
	rec := []byte(`{"schema":` + orderSchema + `,"payload":{"id":1}}`)
	_, a, err := c.Read("t", rec)
	require.NoError(t, err)
	_, b, err := c.Read("t", rec)
	require.NoError(t, err)
	assert.Same(t, a, b)
	_, _, err = c.Read("t", []byte(`{"schema":{"type":"int64"},"payload":3}`))
	require.NoError(t, err)
	_, d, err := c.Read("t", rec)
	require.NoError(t, err)
	assert.NotSame(t, a, d, "the cache holds one schema")
	assert.Equal(t, a, d)
}
