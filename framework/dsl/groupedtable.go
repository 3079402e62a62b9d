package dsl

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/serde"
	"github.com/causeway-stream/causeway/framework/store"
)

// The headers of a regrouped table's repartition topic, which carry what
// Kafka Streams sends in a record's Change: headerChange says what the
// record does to its group's aggregate (changeSubtract: take the value
// out; changeReplace: take headerOldValue out, then add the value; none:
// add the value).
const (
	headerChange   = "causeway.table.change"
	headerOldValue = "causeway.table.old"
	changeSubtract = "subtract"
	changeReplace  = "replace"
)

// GroupedTable is a table's rows regrouped by a new key, ready for an
// aggregation that adds each row to its group and subtracts it again
// when the row changes or moves to another group (Kafka Streams'
// KGroupedTable).
type GroupedTable[K, V any] struct{ s Stream[K, V] }

// GroupTable regroups the rows of t by what selector makes of each: a
// new key and value, or ok false for a row that belongs to no group
// (Kafka Streams' KTable.groupBy, whose mapper returns null). Each change
// of a row goes through the repartition topic "<name>-repartition": to
// its group, its new value with its old one to subtract; when its group
// changes, the old value to subtract from the old group, then the new
// value to the new group (KIP-904).
func GroupTable[K, V, K2, V2 any](t Table[K, V], name string, selector func(K, V) (K2, V2, bool, error), codec serde.Codec[K2, V2]) GroupedTable[K2, V2] {
	s := t.s
	s.n.wantsOld = true
	rows := s.codec.Value
	out := step(s, codec, func(tk *task, next push[K2, V2]) (push[K, V], error) {
		var sent meta
		// group is where row goes, serialized, if anywhere.
		group := func(k K, row V) (K2, V2, []byte, bool, error) {
			k2, v2, ok, err := selector(k, row)
			if err != nil || !ok {
				return k2, v2, nil, false, err
			}
			kb, err := codec.Key.Serialize(k2)
			if err != nil {
				return k2, v2, nil, false, fmt.Errorf("serialize the group key of %s: %w", name, err)
			}
			return k2, v2, kb, true, nil
		}
		return func(k K, v V, m *meta) error {
			var oldK, newK K2
			var oldV, newV V2
			var oldKB, newKB []byte
			hadOld, hasNew := false, false
			var err error
			if m.prior && m.old != nil {
				old, err := rows.Deserialize(m.old)
				if err != nil {
					return fmt.Errorf("the row before the change: %w", err)
				}
				if oldK, oldV, oldKB, hadOld, err = group(k, old); err != nil {
					return err
				}
			}
			if !m.tombstone && (!s.rawValue || m.rec.Value != nil) {
				if newK, newV, newKB, hasNew, err = group(k, v); err != nil {
					return err
				}
			}
			send := func(k2 K2, v2 V2, change string, old *V2) error {
				sent = *m
				sent.tombstone, sent.prior, sent.old = false, false, nil
				sent.rec.Headers = withoutHeader(withoutHeader(m.rec.Headers, headerOldValue), headerChange)
				if change != "" {
					sent.rec.Headers = append(sent.rec.Headers, framework.Header{Key: headerChange, Value: []byte(change)})
				}
				if old != nil {
					b, err := codec.Value.Serialize(*old)
					if err != nil {
						return fmt.Errorf("serialize the value %s subtracts: %w", name, err)
					}
					sent.rec.Headers = append(sent.rec.Headers, framework.Header{Key: headerOldValue, Value: b})
				}
				return next(k2, v2, &sent)
			}
			same := hadOld && hasNew && bytes.Equal(oldKB, newKB)
			switch {
			case same:
				return send(newK, newV, changeReplace, &oldV)
			case hadOld:
				if err := send(oldK, oldV, changeSubtract, nil); err != nil {
					return err
				}
			}
			if hasNew {
				return send(newK, newV, "", nil)
			}
			return nil
		}, nil
	})
	out.rekeyed = true
	return GroupedTable[K2, V2]{s: repartition(out, name)}
}

// withoutHeader is headers less those named key.
func withoutHeader(headers []framework.Header, key string) []framework.Header {
	out := make([]framework.Header, 0, len(headers)+1)
	for _, h := range headers {
		if h.Key != key {
			out = append(out, h)
		}
	}
	return out
}

// Aggregate folds each group's rows into an aggregate kept in the named
// store, starting from init(): adder adds a row's value, subtractor takes
// one out again when its row changes or leaves the group (Kafka Streams'
// KGroupedTable.aggregate). An aggregate takes the time of its latest
// change, the latest of its records' (kept in "<store>-time"). agg
// serializes the aggregate; nil takes Default[A]().
func AggregateTable[K, V, A any](g GroupedTable[K, V], storeName string, init func() A, adder, subtractor func(K, V, A) (A, error), agg serde.Serde[A], opts ...StoreOpt) Table[K, A] {
	if agg == nil {
		agg = Default[A]()
	}
	return tableFold(g, storeName, agg, func(k K, v V, acc A, found bool) (A, error) {
		if !found {
			acc = init()
		}
		return adder(k, v, acc)
	}, subtractor, opts)
}

// ReduceTable combines each group's rows with adder, the first row's
// value kept as it is, and takes a row out with subtractor when it
// changes or leaves the group (Kafka Streams' KGroupedTable.reduce), in
// the named store.
func ReduceTable[K, V any](g GroupedTable[K, V], storeName string, adder, subtractor func(acc, v V) (V, error), opts ...StoreOpt) Table[K, V] {
	return tableFold(g, storeName, g.s.codec.Value, func(_ K, v V, acc V, found bool) (V, error) {
		if !found {
			return v, nil
		}
		return adder(acc, v)
	}, func(_ K, v V, acc V) (V, error) { return subtractor(acc, v) }, opts)
}

// tableFold is the step behind a grouped table's aggregations: add folds
// a value in (found: the group had an aggregate), subtract takes one out
// of an aggregate there is; each record of the repartition topic does
// what its headerChange says.
func tableFold[K, V, A any](g GroupedTable[K, V], storeName string, agg serde.Serde[A], add func(K, V, A, bool) (A, error), subtract func(K, V, A) (A, error), opts []StoreOpt) Table[K, A] {
	s := g.s
	declare(s, storeName, opts)
	declare(s, storeName+"-time", opts)
	plays(s, roleAggregate, "table-aggregate-"+storeName)
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
		var result meta
		var scratch []byte
		return func(k K, v V, m *meta) error {
			if nullKey(t, s, m, "aggregation "+storeName) {
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
			change, _ := m.rec.Header(headerChange)
			switch string(change) {
			case changeSubtract:
				if !found {
					return nil // nothing to take it out of
				}
				if acc, err = subtract(k, v, acc); err != nil {
					return err
				}
			case changeReplace:
				if found {
					old, _ := m.rec.Header(headerOldValue)
					ov, err := s.codec.Value.Deserialize(old)
					if err != nil {
						return fmt.Errorf("the value to subtract in %s: %w", storeName, err)
					}
					if acc, err = subtract(k, ov, acc); err != nil {
						return err
					}
				}
				fallthrough
			default:
				if acc, err = add(k, v, acc, found); err != nil {
					return err
				}
			}
			was, err := oldValue(kv, kb, out.n.wantsOld, found)
			if err != nil {
				return err
			}
			at, err := putAggregate(kv, times, agg, kb, acc, m.rec.Timestamp, found, &scratch)
			if err != nil {
				return err
			}
			result = *m
			result.prior, result.tombstone, result.old = found, false, was
			result.rec.Headers = withoutHeader(withoutHeader(m.rec.Headers, headerOldValue), headerChange)
			result.rec.Timestamp = at
			return next(k, acc, &result)
		}, nil
	})
	out.rawKey = s.rawKey
	return Table[K, A]{s: out, store: storeName}
}

// CountTable counts each group's rows, kept in the named store (Kafka
// Streams' KGroupedTable.count): a row adds one, and takes it away when
// it changes or leaves the group.
func CountTable[K, V any](g GroupedTable[K, V], storeName string, opts ...StoreOpt) Table[K, int64] {
	return AggregateTable(g, storeName, func() int64 { return 0 },
		func(_ K, _ V, n int64) (int64, error) { return n + 1, nil },
		func(_ K, _ V, n int64) (int64, error) { return n - 1, nil }, serde.Int64(), opts...)
}

// putAggregate writes a key's new aggregate, and keeps in times the
// latest timestamp among the records folded into it, which it returns:
// the result's time, as Kafka Streams' aggregations give it. found says
// whether the key had an aggregate before; one made anew starts from at.
// scratch holds the encoded time between calls (the stores copy what
// they are given).
func putAggregate[A any](kv, times store.KeyValue, agg serde.Serde[A], kb []byte, acc A, at time.Time, found bool, scratch *[]byte) (time.Time, error) {
	b, err := agg.Serialize(acc)
	if err != nil {
		return at, fmt.Errorf("serialize aggregate: %w", err)
	}
	if err := kv.Put(kb, b); err != nil {
		return at, err
	}
	if found {
		if tb, ok, err := times.Get(kb); err != nil {
			return at, err
		} else if ok && len(tb) == 8 {
			at = maxTime(at, time.Unix(0, int64(binary.BigEndian.Uint64(tb))).UTC())
		}
	}
	*scratch = binary.BigEndian.AppendUint64((*scratch)[:0], uint64(at.UnixNano()))
	return at, times.Put(kb, *scratch)
}

// oldValue is a key's stored aggregate before a change, for a step after
// that asked for it (node.wantsOld: a regrouping, a foreign-key join);
// nil when none asked or the key had none.
func oldValue(kv store.KeyValue, kb []byte, wanted, found bool) ([]byte, error) {
	if !wanted || !found {
		return nil, nil
	}
	b, _, err := kv.Get(kb)
	return slices.Clone(b), err
}
