// Package serde turns typed keys and values into Kafka record bytes and back.
// Every serde is a value of Serde[T], so processors work with their own types
// and never with interface{} payloads.
package serde

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// Codec pairs the serdes of a record's key and value: what a stream or
// table is read and written with.
type Codec[K, V any] struct {
	Key   Serde[K]
	Value Serde[V]
}

// Serde serializes values of T to bytes and back. Implementations must be
// safe for concurrent use.
type Serde[T any] interface {
	Serialize(v T) ([]byte, error)
	Deserialize(b []byte) (T, error)
}

// KeyPartitioner is a key serde whose keys are placed in partitions by a
// part of their bytes: a windowed key by the key its window is of (Kafka
// Streams' WindowedStreamPartitioner). Writers set
// framework.Record.PartitionKey from it.
type KeyPartitioner interface {
	// PartitionKey returns the bytes of the serialized key that choose
	// its partition.
	PartitionKey(key []byte) []byte
}

// ErrLength is returned when fixed-size input has the wrong length.
var ErrLength = errors.New("wrong length")

// ErrNull is returned when a serde that has no null value gets none (a nil
// Kafka value, as in a tombstone).
var ErrNull = errors.New("null input")

// ErrInvalidUTF8 is returned by a text serde (JSON) for input that is not
// valid UTF-8.
var ErrInvalidUTF8 = errors.New("not valid UTF-8")

type bytesSerde struct{}

// Bytes passes byte slices through unchanged. Nil stays nil.
func Bytes() Serde[[]byte] { return bytesSerde{} }

func (bytesSerde) Serialize(v []byte) ([]byte, error)   { return v, nil }
func (bytesSerde) Deserialize(b []byte) ([]byte, error) { return b, nil }

type stringSerde struct{}

// String is UTF-8 text, as Kafka's StringSerializer writes it. It does not
// validate the encoding; a nil input is the empty string.
func String() Serde[string] { return stringSerde{} }

func (stringSerde) Serialize(v string) ([]byte, error)   { return []byte(v), nil }
func (stringSerde) Deserialize(b []byte) (string, error) { return string(b), nil }

type int64Serde struct{}

// Int64 is an 8-byte big-endian integer, as Kafka's LongSerializer writes it.
func Int64() Serde[int64] { return int64Serde{} }

func (int64Serde) Serialize(v int64) ([]byte, error) {
	return binary.BigEndian.AppendUint64(nil, uint64(v)), nil
}

func (int64Serde) Deserialize(b []byte) (int64, error) {
	if b == nil {
		return 0, ErrNull
	}
	if len(b) != 8 {
		return 0, fmt.Errorf("int64: %d bytes: %w", len(b), ErrLength)
	}
	return int64(binary.BigEndian.Uint64(b)), nil
}

type varintSerde struct{}

// Varint is a zig-zag varint, the compact encoding for small integers.
func Varint() Serde[int64] { return varintSerde{} }

func (varintSerde) Serialize(v int64) ([]byte, error) { return binary.AppendVarint(nil, v), nil }

func (varintSerde) Deserialize(b []byte) (int64, error) {
	if b == nil {
		return 0, ErrNull
	}
	v, n := binary.Varint(b)
	if n <= 0 || n != len(b) {
		return 0, fmt.Errorf("varint: %d bytes: %w", len(b), ErrLength)
	}
	return v, nil
}

type jsonSerde[T any] struct{}

// JSON encodes T with encoding/json. A nil input (a tombstone) is ErrNull,
// so that deleting is never mistaken for a zero value, and one that is not
// valid UTF-8 is ErrInvalidUTF8: encoding/json would read it with U+FFFD
// in place of the bytes it cannot read, and the record would be
// processed as something nobody wrote.
func JSON[T any]() Serde[T] { return jsonSerde[T]{} }

func (jsonSerde[T]) Serialize(v T) ([]byte, error) { return json.Marshal(v) }

func (jsonSerde[T]) Deserialize(b []byte) (T, error) {
	var v T
	if b == nil {
		return v, ErrNull
	}
	if !utf8.Valid(b) {
		return v, fmt.Errorf("decode %T from JSON: %w", v, ErrInvalidUTF8)
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return v, fmt.Errorf("decode %T from JSON: %w", v, err)
	}
	return v, nil
}
