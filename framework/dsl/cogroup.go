package dsl

import (
	"strconv"

	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/serde"
)

// Cogrouped is grouped streams with one key type, each with an aggregator
// of its own, folded into one aggregate a key, kept in one store: Kafka
// Streams' CogroupedKStream (KIP-150). Make it with Cogroup, add streams
// with CogroupWith, end it with Aggregate.
type Cogrouped[K, A any] struct {
	parts []func(storeName string, i int) Stream[K, cogroupStep[K, A]]
}

// cogroupStep is one record of a cogrouped stream, as what it does to its
// key's aggregate.
type cogroupStep[K, A any] func(k K, acc A) (A, error)

// Cogroup starts a cogroup with g, whose records fn folds into the
// aggregate (KGroupedStream.cogroup).
func Cogroup[K, V, A any](g Grouped[K, V], fn func(K, V, A) (A, error)) Cogrouped[K, A] {
	return CogroupWith(Cogrouped[K, A]{}, g, fn)
}

// CogroupWith adds g to the cogroup c, its records folded in by fn
// (CogroupedKStream.cogroup). The streams may carry values of different
// types; their keys must be co-partitioned, as for every processor, and
// a stream whose key a step before may have changed is repartitioned
// first.
func CogroupWith[K, V, A any](c Cogrouped[K, A], g Grouped[K, V], fn func(K, V, A) (A, error)) Cogrouped[K, A] {
	part := func(storeName string, i int) Stream[K, cogroupStep[K, A]] {
		s := g.s
		if s.rekeyed {
			s = repartition(s, storeName+"-"+strconv.Itoa(i))
		}
		out := step(s, serde.Codec[K, cogroupStep[K, A]]{Key: s.codec.Key}, func(_ *task, next push[K, cogroupStep[K, A]]) (push[K, V], error) {
			return func(k K, v V, m *meta) error {
				return next(k, func(k K, acc A) (A, error) { return fn(k, v, acc) }, m)
			}, nil
		})
		out.rawKey = s.rawKey
		return out
	}
	return Cogrouped[K, A]{parts: append(append([]func(string, int) Stream[K, cogroupStep[K, A]](nil), c.parts...), part)}
}

// Aggregate folds the records of every cogrouped stream into one
// aggregate a key, kept in the named store and starting from init(); agg
// serializes it (nil: Default[A]()). As Kafka Streams' aggregations do, a
// result carries the latest timestamp of the records folded into it, and
// a record with no value or no key is reported dropped ("no-value",
// "null-key") and folds nothing. Like a zero Grouped, a zero Cogrouped
// (not made by Cogroup) has no stream, and its Table no builder.
func (c Cogrouped[K, A]) Aggregate(storeName string, init func() A, agg serde.Serde[A], opts ...StoreOpt) Table[K, A] {
	if len(c.parts) == 0 {
		return Table[K, A]{}
	}
	if agg == nil {
		agg = Default[A]()
	}
	streams := make([]Stream[K, cogroupStep[K, A]], len(c.parts))
	for i, part := range c.parts {
		streams[i] = part(storeName, i)
	}
	s := streams[0].Merge(streams[1:]...)
	s.rawKey = streams[0].rawKey
	declare(s, storeName, opts)
	declare(s, storeName+"-time", opts)
	plays(s, roleAggregate, "cogroup-"+storeName)
	var out Stream[K, A]
	out = step(s, serde.Codec[K, A]{Key: s.codec.Key, Value: agg}, func(t *task, next push[K, A]) (push[K, cogroupStep[K, A]], error) {
		kv, err := t.ctx.KeyValueStore(storeName)
		if err != nil {
			return nil, err
		}
		times, err := t.ctx.KeyValueStore(storeName + "-time")
		if err != nil {
			return nil, err
		}
		var result meta
		return func(k K, apply cogroupStep[K, A], m *meta) error {
			if nullKey(t, s, m, "aggregation "+storeName) {
				return nil
			}
			if m.rec.Value == nil {
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
			if !found {
				acc = init()
			}
			if acc, err = apply(k, acc); err != nil {
				return err
			}
			was, err := oldValue(kv, kb, out.n.wantsOld, found)
			if err != nil {
				return err
			}
			at, err := putAggregate(kv, times, agg, kb, acc, m.rec.Timestamp, found)
			if err != nil {
				return err
			}
			result = *m
			result.prior, result.tombstone, result.old = found, false, was
			result.rec.Timestamp = at
			return next(k, acc, &result)
		}, nil
	})
	out.rawKey = s.rawKey
	return Table[K, A]{s: out, store: storeName}
}
