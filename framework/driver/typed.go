package driver

import (
	"fmt"
	"time"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/serde"
)

// Input pipes typed records into one topic.
type Input[K, V any] struct {
	d     *Driver
	topic string
	key   serde.Serde[K]
	value serde.Serde[V]
}

// NewInput returns a typed input for topic.
func NewInput[K, V any](d *Driver, topic string, key serde.Serde[K], value serde.Serde[V]) *Input[K, V] {
	return &Input[K, V]{d: d, topic: topic, key: key, value: value}
}

// Pipe serializes and appends one record, returning where it landed.
func (in *Input[K, V]) Pipe(k K, v V, opts ...PipeOpt) (causal.Channel, int64, error) {
	return in.PipeAt(k, v, time.Time{}, opts...)
}

// PipeAt is Pipe with a record timestamp (zero: the driver's wall clock).
func (in *Input[K, V]) PipeAt(k K, v V, ts time.Time, opts ...PipeOpt) (causal.Channel, int64, error) {
	kb, err := in.key.Serialize(k)
	if err != nil {
		return causal.Channel{}, 0, fmt.Errorf("serialize key: %w", err)
	}
	vb, err := in.value.Serialize(v)
	if err != nil {
		return causal.Channel{}, 0, fmt.Errorf("serialize value: %w", err)
	}
	return in.d.Pipe(in.topic, framework.Record{Key: kb, Value: vb, Timestamp: ts}, opts...)
}

// KeyValue is one typed output record with what the framework attached.
type KeyValue[K, V any] struct {
	Key       K
	Value     V
	Timestamp time.Time
	Partition int32
	Offset    int64
	Headers   []framework.Header
	// Clock is the record's decoded dependency clock.
	Clock causal.Clock
}

// Output reads typed records from one topic.
type Output[K, V any] struct {
	d     *Driver
	topic string
	key   serde.Serde[K]
	value serde.Serde[V]
	read  map[int32]int
}

// NewOutput returns a typed reader of topic.
func NewOutput[K, V any](d *Driver, topic string, key serde.Serde[K], value serde.Serde[V]) *Output[K, V] {
	return &Output[K, V]{d: d, topic: topic, key: key, value: value, read: map[int32]int{}}
}

// All returns every record of the topic, in partition then offset order.
func (o *Output[K, V]) All() ([]KeyValue[K, V], error) { return o.collect(false) }

// ReadNew returns the records appended since the last ReadNew.
func (o *Output[K, V]) ReadNew() ([]KeyValue[K, V], error) { return o.collect(true) }

func (o *Output[K, V]) collect(onlyNew bool) ([]KeyValue[K, V], error) {
	ps, ok := o.d.topics[o.topic]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownTopic, o.topic)
	}
	var out []KeyValue[K, V]
	for i, p := range ps {
		start := 0
		if onlyNew {
			start = o.read[int32(i)]
			o.read[int32(i)] = len(p.records)
		}
		for _, r := range p.records[start:] {
			kv, err := o.decode(r)
			if err != nil {
				return nil, err
			}
			out = append(out, kv)
		}
	}
	return out, nil
}

func (o *Output[K, V]) decode(r framework.Record) (KeyValue[K, V], error) {
	k, err := o.key.Deserialize(r.Key)
	if err != nil {
		return KeyValue[K, V]{}, framework.KeyError(r, err)
	}
	v, err := o.value.Deserialize(r.Value)
	if err != nil {
		return KeyValue[K, V]{}, framework.ValueError(r, err)
	}
	kv := KeyValue[K, V]{Key: k, Value: v, Timestamp: r.Timestamp, Partition: r.Partition, Offset: r.Offset, Headers: r.Headers}
	if h, ok := r.Header(causal.HeaderKey); ok {
		if kv.Clock, err = causal.DecodeClock(h); err != nil {
			return KeyValue[K, V]{}, fmt.Errorf("%s/%d@%d: %w", r.Topic, r.Partition, r.Offset, err)
		}
	}
	return kv, nil
}
