package serde_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/framework/serde"
)

func roundTrip[T any](t *testing.T, s serde.Serde[T], v T) {
	t.Helper()
	b, err := s.Serialize(v)
	require.NoError(t, err)
	got, err := s.Deserialize(b)
	require.NoError(t, err)
	assert.Equal(t, v, got)
}

type order struct {
	ID     string  `json:"id"`
	Amount float64 `json:"amount"`
}

func TestRoundTrips(t *testing.T) {
	for _, v := range []int64{0, 1, -1, math.MaxInt64, math.MinInt64} {
		roundTrip(t, serde.Int64(), v)
		roundTrip(t, serde.Varint(), v)
	}
	roundTrip(t, serde.String(), "héllo")
	roundTrip(t, serde.Bytes(), []byte{0, 1, 2})
	roundTrip(t, serde.JSON[order](), order{ID: "o-1", Amount: 9.5})
}

// Int64 matches Kafka's LongSerializer byte for byte.
func TestInt64IsBigEndianLikeKafka(t *testing.T) {
	b, err := serde.Int64().Serialize(258)
	require.NoError(t, err)
	assert.Equal(t, []byte{0, 0, 0, 0, 0, 0, 1, 2}, b)
}

func TestDeserializeRejectsBadInput(t *testing.T) {
	tests := []struct {
		name string
		give func() error
		want error
	}{
		{"int64 short", func() error { _, err := serde.Int64().Deserialize([]byte{1, 2}); return err }, serde.ErrLength},
		{"int64 null", func() error { _, err := serde.Int64().Deserialize(nil); return err }, serde.ErrNull},
		{"varint trailing", func() error { _, err := serde.Varint().Deserialize([]byte{2, 2}); return err }, serde.ErrLength},
		{"varint truncated", func() error { _, err := serde.Varint().Deserialize([]byte{0x80}); return err }, serde.ErrLength},
		{"json null", func() error { _, err := serde.JSON[order]().Deserialize(nil); return err }, serde.ErrNull},
		{"json not utf-8", func() error { _, err := serde.JSON[order]().Deserialize([]byte("{\"id\":\"o\xff1\"}")); return err }, serde.ErrInvalidUTF8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.ErrorIs(t, tt.give(), tt.want)
		})
	}
	for _, give := range []string{"{not json", `{"amount":"ten"}`} {
		_, err := serde.JSON[order]().Deserialize([]byte(give))
		assert.ErrorContains(t, err, "from JSON")
		assert.NotContains(t, err.Error(), "json: json:", "the encoding/json prefix once")
	}
}
