package dsl

import (
	"fmt"
	"slices"
	"time"

	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/serde"
	"github.com/causeway-stream/causeway/operators"
)

// SlidingWindows groups records by how far apart they are (Kafka Streams'
// SlidingWindows): every window is [start, start+Difference], both ends
// included, and there is one for each distinct set of a key's records no
// more than Difference apart. A record at t makes the window that ends at
// t, and, once a later record comes within Difference of it, the window
// that starts just after it (t plus a millisecond, the unit of Kafka
// timestamps), which holds the records after it. A window closes once
// stream time passes its end plus Grace; a record whose own window has
// closed is reported as dropped ("late").
type SlidingWindows struct {
	Difference, Grace time.Duration
}

// slidingStep is how far after a record the window that leaves it out
// starts: a millisecond, the unit of Kafka timestamps.
const slidingStep = time.Millisecond

// Sliding is a grouped stream cut into sliding windows.
type Sliding[K, V any] struct {
	g Grouped[K, V]
	w SlidingWindows
}

// SlidingWindowedBy cuts a grouped stream into sliding windows.
func SlidingWindowedBy[K, V any](g Grouped[K, V], w SlidingWindows) Sliding[K, V] {
	if w.Difference <= 0 || w.Grace < 0 {
		g.s.b.fail("sliding windows %+v: the difference must be positive, grace not negative", w)
	}
	return Sliding[K, V]{g: g, w: w}
}

// Count counts the records of each key and sliding window.
func (w Sliding[K, V]) Count(storeName string, opts ...StoreOpt) Table[operators.Windowed[K], int64] {
	return SlidingAggregate(w, storeName, func() int64 { return 0 },
		func(_ K, _ V, n int64) (int64, error) { return n + 1, nil }, serde.Int64(), opts...)
}

// Reduce combines the values of each key and sliding window with fn.
func (w Sliding[K, V]) Reduce(storeName string, fn func(acc, v V) (V, error), opts ...StoreOpt) Table[operators.Windowed[K], V] {
	return slidingFold(w, storeName, w.g.s.codec.Value, reducer[K](fn), opts)
}

// SlidingAggregate folds the records of each key and sliding window into
// an aggregate, starting from init(). The named window store keeps the
// records themselves, for as long as an open window may need them: every
// window a record changes is folded again from the records it holds, in
// timestamp order, and emitted, in order of start. The table's keys are
// written in the layout of Kafka Streams' TimeWindowedSerializer, with
// window size Difference. agg serializes the aggregate; nil takes
// Default[A]().
func SlidingAggregate[K, V, A any](w Sliding[K, V], storeName string, init func() A, fn func(K, V, A) (A, error), agg serde.Serde[A], opts ...StoreOpt) Table[operators.Windowed[K], A] {
	if agg == nil {
		agg = Default[A]()
	}
	return slidingFold(w, storeName, agg, aggregator(init, fn), opts)
}

func slidingFold[K, V, A any](w Sliding[K, V], storeName string, agg serde.Serde[A], fn func(K, V, A, bool) (A, error), opts []StoreOpt) Table[operators.Windowed[K], A] {
	s := w.g.prepare(storeName)
	d, grace := w.w.Difference, w.w.Grace
	declareWindow(s, storeName, 2*d+slidingStep+grace, opts)
	out := step(s, operators.Codec[operators.Windowed[K], A]{Key: operators.WindowedKey(s.codec.Key, d), Value: agg},
		func(t *task, next push[operators.Windowed[K], A]) (push[K, V], error) {
			buf, err := t.ctx.WindowStore(storeName)
			if err != nil {
				return nil, err
			}
			type rec struct {
				at time.Time
				v  V
			}
			return func(k K, v V, m *meta) error {
				now, at := t.ctx.StreamTime(), m.rec.Timestamp
				if at.Add(grace).Before(now) {
					t.ctx.Report(framework.DropEvent{Reason: "late", Record: m.rec, Detail: fmt.Sprintf("its window closed at stream time %s",
						now.Format(time.RFC3339Nano))})
					return nil
				}
				kb, err := keyBytes(s, k, m)
				if err != nil {
					return err
				}
				vb := m.rec.Value
				if !s.rawValue {
					if vb, err = s.codec.Value.Serialize(v); err != nil {
						return fmt.Errorf("serialize value: %w", err)
					}
				}
				if err := appendValue(buf, kb, at, vb); err != nil {
					return err
				}
				// Every record of the key that a window holding the new one
				// can hold, or that starts such a window just after it.
				var recs []rec
				for ts, list := range buf.Fetch(kb, at.Add(-d-slidingStep), at.Add(d)) {
					if err := eachValue(list, func(b []byte) error {
						x, err := s.codec.Value.Deserialize(b)
						if err != nil {
							return fmt.Errorf("stored value of %q in %s: %w", kb, storeName, err)
						}
						recs = append(recs, rec{ts, x})
						return nil
					}); err != nil {
						return err
					}
				}
				// The windows holding the new record: its own, the one just
				// after it, those that end at a record up to a difference
				// after it, and those just after a record up to a
				// difference before it.
				starts := []time.Time{at.Add(-d), at.Add(slidingStep)}
				for _, r := range recs {
					if !r.at.Before(at) && !r.at.After(at.Add(d)) {
						starts = append(starts, r.at.Add(-d))
					}
					if r.at.Before(at) && !r.at.Before(at.Add(-d-slidingStep)) {
						starts = append(starts, r.at.Add(slidingStep))
					}
				}
				slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
				starts = slices.Compact(starts)
				for _, start := range starts {
					end := start.Add(d)
					if end.Add(grace).Before(now) {
						continue // closed
					}
					var acc A
					found := false
					for _, r := range recs {
						if r.at.Before(start) || r.at.After(end) {
							continue
						}
						if acc, err = fn(k, r.v, acc, found); err != nil {
							return err
						}
						found = true
					}
					if !found {
						continue // no record: no window
					}
					if err := next(operators.Windowed[K]{Key: k, Start: start, End: end}, acc, m); err != nil {
						return err
					}
				}
				// No window still open can hold a record older than this.
				return buf.DropBefore(now.Add(-grace - d - slidingStep))
			}, nil
		})
	return Table[operators.Windowed[K], A]{s: out, store: storeName}
}
