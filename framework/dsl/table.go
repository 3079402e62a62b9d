package dsl

import (
	"fmt"
	"slices"
	"time"

	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/serde"
	"github.com/causeway-stream/causeway/framework/store"
)

// Table is a changelog of typed rows: each record is the new value of its
// key (Kafka Streams' KTable). Every Table here is materialized in a
// key-value store named by the step that made it, which joins read.
type Table[K, V any] struct {
	s     Stream[K, V]
	store string
	// versioned: the store keeps each key's history (Versioned).
	versioned bool
}

// Store names the key-value store that holds the table.
func (t Table[K, V]) Store() string { return t.store }

// ToStream returns the table's changes as a stream: one record per
// update, and a record with a nil value (a tombstone, written as such to
// a topic) per deletion.
func (t Table[K, V]) ToStream() Stream[K, V] { return t.s }

// StoreOpt configures a store a step declares.
type StoreOpt func(*framework.StoreSpec)

// InMemory keeps the store in memory even on a worker that keeps stores
// on disk (see framework.StoreSpec.InMemory).
func InMemory() StoreOpt { return func(s *framework.StoreSpec) { s.Memory = true } }

// declare adds a key-value store to the group of s.
func declare[K, V any](s Stream[K, V], name string, opts []StoreOpt) {
	spec := framework.KeyValueStore(name)
	for _, o := range opts {
		o(&spec)
	}
	g := s.g.root()
	g.stores = append(g.stores, spec)
}

// keyBytes returns the serialized key of a record at s.
func keyBytes[K, V any](s Stream[K, V], k K, m *meta) ([]byte, error) {
	if s.rawKey {
		return m.rec.Key, nil
	}
	b, err := s.codec.Key.Serialize(k)
	if err != nil {
		return nil, fmt.Errorf("serialize key: %w", err)
	}
	return b, nil
}

// nullKey reports whether the record m at a step of s has no key (a Kafka
// record whose key is null), and if so reports it dropped ("null-key"):
// as in Kafka Streams, a table, an aggregation or a join has nowhere to
// put such a record, and skipping it is not an error.
func nullKey[K, V any](t *task, s Stream[K, V], m *meta, what string) bool {
	if !s.rawKey || m.rec.Key != nil {
		return false
	}
	t.ctx.Report(framework.DropEvent{Reason: framework.DropNullKey, Record: m.rec, Detail: what + " takes no record without a key"})
	return true
}

// TableFrom reads a topic as a table (a compacted topic, typically),
// materialized in the named store: each record sets its key's row, and a
// record with a nil value deletes it. With the Versioned option the store
// keeps each key's history (see Versioned).
func TableFrom[K, V any](b *Builder, topic, storeName string, codec serde.Codec[K, V], opts ...StoreOpt) Table[K, V] {
	have, dup := b.streams[topic]
	if dup {
		if t, ok := have.(Table[K, V]); ok {
			return t
		}
		b.fail("topic %q is read twice, as %T and as %T", topic, have, Table[K, V]{})
	}
	g := &group{name: topic}
	if !dup {
		b.groups = append(b.groups, g) // else a table of its own, which Build does not turn into a processor
	}
	n := newNode[K, V]()
	out := Stream[K, V]{b: b, g: g, n: n, codec: codec, origins: []string{topic}, rawKey: true, rawValue: true}
	declare(out, storeName, opts)
	plays(out, roleTable, topic+"-table")
	versioned := isVersioned(opts)
	g.sources = append(g.sources, source{topic: topic, open: func(t *task) (func(*meta) error, error) {
		if versioned {
			return openVersionedTable(t, out, n, storeName, codec)
		}
		kv, err := t.ctx.KeyValueStore(storeName)
		if err != nil {
			return nil, err
		}
		next, err := n.open(t)
		if err != nil {
			return nil, err
		}
		// change is the meta of what the table hands on: the input's, with
		// whether the key had a row before, read only for a table-table
		// join, the one step that asks.
		var change meta
		return func(m *meta) error {
			if nullKey(t, out, m, "table "+storeName) {
				return nil
			}
			k, err := codec.Key.Deserialize(m.rec.Key)
			if err != nil {
				return framework.KeyError(m.rec, err)
			}
			change = *m
			if n.wantsPrior || n.wantsOld {
				var old []byte
				if old, change.prior, err = kv.Get(m.rec.Key); err != nil {
					return err
				}
				change.old = slices.Clone(old)
			}
			if m.rec.Value == nil {
				if err := kv.Delete(m.rec.Key); err != nil {
					return err
				}
				var zero V
				change.tombstone = true
				return next(k, zero, &change)
			}
			v, err := codec.Value.Deserialize(m.rec.Value)
			if err != nil {
				return framework.ValueError(m.rec, err)
			}
			if err := kv.Put(m.rec.Key, m.rec.Value); err != nil {
				return err
			}
			return next(k, v, &change)
		}, nil
	}})
	t := Table[K, V]{s: out, store: storeName, versioned: versioned}
	if !dup {
		b.streams[topic] = t
	}
	return t
}

// Grouped is a stream grouped by key, ready for an aggregation (Kafka
// Streams' KGroupedStream).
type Grouped[K, V any] struct{ s Stream[K, V] }

// prepare returns the stream an aggregation into the named store reads:
// s, or s read back from a repartition topic when its key may have
// changed.
func (g Grouped[K, V]) prepare(storeName string) Stream[K, V] {
	if g.s.rekeyed {
		return repartition(g.s, storeName)
	}
	return g.s
}

// Count counts the records of each key, kept in the named store. The
// table's values are int64s (serde.Int64 by default: 8 big-endian bytes,
// as Kafka's LongSerializer writes).
func (g Grouped[K, V]) Count(storeName string, opts ...StoreOpt) Table[K, int64] {
	return Aggregate(g, storeName, func() int64 { return 0 },
		func(_ K, _ V, n int64) (int64, error) { return n + 1, nil }, serde.Int64(), opts...)
}

// Reduce combines the values of each key with fn, the first value of a key
// kept as it is, in the named store.
func (g Grouped[K, V]) Reduce(storeName string, fn func(acc, v V) (V, error), opts ...StoreOpt) Table[K, V] {
	return fold(g, storeName, g.s.codec.Value, reducer[K](fn), opts)
}

// Aggregate folds the records of each key into an aggregate kept in the
// named store, starting from init(). agg serializes the aggregate; nil
// takes Default[A]().
func Aggregate[K, V, A any](g Grouped[K, V], storeName string, init func() A, fn func(K, V, A) (A, error), agg serde.Serde[A], opts ...StoreOpt) Table[K, A] {
	if agg == nil {
		agg = Default[A]()
	}
	return fold(g, storeName, agg, aggregator(init, fn), opts)
}

// reducer is fn as a fold: a key's first value is taken as it is.
func reducer[K, V any](fn func(acc, v V) (V, error)) func(K, V, V, bool) (V, error) {
	return func(_ K, v V, acc V, found bool) (V, error) {
		if !found {
			return v, nil
		}
		return fn(acc, v)
	}
}

// aggregator is fn as a fold: a key's aggregate starts from init().
func aggregator[K, V, A any](init func() A, fn func(K, V, A) (A, error)) func(K, V, A, bool) (A, error) {
	return func(k K, v V, acc A, found bool) (A, error) {
		if !found {
			acc = init()
		}
		return fn(k, v, acc)
	}
}

// fold is the step behind every aggregation: read the key's aggregate,
// fold the record in, write it back and hand it on.
func fold[K, V, A any](g Grouped[K, V], storeName string, agg serde.Serde[A], fn func(k K, v V, acc A, found bool) (A, error), opts []StoreOpt) Table[K, A] {
	s := g.prepare(storeName)
	declare(s, storeName, opts)
	declare(s, storeName+"-time", opts)
	plays(s, roleAggregate, "aggregate-"+storeName)
	var out Stream[K, A]
	out = step(s, serde.Codec[K, A]{Key: s.codec.Key, Value: agg}, func(t *task, next push[K, A]) (push[K, V], error) {
		kv, err := t.ctx.KeyValueStore(storeName)
		if err != nil {
			return nil, err
		}
		times, err := t.ctx.KeyValueStore(storeName + "-time")
		if err != nil {
			return nil, err
		}
		var change meta
		var scratch []byte
		return func(k K, v V, m *meta) error {
			if nullKey(t, s, m, "aggregation "+storeName) {
				return nil
			}
			if s.rawValue && m.rec.Value == nil {
				// Kafka Streams' KStreamAggregate and KStreamReduce skip it.
				t.ctx.Report(framework.DropEvent{Reason: "no-value", Record: m.rec, Detail: "a record with no value folds nothing into " + storeName})
				return nil
			}
			kb, err := keyBytes(s, k, m)
			if err != nil {
				return err
			}
			acc, found, err := current(kv, agg, kb, storeName)
			if err != nil {
				return err
			}
			if acc, err = fn(k, v, acc, found); err != nil {
				return err
			}
			was, err := oldValue(kv, kb, out.n.wantsOld, found)
			if err != nil {
				return err
			}
			at, err := putAggregate(kv, times, agg, kb, acc, m.rec.Timestamp, found, &scratch)
			if err != nil {
				return err
			}
			change = *m
			change.prior, change.old = found, was
			change.rec.Timestamp = at
			return next(k, acc, &change)
		}, nil
	})
	out.rawKey = s.rawKey
	return Table[K, A]{s: out, store: storeName}
}

// current reads a key's stored value.
func current[A any](kv store.KeyValue, s serde.Serde[A], key []byte, storeName string) (A, bool, error) {
	var a A
	b, ok, err := kv.Get(key)
	if err != nil || !ok {
		return a, false, err
	}
	if a, err = s.Deserialize(b); err != nil {
		return a, false, fmt.Errorf("stored value of %q in %s: %w", key, storeName, err)
	}
	return a, true, nil
}

// Join joins each record of s with the row of its key in t, as the row
// stands when the record is delivered; a record whose key has no row is
// reported as dropped ("no-match"). The stream and the table's input are
// read by one processor, so they must be co-partitioned; where a step
// before may have changed the stream's key, the stream is repartitioned
// first ("<store>-join-repartition"). The causal gate holds a stream
// record until every table update its clock names is applied, so a
// record written after an update (in a causal session) always joins it.
func Join[K, V, T, R any](s Stream[K, V], t Table[K, T], joiner func(K, V, T) (R, error)) Stream[K, R] {
	return join(s, t, false, func(k K, v V, row T, _ bool) (R, error) { return joiner(k, v, row) })
}

// LeftJoin is Join that keeps stream records with no row: joiner is
// called with found false and row the zero value.
func LeftJoin[K, V, T, R any](s Stream[K, V], t Table[K, T], joiner func(k K, v V, row T, found bool) (R, error)) Stream[K, R] {
	return join(s, t, true, joiner)
}

func join[K, V, T, R any](s Stream[K, V], t Table[K, T], left bool, joiner func(K, V, T, bool) (R, error)) Stream[K, R] {
	return joinGrace(s, t, left, 0, "", joiner)
}

// joinGrace is join, stream records held in the store buffer for grace
// of stream time first when grace is not 0 (JoinWithGrace).
func joinGrace[K, V, T, R any](s Stream[K, V], t Table[K, T], left bool, grace time.Duration, buffer string, joiner func(K, V, T, bool) (R, error)) Stream[K, R] {
	if t.store == "" {
		s.b.fail("a stream joins a table materialized in a store: make a table of a suppressed one (ToStream, then ToTable) to join it")
	}
	if s.rekeyed {
		s = repartition(s, t.store+"-join")
	}
	s.g = union(t.s.g, s.g)
	plays(s, roleJoin, s.name()+map[bool]string{false: "-join-", true: "-left-join-"}[left]+t.store)
	if grace > 0 {
		declare(s, buffer, nil)
	}
	rows := t.s.codec.Value
	out := step(s, serde.Codec[K, R]{Key: s.codec.Key, Value: Default[R]()}, func(tk *task, next push[K, R]) (push[K, V], error) {
		var kv store.KeyValue
		var asOf *asOfRows
		if t.versioned {
			vs, err := tk.ctx.VersionedStore(t.store)
			if err != nil {
				return nil, err
			}
			asOf = &asOfRows{vs: vs}
			kv = asOf
		} else {
			var err error
			if kv, err = tk.ctx.KeyValueStore(t.store); err != nil {
				return nil, err
			}
		}
		one := func(k K, v V, m *meta) error {
			if asOf != nil {
				asOf.at = m.rec.Timestamp // the row as of the record's time (KIP-914)
			}
			if left && s.rawKey && m.rec.Key == nil {
				// Kafka Streams (KIP-962): a left join joins a record
				// without a key with no row.
				var row T
				r, err := joiner(k, v, row, false)
				if err != nil {
					return err
				}
				return next(k, r, m)
			}
			if nullKey(tk, s, m, "join with table "+t.store) {
				return nil
			}
			kb, err := keyBytes(s, k, m)
			if err != nil {
				return err
			}
			return joinRow(tk, kv, rows, t.store, left, joiner, next, k, v, kb, m, "no table row for key")
		}
		if grace <= 0 {
			return one, nil
		}
		return graceBuffer(tk, s, buffer, grace, one)
	})
	out.rawKey = s.rawKey
	// What the join emits depends on the row it read as much as on the
	// stream record.
	out.origins = unionOrigins(out.origins, t.s.origins)
	return out
}

// joinRow looks kb up in a table's store and hands on what joiner makes
// of the record and the row: the step a stream-table join and a global
// table join share. A record with no row, unless left, is reported as
// dropped ("no-match") with noRow as the detail.
func joinRow[K, V, T, R any](t *task, kv store.KeyValue, rows serde.Serde[T], storeName string, left bool,
	joiner func(K, V, T, bool) (R, error), next push[K, R], k K, v V, kb []byte, m *meta, noRow string) error {
	row, found, err := current(kv, rows, kb, storeName)
	if err != nil {
		return err
	}
	if !found && !left {
		t.ctx.Report(framework.DropEvent{Reason: "no-match", Record: m.rec, Detail: noRow})
		return nil
	}
	r, err := joiner(k, v, row, found)
	if err != nil {
		return err
	}
	return next(k, r, m)
}

// unionOrigins returns the input topics of a and those of b it lacks.
func unionOrigins(a, b []string) []string {
	out := slices.Clone(a)
	for _, in := range b {
		if !slices.Contains(out, in) {
			out = append(out, in)
		}
	}
	return out
}
