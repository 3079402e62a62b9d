package dsl

import (
	"fmt"
	"time"

	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/serde"
	"github.com/causeway-stream/causeway/operators"
)

// Stream is a typed record stream: every record is an event of its own
// (Kafka Streams' KStream). A Stream value is cheap to copy; steps
// attached to it run, in the order they were attached, on every record
// that reaches it.
type Stream[K, V any] struct {
	b     *Builder
	g     *group
	n     *node[K, V]
	codec serde.Codec[K, V]
	// origins are the input topics whose records reach this stream.
	origins []string
	// rekeyed: a step since the last topic read may have changed the
	// key, so records of one key may be on any task.
	rekeyed bool
	// rawKey and rawValue: the input record's key (value) bytes are the
	// key (value) serialized with codec, so writing needs no serializing.
	rawKey, rawValue bool
}

// Default returns the serde a step uses for T where none is given:
// serde.String for string, serde.Bytes for []byte, serde.Int64 for int64,
// and serde.JSON for every other type. Give another with WithSerdes.
func Default[T any]() serde.Serde[T] {
	var s any
	switch any(*new(T)).(type) {
	case string:
		s = serde.String()
	case []byte:
		s = serde.Bytes()
	case int64:
		s = serde.Int64()
	default:
		s = serde.JSON[T]()
	}
	return s.(serde.Serde[T])
}

// serdeFor returns have when it is a serde of T (a step kept the type),
// else T's default.
func serdeFor[T any](have any) serde.Serde[T] {
	if s, ok := have.(serde.Serde[T]); ok {
		return s
	}
	return Default[T]()
}

func codecFor[K, V any](key, value any) serde.Codec[K, V] {
	return serde.Codec[K, V]{Key: serdeFor[K](key), Value: serdeFor[V](value)}
}

// From reads a topic as a stream, decoding keys and values with codec.
// Reading one topic twice gives the same stream. A record whose key or
// value cannot be decoded is an error matching framework.ErrDeserialize,
// handled by the topology's bad-input policy. WithTimestamp takes each
// record's timestamp from its contents.
func From[K, V any](b *Builder, topic string, codec serde.Codec[K, V], opts ...SourceOpt[K, V]) Stream[K, V] {
	var o sourceOpts[K, V]
	for _, opt := range opts {
		opt(&o)
	}
	if have, ok := b.streams[topic]; ok {
		if len(opts) > 0 {
			b.fail("topic %q is read twice, the second time with options: give them where it is first read", topic)
		}
		if s, ok := have.(Stream[K, V]); ok {
			return s
		}
		b.fail("topic %q is read twice, as %T and as %T", topic, have, Stream[K, V]{})
		// A stream of its own, which Build does not turn into a processor.
		return newSource(b, &group{name: topic}, topic, codec, o)
	}
	s := newSource(b, b.newGroup(topic), topic, codec, o)
	b.streams[topic] = s
	return s
}

// SourceOpt configures how From reads a topic.
type SourceOpt[K, V any] func(*sourceOpts[K, V])

type sourceOpts[K, V any] struct {
	timestamp func(K, V) time.Time
	onInvalid framework.InvalidTimestamp
}

// WithTimestamp gives each record of the topic the timestamp fn takes
// from its key and value (a time in the value, say), in place of the one
// Kafka carries: Kafka Streams' timestamp extractor for one source. Every
// step after it (windows, joins, what is written out) sees that time. A
// zero time, or one before the Unix epoch, is invalid: onInvalid (first
// value only; default framework.FailOnInvalidTimestamp) says what becomes
// of the record. A record that fails goes through the topology's
// processing-error policy with an error matching
// framework.ErrInvalidTimestamp; a skipped one is reported as
// "invalid-timestamp".
func WithTimestamp[K, V any](fn func(K, V) time.Time, onInvalid ...framework.InvalidTimestamp) SourceOpt[K, V] {
	return func(o *sourceOpts[K, V]) {
		o.timestamp = fn
		if len(onInvalid) > 0 {
			o.onInvalid = onInvalid[0]
		}
	}
}

// newSource adds topic to g's inputs and returns the stream of its
// records.
func newSource[K, V any](b *Builder, g *group, topic string, codec serde.Codec[K, V], o sourceOpts[K, V]) Stream[K, V] {
	n := newNode[K, V]()
	g.sources = append(g.sources, source{topic: topic, open: func(t *task) (func(*meta) error, error) {
		next, err := n.open(t)
		if err != nil {
			return nil, err
		}
		// previous is the largest valid timestamp the extractor gave in this
		// task, for UsePreviousOnInvalidTimestamp.
		var previous time.Time
		return func(m *meta) error {
			k, err := codec.Key.Deserialize(m.rec.Key)
			if err != nil {
				return framework.KeyError(m.rec, err)
			}
			v, err := codec.Value.Deserialize(m.rec.Value)
			if err != nil {
				return framework.ValueError(m.rec, err)
			}
			if o.timestamp != nil {
				ts, skip, err := framework.ResolveTimestamp(m.rec, o.timestamp(k, v), nil, previous, o.onInvalid)
				switch {
				case err != nil:
					return err
				case skip:
					t.ctx.Report(framework.DropEvent{Reason: framework.DropInvalidTimestamp, Record: m.rec, Detail: "the timestamp extractor gave no valid timestamp"})
					return nil
				}
				previous = maxTime(previous, ts)
				m.rec.Timestamp = ts
			}
			return next(k, v, m)
		}, nil
	}})
	return Stream[K, V]{b: b, g: g, n: n, codec: codec, origins: []string{topic}, rawKey: true, rawValue: true}
}

// step attaches a step after s and returns the stream of what it hands
// on. open makes the step's push for one task, given the push of what
// comes after it.
func step[K, V, K2, V2 any](s Stream[K, V], codec serde.Codec[K2, V2], open func(t *task, next push[K2, V2]) (push[K, V], error)) Stream[K2, V2] {
	n := newNode[K2, V2]()
	s.n.then(func(t *task) (push[K, V], error) {
		next, err := n.open(t)
		if err != nil {
			return nil, err
		}
		return open(t, next)
	})
	return Stream[K2, V2]{b: s.b, g: s.g, n: n, codec: codec, origins: s.origins, rekeyed: s.rekeyed}
}

// Filter keeps the records for which keep returns true.
func (s Stream[K, V]) Filter(keep func(K, V) bool) Stream[K, V] {
	out := step(s, s.codec, func(_ *task, next push[K, V]) (push[K, V], error) {
		return func(k K, v V, m *meta) error {
			if !keep(k, v) {
				return nil
			}
			return next(k, v, m)
		}, nil
	})
	out.rawKey, out.rawValue = s.rawKey, s.rawValue
	return out
}

// FilterNot keeps the records for which drop returns false.
func (s Stream[K, V]) FilterNot(drop func(K, V) bool) Stream[K, V] {
	return s.Filter(func(k K, v V) bool { return !drop(k, v) })
}

// Peek calls fn for each record and hands the record on unchanged.
func (s Stream[K, V]) Peek(fn func(K, V)) Stream[K, V] {
	out := step(s, s.codec, func(_ *task, next push[K, V]) (push[K, V], error) {
		return func(k K, v V, m *meta) error {
			fn(k, v)
			return next(k, v, m)
		}, nil
	})
	out.rawKey, out.rawValue = s.rawKey, s.rawValue
	return out
}

// Foreach calls fn for each record; nothing comes after it. An error
// fails the record as a processor's error does.
func (s Stream[K, V]) Foreach(fn func(K, V) error) {
	s.n.then(func(*task) (push[K, V], error) {
		return func(k K, v V, _ *meta) error { return fn(k, v) }, nil
	})
}

// WithSerdes returns the stream with other serdes for writing it to a
// topic or a store, or for repartitioning it.
func (s Stream[K, V]) WithSerdes(key serde.Serde[K], value serde.Serde[V]) Stream[K, V] {
	s.codec = serde.Codec[K, V]{Key: key, Value: value}
	s.rawKey, s.rawValue = false, false
	return s
}

// Merge returns one stream of the records of s and of others. The inputs
// of all of them are read by one processor, so they must be
// co-partitioned (as for every processor).
func (s Stream[K, V]) Merge(others ...Stream[K, V]) Stream[K, V] {
	n := newNode[K, V]()
	out := Stream[K, V]{b: s.b, g: s.g, n: n, codec: s.codec}
	for _, o := range append([]Stream[K, V]{s}, others...) {
		out.g = union(out.g, o.g)
		out.rekeyed = out.rekeyed || o.rekeyed
		out.origins = unionOrigins(out.origins, o.origins)
		o.n.then(n.open)
	}
	return out
}

// Branch splits s: each record goes to the stream of the first predicate
// it matches. A record none matches is reported as dropped ("unmatched"),
// not dropped silently; end with a predicate that matches everything to
// keep them.
func (s Stream[K, V]) Branch(preds ...func(K, V) bool) []Stream[K, V] {
	out := make([]Stream[K, V], len(preds))
	nodes := make([]*node[K, V], len(preds))
	for i := range preds {
		nodes[i] = newNode[K, V]()
		out[i] = Stream[K, V]{b: s.b, g: s.g, n: nodes[i], codec: s.codec, origins: s.origins,
			rekeyed: s.rekeyed, rawKey: s.rawKey, rawValue: s.rawValue}
	}
	s.n.then(func(t *task) (push[K, V], error) {
		nexts := make([]push[K, V], len(nodes))
		for i, n := range nodes {
			var err error
			if nexts[i], err = n.open(t); err != nil {
				return nil, err
			}
		}
		return func(k K, v V, m *meta) error {
			for i, p := range preds {
				if p(k, v) {
					return nexts[i](k, v, m)
				}
			}
			t.ctx.Report(framework.DropEvent{Reason: "unmatched", Record: m.rec, Detail: "no branch matched"})
			return nil
		}, nil
	})
	return out
}

// To writes every record of s to topic, placed by key with Kafka's
// default partitioner unless an option says otherwise (see
// framework.KeepPartition). Headers and timestamps are those of the input
// record that led to it; the clock header is a fresh stamp.
func (s Stream[K, V]) To(topic string, opts ...framework.OutputOpt) {
	s.g.root().addSink(topic, s.origins, opts)
	s.n.then(func(t *task) (push[K, V], error) {
		return s.writer("for "+topic, func(rec framework.Record) error { return t.ctx.Emit(topic, rec) }), nil
	})
}

// writer returns the push that hands each record of s, serialized with
// its serdes (or a tombstone), to write; where names it in errors.
func (s Stream[K, V]) writer(where string, write func(framework.Record) error) push[K, V] {
	placer, _ := any(s.codec.Key).(serde.KeyPartitioner)
	return func(k K, v V, m *meta) error {
		out := m.rec
		out.PartitionKey = nil
		if !s.rawKey {
			b, err := s.codec.Key.Serialize(k)
			if err != nil {
				return fmt.Errorf("serialize key %s: %w", where, err)
			}
			out.Key = b
			if placer != nil {
				out.PartitionKey = placer.PartitionKey(b)
			}
		}
		switch {
		case m.tombstone:
			out.Value = nil
		case !s.rawValue:
			b, err := s.codec.Value.Serialize(v)
			if err != nil {
				return fmt.Errorf("serialize value %s: %w", where, err)
			}
			out.Value = b
		}
		return write(out)
	}
}

// Map turns each record into a new one, key and value.
func Map[K, V, K2, V2 any](s Stream[K, V], fn func(K, V) (K2, V2, error)) Stream[K2, V2] {
	out := step(s, codecFor[K2, V2](s.codec.Key, s.codec.Value), func(_ *task, next push[K2, V2]) (push[K, V], error) {
		return func(k K, v V, m *meta) error {
			k2, v2, err := fn(k, v)
			if err != nil {
				return err
			}
			return next(k2, v2, m)
		}, nil
	})
	out.rekeyed = true
	return out
}

// MapValues turns each value into a new one; the key stays, so the record
// needs no repartitioning.
func MapValues[K, V, V2 any](s Stream[K, V], fn func(K, V) (V2, error)) Stream[K, V2] {
	out := step(s, serde.Codec[K, V2]{Key: s.codec.Key, Value: serdeFor[V2](s.codec.Value)}, func(_ *task, next push[K, V2]) (push[K, V], error) {
		return func(k K, v V, m *meta) error {
			v2, err := fn(k, v)
			if err != nil {
				return err
			}
			return next(k, v2, m)
		}, nil
	})
	out.rawKey = s.rawKey
	return out
}

// FlatMap turns each record into any number of records.
func FlatMap[K, V, K2, V2 any](s Stream[K, V], fn func(K, V) ([]operators.KV[K2, V2], error)) Stream[K2, V2] {
	out := step(s, codecFor[K2, V2](s.codec.Key, s.codec.Value), func(_ *task, next push[K2, V2]) (push[K, V], error) {
		return func(k K, v V, m *meta) error {
			kvs, err := fn(k, v)
			if err != nil {
				return err
			}
			for _, kv := range kvs {
				if err := next(kv.Key, kv.Value, m); err != nil {
					return err
				}
			}
			return nil
		}, nil
	})
	out.rekeyed = true
	return out
}

// FlatMapValues turns each value into any number of values, each keyed as
// the record.
func FlatMapValues[K, V, V2 any](s Stream[K, V], fn func(K, V) ([]V2, error)) Stream[K, V2] {
	out := step(s, serde.Codec[K, V2]{Key: s.codec.Key, Value: serdeFor[V2](s.codec.Value)}, func(_ *task, next push[K, V2]) (push[K, V], error) {
		return func(k K, v V, m *meta) error {
			vs, err := fn(k, v)
			if err != nil {
				return err
			}
			for _, v2 := range vs {
				if err := next(k, v2, m); err != nil {
					return err
				}
			}
			return nil
		}, nil
	})
	out.rawKey = s.rawKey
	return out
}

// SelectKey gives each record a new key and keeps its value.
func SelectKey[K, V, K2 any](s Stream[K, V], fn func(K, V) (K2, error)) Stream[K2, V] {
	out := step(s, serde.Codec[K2, V]{Key: serdeFor[K2](s.codec.Key), Value: s.codec.Value}, func(_ *task, next push[K2, V]) (push[K, V], error) {
		return func(k K, v V, m *meta) error {
			k2, err := fn(k, v)
			if err != nil {
				return err
			}
			return next(k2, v, m)
		}, nil
	})
	out.rekeyed, out.rawValue = true, s.rawValue
	return out
}

// GroupByKey groups the records of s by their key, for an aggregation.
// Where a step before may have changed the key, the aggregation reads a
// repartition topic, so that every record of a key reaches one task.
func (s Stream[K, V]) GroupByKey() Grouped[K, V] { return Grouped[K, V]{s: s} }

// GroupBy gives each record a new key and groups by it: SelectKey, then
// GroupByKey.
func GroupBy[K, V, K2 any](s Stream[K, V], fn func(K, V) (K2, error)) Grouped[K2, V] {
	return SelectKey(s, fn).GroupByKey()
}

// repartition writes s to the internal topic "<name>-repartition",
// placed by key, and returns the stream read back from it by a processor
// of its own. The topic has the partition count of the first topic s
// comes from, unless its reader also reads other topics, with which it
// must then be co-partitioned (see Build).
func repartition[K, V any](s Stream[K, V], name string) Stream[K, V] {
	return repartitionInto(s, name, 0)
}

// repartitionInto is repartition, to a topic of partitions partitions
// when that is not 0.
func repartitionInto[K, V any](s Stream[K, V], name string, partitions int32) Stream[K, V] {
	topic := name + "-repartition"
	s.To(topic)
	like := ""
	if len(s.origins) > 0 {
		like = s.origins[0]
	}
	s.b.repartitions = append(s.b.repartitions, repartitionTopic{topic: topic, like: like, partitions: partitions})
	return newSource(s.b, s.b.newGroup(topic), topic, s.codec, sourceOpts[K, V]{})
}

// Repartition writes s by key to the internal topic
// "<name>-repartition" and reads it back (Kafka Streams' KStream.repartition
// with Repartitioned.as(name)): the steps after run in a processor of
// their own, on records placed by their current key. partitions, when
// not 0, is the topic's partition count (withNumberOfPartitions), and so
// the number of tasks after it; 0 takes the count of the topic s comes
// from. The name is required: it names a topic, which must not change
// when the topology does.
func (s Stream[K, V]) Repartition(name string, partitions int32) Stream[K, V] {
	switch {
	case !validName(name):
		s.b.fail("repartition %q: name it with letters, digits, '.', '_' and '-'", name)
	case partitions < 0:
		s.b.fail("repartition %s: %d partitions", name, partitions)
	}
	return repartitionInto(s, name, partitions)
}
