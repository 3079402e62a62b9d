package causal_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/causeway-stream/causeway/causal"
)

// hdr builds a header from pieces: bytes are copied, strings are written as
// length-prefixed names, ints as uvarints.
func hdr(parts ...any) []byte {
	var b []byte
	for _, p := range parts {
		switch v := p.(type) {
		case byte:
			b = append(b, v)
		case []byte:
			b = append(b, v...)
		case string:
			b = binary.AppendUvarint(b, uint64(len(v)))
			b = append(b, v...)
		case int:
			b = binary.AppendUvarint(b, uint64(v))
		case uint64:
			b = binary.AppendUvarint(b, v)
		}
	}
	return b
}

func TestDecodeClockRejectsMalformedInput(t *testing.T) {
	const v = causal.EncodingVersion
	tests := []struct {
		name string
		give []byte
		want error
	}{
		{"empty", []byte{}, causal.ErrTruncated},
		{"bad version", hdr(byte(2), 0), causal.ErrUnknownVersion},
		{"version zero", hdr(byte(0), 0), causal.ErrUnknownVersion},
		{"missing group count", hdr(v), causal.ErrTruncated},
		{"group count beyond input", hdr(v, 1000), causal.ErrOverflow},
		{"huge group count", hdr(v, uint64(math.MaxUint64)), causal.ErrOverflow},
		{"varint over 64 bits", hdr(v, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}), causal.ErrOverflow},
		{"non-minimal varint", hdr(v, []byte{0x81, 0x00}, "a", 1, 0, 0), causal.ErrNonMinimal},
		{"name longer than input", hdr(v, 1, []byte{9, 'a', 'b', 'c', 'd'}), causal.ErrOverflow},
		{"empty name", hdr(v, 1, "", 2, 0, 0, 0, 0), causal.ErrEmptyTopic},
		{"name too long", hdr(v, 1, strings.Repeat("t", 250), 1, 0, 0), causal.ErrTopicTooLong},
		{"group without entries", hdr(v, 1, "a", 0, 0, 0), causal.ErrEmptyGroup},
		{"entry count beyond input", hdr(v, 1, "a", 50, 0, 0), causal.ErrOverflow},
		{"truncated offset", hdr(v, 1, "a", 1, 0, []byte{0x80}), causal.ErrTruncated},
		{"unsorted topics", hdr(v, 2, "b", 1, 0, 0, "a", 1, 0, 0), causal.ErrUnsorted},
		{"duplicate topic", hdr(v, 2, "a", 1, 0, 0, "a", 1, 1, 0), causal.ErrUnsorted},
		{"partition overflow", hdr(v, 1, "a", 1, uint64(math.MaxInt32)+1, 0), causal.ErrOverflow},
		{"partition overflow by gaps", hdr(v, 1, "a", 2, uint64(math.MaxInt32), 0, 0, 0), causal.ErrOverflow},
		{"offset overflow (negative as int64)", hdr(v, 1, "a", 1, 0, uint64(math.MaxInt64)+1), causal.ErrOverflow},
		{"trailing bytes", hdr(v, 1, "a", 1, 0, 0, byte(7)), causal.ErrTrailingBytes},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := causal.DecodeClock(tt.give)
			require.ErrorIs(t, err, tt.want)
			require.ErrorIs(t, err, causal.ErrMalformedClock)
			var de *causal.DecodeError
			require.True(t, errors.As(err, &de))
			assert.LessOrEqual(t, de.Pos, len(tt.give))
		})
	}
}

func TestDecodeClockAcceptsValidInput(t *testing.T) {
	tests := []struct {
		name string
		give []byte
		want string
	}{
		{"empty clock", hdr(causal.EncodingVersion, 0), ""},
		{"one entry", hdr(causal.EncodingVersion, 1, "a", 1, 3, 7), "a/3:7"},
		{"partition gaps", hdr(causal.EncodingVersion, 1, "a", 3, 0, 1, 0, 2, 4, 3), "a/0:1 a/1:2 a/6:3"},
		{"two topics", hdr(causal.EncodingVersion, 2, "a", 1, 0, 1, "b", 1, 2, 300), "a/0:1 b/2:300"},
		{"largest values", hdr(causal.EncodingVersion, 1, "a", 1, uint64(math.MaxInt32), uint64(math.MaxInt64)),
			"a/2147483647:9223372036854775807"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := causal.DecodeClock(tt.give)
			require.NoError(t, err)
			assert.Equal(t, clk(t, tt.want), got)
			assert.Equal(t, tt.give, causal.EncodeClock(got), "one encoding per clock")
		})
	}
}

func genClock() *rapid.Generator[causal.Clock] {
	return rapid.Custom(func(t *rapid.T) causal.Clock {
		n := rapid.IntRange(0, 20).Draw(t, "n")
		es := make([]causal.Entry, n)
		for i := range es {
			es[i] = causal.Entry{
				Channel: causal.Channel{
					Topic:     rapid.StringMatching(`[a-z][a-z0-9._-]{0,12}`).Draw(t, "topic"),
					Partition: rapid.Int32Range(0, math.MaxInt32).Draw(t, "partition"),
				},
				Offset: rapid.Int64Range(0, math.MaxInt64).Draw(t, "offset"),
			}
		}
		c, err := causal.NewClock(es...)
		if err != nil {
			t.Fatalf("generated an invalid clock: %v", err)
		}
		return c
	})
}

func TestClockRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := genClock().Draw(t, "clock")
		b := causal.EncodeClock(c)
		got, err := causal.DecodeClock(b)
		if err != nil {
			t.Fatalf("decode %v: %v", c, err)
		}
		if !got.Equal(c) {
			t.Fatalf("round trip: got %v want %v", got, c)
		}
		prefix := []byte("prefix")
		if !bytes.Equal(causal.AppendClock(prefix, c)[len(prefix):], b) {
			t.Fatalf("AppendClock and EncodeClock differ")
		}
	})
}

func TestClockJoinAndDominance(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a, b := genClock().Draw(t, "a"), genClock().Draw(t, "b")
		j := a.Join(b)
		if !a.DominatedBy(j) || !b.DominatedBy(j) {
			t.Fatalf("join %v does not dominate %v and %v", j, a, b)
		}
		if !j.Equal(b.Join(a)) {
			t.Fatalf("join is not commutative")
		}
		for ch, off := range j.All() {
			ao, aok := a.Get(ch)
			bo, bok := b.Get(ch)
			if !(aok && ao == off) && !(bok && bo == off) {
				t.Fatalf("join invented %s:%d", ch, off)
			}
		}
	})
}

// The size target: offsets below 2^21 on low partitions take at most four
// bytes an entry once the topic name is written.
func TestEncodedSizePerEntry(t *testing.T) {
	for _, n := range []int{8, 64} {
		es := make([]causal.Entry, n)
		for i := range es {
			es[i] = causal.Entry{Channel: causal.Channel{Topic: "orders", Partition: int32(i)}, Offset: 1<<21 - 1 - int64(i)}
		}
		c, err := causal.NewClock(es...)
		require.NoError(t, err)
		overhead := len(hdr(causal.EncodingVersion, 1, "orders", n))
		perEntry := float64(len(causal.EncodeClock(c))-overhead) / float64(n)
		assert.LessOrEqual(t, perEntry, 4.0, "%d entries", n)
	}
}

func FuzzDecodeClock(f *testing.F) {
	f.Add(hdr(causal.EncodingVersion, 0))
	f.Add(hdr(causal.EncodingVersion, 2, "orders", 2, 0, 17, 3, 900, "payments", 1, 1, 4))
	f.Add(hdr(causal.EncodingVersion, 1, "a", 1, uint64(math.MaxInt32), uint64(math.MaxInt64)))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := causal.DecodeClock(b)
		if err != nil {
			if !errors.Is(err, causal.ErrMalformedClock) {
				t.Fatalf("error %v does not match ErrMalformedClock", err)
			}
			return
		}
		if !bytes.Equal(causal.EncodeClock(c), b) {
			t.Fatalf("accepted a non-canonical encoding: % x", b)
		}
	})
}
