package dsl

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/serde"
	"github.com/causeway-stream/causeway/operators"
)

// Cogrouped is grouped streams with one key type, each with an aggregator
// of its own, folded into one aggregate a key, kept in one store: Kafka
// Streams' CogroupedKStream (KIP-150). Make it with Cogroup, add streams
// with CogroupWith, end it with Aggregate.
type Cogrouped[K, A any] struct {
	parts []func(storeName string, i int) Stream[K, cogroupStep[K, A]]
	// tagged are the same streams with each record's value kept, for
	// sliding windows, which fold their records again.
	tagged []func(storeName string, i int) (Stream[K, cogroupRecord[K, A]], func([]byte) (cogroupStep[K, A], error))
}

// cogroupRecord is one record of a cogrouped stream kept as it came: the
// stream it came from (its place in the cogroup), its value serialized by
// that stream's serde, and what it does to its key's aggregate.
type cogroupRecord[K, A any] struct {
	part  int
	value []byte
	apply cogroupStep[K, A]
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
	tagged := func(storeName string, i int) (Stream[K, cogroupRecord[K, A]], func([]byte) (cogroupStep[K, A], error)) {
		s := g.s
		if s.rekeyed {
			s = repartition(s, storeName+"-"+strconv.Itoa(i))
		}
		out := step(s, serde.Codec[K, cogroupRecord[K, A]]{Key: s.codec.Key}, func(_ *task, next push[K, cogroupRecord[K, A]]) (push[K, V], error) {
			return func(k K, v V, m *meta) error {
				b := m.rec.Value
				if !s.rawValue {
					var err error
					if b, err = s.codec.Value.Serialize(v); err != nil {
						return fmt.Errorf("serialize a cogrouped value: %w", err)
					}
				}
				return next(k, cogroupRecord[K, A]{part: i, value: b, apply: func(k K, acc A) (A, error) { return fn(k, v, acc) }}, m)
			}, nil
		})
		out.rawKey = s.rawKey
		decode := func(b []byte) (cogroupStep[K, A], error) {
			v, err := s.codec.Value.Deserialize(b)
			if err != nil {
				return nil, err
			}
			return func(k K, acc A) (A, error) { return fn(k, v, acc) }, nil
		}
		return out, decode
	}
	return Cogrouped[K, A]{
		parts:  append(slices.Clone(c.parts), part),
		tagged: append(slices.Clone(c.tagged), tagged),
	}
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
	s := c.merged(storeName)
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
		var scratch []byte
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
			at, err := putAggregate(kv, times, agg, kb, acc, m.rec.Timestamp, found, &scratch)
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

// merged is the cogroup's streams as one, each record as what it does to
// its key's aggregate; repartition topics are named after storeName.
func (c Cogrouped[K, A]) merged(storeName string) Stream[K, cogroupStep[K, A]] {
	streams := make([]Stream[K, cogroupStep[K, A]], len(c.parts))
	for i, part := range c.parts {
		streams[i] = part(storeName, i)
	}
	s := streams[0].Merge(streams[1:]...)
	s.rawKey = streams[0].rawKey
	return s
}

// applyStep folds one cogrouped record into its key's aggregate, started
// from init() for a key or window that has none.
func applyStep[K, A any](init func() A) func(k K, apply cogroupStep[K, A], acc A, found bool) (A, error) {
	return func(k K, apply cogroupStep[K, A], acc A, found bool) (A, error) {
		if !found {
			acc = init()
		}
		return apply(k, acc)
	}
}

// CogroupedWindowed is a cogroup cut into time windows (Kafka Streams'
// TimeWindowedCogroupedKStream): each record folds into every window of
// its key that holds its time, by its own stream's aggregator, with the
// rules of Windowed.
type CogroupedWindowed[K, A any] struct {
	c     Cogrouped[K, A]
	w     operators.Windows
	final bool
}

// WindowedBy cuts the cogroup into time windows
// (CogroupedKStream.windowedBy(TimeWindows)).
func (c Cogrouped[K, A]) WindowedBy(w operators.Windows) CogroupedWindowed[K, A] {
	return CogroupedWindowed[K, A]{c: c, w: w}
}

// EmitOnWindowClose emits one result per window, when it closes, as
// Windowed.EmitOnWindowClose does.
func (c CogroupedWindowed[K, A]) EmitOnWindowClose() CogroupedWindowed[K, A] {
	c.final = true
	return c
}

// Aggregate folds each key's records, window by window, into aggregates
// started from init() and kept in the named window store; agg serializes
// them (nil: Default[A]()). Keys are written as Kafka Streams'
// TimeWindowedSerializer writes them.
func (c CogroupedWindowed[K, A]) Aggregate(storeName string, init func() A, agg serde.Serde[A], opts ...StoreOpt) Table[operators.Windowed[K], A] {
	if len(c.c.parts) == 0 {
		return Table[operators.Windowed[K], A]{}
	}
	if agg == nil {
		agg = Default[A]()
	}
	w := WindowedBy(Grouped[K, cogroupStep[K, A]]{s: c.c.merged(storeName)}, c.w)
	w.final = c.final
	return windowFold(w, storeName, agg, applyStep[K, A](init), opts)
}

// CogroupedSessions is a cogroup cut into sessions (Kafka Streams'
// SessionWindowedCogroupedKStream), with the rules of Sessioned.
type CogroupedSessions[K, A any] struct {
	c     Cogrouped[K, A]
	w     SessionWindows
	final bool
}

// SessionWindowedBy cuts the cogroup into sessions
// (CogroupedKStream.windowedBy(SessionWindows)).
func (c Cogrouped[K, A]) SessionWindowedBy(w SessionWindows) CogroupedSessions[K, A] {
	return CogroupedSessions[K, A]{c: c, w: w}
}

// EmitOnWindowClose emits one result per session when it is final, as
// Sessioned.EmitOnWindowClose does.
func (c CogroupedSessions[K, A]) EmitOnWindowClose() CogroupedSessions[K, A] {
	c.final = true
	return c
}

// Aggregate folds each session's records into an aggregate started from
// init(), kept in the named store; merge combines the aggregates of
// sessions a record joins together (Kafka Streams' Merger). Keys are
// written as Kafka Streams' SessionWindowedSerializer writes them.
func (c CogroupedSessions[K, A]) Aggregate(storeName string, init func() A, merge func(k K, a, b A) (A, error), agg serde.Serde[A], opts ...StoreOpt) Table[operators.Windowed[K], A] {
	if len(c.c.parts) == 0 {
		return Table[operators.Windowed[K], A]{}
	}
	w := SessionWindowedBy(Grouped[K, cogroupStep[K, A]]{s: c.c.merged(storeName)}, c.w)
	w.final = c.final
	return SessionAggregate(w, storeName, init, func(k K, apply cogroupStep[K, A], acc A) (A, error) { return apply(k, acc) }, merge, agg, opts...)
}

// errNoCogroupStream is returned for a kept cogrouped record whose tag
// names no stream of the cogroup.
var errNoCogroupStream = errors.New("a kept cogrouped record names no stream of the cogroup")

// cogroupRecords serializes cogrouped records as their place in the
// cogroup (a uvarint) and their value, and reads them back with the
// stream's own serde.
type cogroupRecords[K, A any] struct {
	decode []func([]byte) (cogroupStep[K, A], error)
}

func (c cogroupRecords[K, A]) Serialize(r cogroupRecord[K, A]) ([]byte, error) {
	return append(binary.AppendUvarint(make([]byte, 0, len(r.value)+1), uint64(r.part)), r.value...), nil
}

func (c cogroupRecords[K, A]) Deserialize(b []byte) (cogroupRecord[K, A], error) {
	part, n := binary.Uvarint(b)
	if n <= 0 || part >= uint64(len(c.decode)) {
		return cogroupRecord[K, A]{}, errNoCogroupStream
	}
	apply, err := c.decode[part](b[n:])
	if err != nil {
		return cogroupRecord[K, A]{}, err
	}
	return cogroupRecord[K, A]{part: int(part), value: b[n:], apply: apply}, nil
}

// CogroupedSliding is a cogroup cut into sliding windows (Kafka Streams'
// SlidingWindowedCogroupedKStream), with the rules of Sliding: the window
// store keeps each record's value with the stream it came from, and a
// window is folded again from them, each by its own stream's aggregator.
type CogroupedSliding[K, A any] struct {
	c     Cogrouped[K, A]
	w     SlidingWindows
	final bool
}

// SlidingWindowedBy cuts the cogroup into sliding windows
// (CogroupedKStream.windowedBy(SlidingWindows)).
func (c Cogrouped[K, A]) SlidingWindowedBy(w SlidingWindows) CogroupedSliding[K, A] {
	return CogroupedSliding[K, A]{c: c, w: w}
}

// EmitOnWindowClose emits one result per window, when it closes, as
// Sliding.EmitOnWindowClose does.
func (c CogroupedSliding[K, A]) EmitOnWindowClose() CogroupedSliding[K, A] {
	c.final = true
	return c
}

// Aggregate folds each key's records, sliding window by sliding window,
// into aggregates started from init(), kept in the named window store;
// agg serializes them (nil: Default[A]()).
func (c CogroupedSliding[K, A]) Aggregate(storeName string, init func() A, agg serde.Serde[A], opts ...StoreOpt) Table[operators.Windowed[K], A] {
	if len(c.c.tagged) == 0 {
		return Table[operators.Windowed[K], A]{}
	}
	if agg == nil {
		agg = Default[A]()
	}
	streams := make([]Stream[K, cogroupRecord[K, A]], len(c.c.tagged))
	records := cogroupRecords[K, A]{decode: make([]func([]byte) (cogroupStep[K, A], error), len(c.c.tagged))}
	for i, part := range c.c.tagged {
		streams[i], records.decode[i] = part(storeName, i)
	}
	s := streams[0].Merge(streams[1:]...)
	s.rawKey = streams[0].rawKey
	s.codec.Value, s.rawValue = records, false
	w := SlidingWindowedBy(Grouped[K, cogroupRecord[K, A]]{s: s}, c.w)
	w.final = c.final
	return slidingFold(w, storeName, agg, func(k K, r cogroupRecord[K, A], acc A, found bool) (A, error) {
		if !found {
			acc = init()
		}
		return r.apply(k, acc)
	}, opts)
}
