package dsl

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/causeway-stream/causeway/framework/serde"
	"github.com/causeway-stream/causeway/framework/store"
	"github.com/causeway-stream/causeway/operators"
)

// SlidingWindows groups records by how far apart they are (Kafka Streams'
// SlidingWindows): every window is [start, start+Difference], both ends
// included, and there is one for each distinct set of a key's records no
// more than Difference apart. A record at t makes the window that ends at
// t, and, once a later record comes within Difference of it, the window
// that starts just after it (t plus a millisecond, the unit of Kafka
// timestamps), which holds the records after it; a record earlier than
// Difference makes the window [0, Difference], as no window starts before
// the epoch. A window closes once stream time passes its end plus Grace;
// a record goes into every open window that holds it, and is reported as
// dropped ("late") only when no open window takes it.
type SlidingWindows struct {
	Difference, Grace time.Duration
}

// slidingStep is how far after a record the window that leaves it out
// starts: a millisecond, the unit of Kafka timestamps.
const slidingStep = time.Millisecond

// Sliding is a grouped stream cut into sliding windows.
type Sliding[K, V any] struct {
	g     Grouped[K, V]
	w     SlidingWindows
	final bool
}

// EmitOnWindowClose makes the aggregation emit one final result per
// window, when it closes (stream time past its end plus grace), instead
// of an updated result after every record; it carries the timestamp of
// the window's latest record. A restarted task emits from where the
// step's committed stream time left off.
func (w Sliding[K, V]) EmitOnWindowClose() Sliding[K, V] {
	w.final = true
	return w
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
// the order they arrived, and emitted in Kafka Streams' order (see
// slidingOrder). The table's keys are
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
	plays(s, roleAggregate, "sliding-"+storeName)
	out := step(s, serde.Codec[operators.Windowed[K], A]{Key: operators.WindowedKey(s.codec.Key, d), Value: agg},
		func(t *task, next push[operators.Windowed[K], A]) (push[K, V], error) {
			buf, err := t.ctx.WindowStore(storeName)
			if err != nil {
				return nil, err
			}
			clock, err := openClock(buf)
			if err != nil {
				return nil, err
			}
			// Windows ending before closed were emitted (when final) in
			// transactions already committed.
			closed := clock.now.Add(-grace)
			var result meta
			// fold folds the records of byArrival (in the order they
			// arrived, as Kafka Streams adds each to the aggregates it
			// keeps) that fall in [start, start+d], and hands the window on,
			// stamped with its latest record's time; a window with no
			// record is no window.
			fold := func(k K, byArrival []slidingRecord[V], start time.Time, m *meta) error {
				var acc A
				var latest time.Time
				found := false
				for _, r := range byArrival {
					if r.at.Before(start) || r.at.After(start.Add(d)) {
						continue
					}
					var err error
					if acc, err = fn(k, r.v, acc, found); err != nil {
						return err
					}
					found, latest = true, maxTime(latest, r.at)
				}
				if !found {
					return nil
				}
				return next(operators.Windowed[K]{Key: k, Start: start, End: start.Add(d)}, acc, restamp(&result, m, latest))
			}
			return func(k K, v V, m *meta) error {
				if nullKey(t, s, m, "sliding aggregation "+storeName) {
					return nil
				}
				at := m.rec.Timestamp
				now, err := clock.observe(at)
				if err != nil {
					return err
				}
				close := now.Add(-grace)
				taken := false
				if !at.Add(d).Before(close) { // else every window that could hold it has closed
					emit := fold
					if w.final {
						emit = nil
					}
					if taken, err = slidingUpdate(buf, clock, s, storeName, d, close, k, v, m, emit); err != nil {
						return err
					}
				}
				if !taken {
					reportLate(t, m, now, "every window of "+at.Format(time.RFC3339Nano))
				}
				if w.final && close.After(closed) {
					if err := slidingClosed(buf, s.codec, storeName, d, closed, close, func(k K, recs []slidingRecord[V], start time.Time) error {
						return fold(k, recs, start, m)
					}); err != nil {
						return err
					}
					closed = close
				}
				// No window still open can hold a record older than this.
				return buf.DropBefore(close.Add(-d - slidingStep))
			}, nil
		})
	return Table[operators.Windowed[K], A]{s: out, store: storeName}
}

// slidingStart is where the window ending at a record at `at` starts:
// at-d, or 0 for a record earlier than d, since no window starts before
// the epoch (Kafka Streams puts every such record in the window [0, d]).
func slidingStart(at time.Time, d time.Duration) time.Time {
	return maxTime(at.Add(-d), epoch)
}

// slidingUpdate takes a record into every open window it changes, as
// Kafka Streams' sliding aggregation does, and hands each on with emit
// (nil: none, when the windows emit on close), given the key's records in
// the order they arrived: the windows that held
// records before and now hold this one too, then the windows it makes
// (the window just after the record before it, its own window, and the
// window just after it when later records fall in it). A window that
// already held a record at the same time is not new, so nothing is
// emitted that did not change. A record no open window takes is not kept,
// as it leaves no trace in Kafka Streams' windows either; it reports
// whether the record was taken.
func slidingUpdate[K, V any](buf store.Window, clock *stepClock, s Stream[K, V], storeName string, d time.Duration, close time.Time, k K, v V, m *meta,
	emit func(K, []slidingRecord[V], time.Time, *meta) error) (bool, error) {
	at := m.rec.Timestamp
	kb, err := keyBytes(s, k, m)
	if err != nil {
		return false, err
	}
	// Every record of the key that a window holding the new one can hold,
	// or that starts such a window just after it; then the new one, after
	// those at its time.
	recs, err := slidingRecords(buf, s.codec.Value, storeName, kb, at.Add(-d-slidingStep), at.Add(d+slidingStep))
	if err != nil {
		return false, err
	}
	i, _ := slices.BinarySearchFunc(recs, at, func(r slidingRecord[V], t time.Time) int {
		if r.at.After(t) {
			return 1
		}
		return -1
	})
	recs = slices.Insert(recs, i, slidingRecord[V]{at: at, seq: clock.seq + 1, v: v})
	open := slices.DeleteFunc(slidingOrder(recs, at, d), func(start time.Time) bool { return start.Add(d).Before(close) })
	if len(open) == 0 {
		return false, nil
	}
	if _, err := keepSliding(buf, clock, s, k, v, m); err != nil {
		return true, err
	}
	if emit == nil {
		return true, nil
	}
	byArrival := inArrivalOrder(recs)
	for _, start := range open {
		if err := emit(k, byArrival, start, m); err != nil {
			return true, err
		}
	}
	return true, nil
}

// slidingOrder returns the starts of the windows a record at `at` changes,
// in the order Kafka Streams emits them, given the key's records around
// it (recs, in time order, the new one among them). Kafka Streams walks
// the windows it has from the latest start back, updating those that hold
// the record, then makes the new ones; a record earlier than d (whose
// windows would start before the epoch) goes to the window [0, d], which
// comes last.
func slidingOrder[V any](recs []slidingRecord[V], at time.Time, d time.Duration) []time.Time {
	c := newSlidingChange(recs, at, d)
	out := c.updated()
	for _, start := range c.made() {
		if !slices.ContainsFunc(out, start.Equal) {
			out = append(out, start)
		}
	}
	return out
}

// slidingChange is what slidingOrder knows of the key's windows around a
// new record at `at`.
type slidingChange[V any] struct {
	recs  []slidingRecord[V]
	at    time.Time
	d     time.Duration
	own   time.Time // the start of the window ending at the new record
	early bool      // the record is earlier than d: its window is [0, d]
	// before is the times of the key's records but the new one, in order.
	before []time.Time
	// candidates are the starts of the windows that may hold the record.
	candidates []time.Time
	// twins counts the records at the new one's time, itself included.
	twins int
	// prev is the latest record before the new one, if any.
	prev *time.Time
}

func newSlidingChange[V any](recs []slidingRecord[V], at time.Time, d time.Duration) *slidingChange[V] {
	c := &slidingChange[V]{recs: recs, at: at, d: d, own: slidingStart(at, d), early: at.Add(-d).Before(epoch)}
	skipped := false // the new record, once, among recs
	for _, r := range recs {
		if r.at.Equal(at) && !skipped {
			skipped = true
			continue
		}
		c.before = append(c.before, r.at)
	}
	c.candidates = []time.Time{c.own}
	for i, r := range recs {
		switch {
		case r.at.Equal(at):
			c.twins++
		case r.at.After(at) && !r.at.After(at.Add(d)):
			c.candidates = append(c.candidates, slidingStart(r.at, d)) // the window ending at r
		case r.at.Before(at):
			c.candidates = append(c.candidates, r.at.Add(slidingStep)) // the window just after r
			c.prev = &recs[i].at
		}
	}
	return c
}

// holds reports whether the window starting at start holds time t.
func (c *slidingChange[V]) holds(start, t time.Time) bool {
	return !t.Before(start) && !t.After(start.Add(c.d))
}

// existed reports whether the window starting at start was there before
// the new record: the window ending at an earlier record, or the one just
// after an earlier record that a later one fell in.
func (c *slidingChange[V]) existed(start time.Time) bool {
	for i, r := range c.before {
		if slidingStart(r, c.d).Equal(start) {
			return true
		}
		if r.Add(slidingStep).Equal(start) {
			// before is in time order: the first record at or after
			// start decides whether any falls in the window.
			for _, q := range c.before[i+1:] {
				if !q.Before(start) {
					return !q.After(start.Add(c.d))
				}
			}
		}
	}
	return false
}

// updated returns the windows that existed and now take the record in, in
// the order Kafka Streams updates them.
func (c *slidingChange[V]) updated() []time.Time {
	var updated []time.Time
	for _, start := range sortedStarts(c.candidates) {
		if c.existed(start) && !(c.early && start.Equal(c.own)) {
			updated = append(updated, start)
		}
	}
	if !c.early {
		slices.Reverse(updated)
	}
	return updated
}

// made returns the windows the record makes, in the order Kafka Streams
// makes them.
func (c *slidingChange[V]) made() []time.Time {
	var made []time.Time
	if c.early {
		made = c.ownRight(made)
		made = c.prevRight(made)
		return append(made, c.own) // made or updated
	}
	made = c.prevRight(made)
	if !c.existed(c.own) {
		made = append(made, c.own)
	}
	return c.ownRight(made)
}

// prevRight appends the window just after the previous record, when it
// holds the new record and did not exist.
func (c *slidingChange[V]) prevRight(made []time.Time) []time.Time {
	if c.prev != nil && c.holds(c.prev.Add(slidingStep), c.at) && !c.existed(c.prev.Add(slidingStep)) {
		made = append(made, c.prev.Add(slidingStep))
	}
	return made
}

// ownRight appends the window just after the new record, when a later
// record falls in it and neither a record at the same time nor a later
// record (as the window ending at it) made it already: an out-of-order
// record does not hold that window, which is there unchanged.
func (c *slidingChange[V]) ownRight(made []time.Time) []time.Time {
	if c.twins > 1 {
		return made // a record at the same time made it
	}
	start := c.at.Add(slidingStep)
	if c.existed(start) {
		return made
	}
	for _, r := range c.recs {
		if r.at.After(c.at) && c.holds(start, r.at) {
			return append(made, start)
		}
	}
	return made
}

// slidingRecord is one record a sliding aggregation keeps: its time, its
// number in order of arrival, and its value.
type slidingRecord[V any] struct {
	at  time.Time
	seq uint64
	v   V
}

// keepSliding adds the record to buf under its key and its time, with its
// number in order of arrival, and returns its serialized key.
func keepSliding[K, V any](buf store.Window, clock *stepClock, s Stream[K, V], k K, v V, m *meta) ([]byte, error) {
	kb, vb, err := keyAndValueBytes(s, k, v, m)
	if err != nil {
		return nil, err
	}
	seq, err := clock.next()
	if err != nil {
		return nil, err
	}
	entry := binary.AppendUvarint(make([]byte, 0, binary.MaxVarintLen64+len(vb)), seq)
	return kb, appendValue(buf, kb, m.rec.Timestamp, append(entry, vb...))
}

// decodeSliding reads one kept record's number and value.
func decodeSliding[V any](values serde.Serde[V], at time.Time, b []byte) (slidingRecord[V], error) {
	seq, n := binary.Uvarint(b)
	if n <= 0 {
		return slidingRecord[V]{}, errBadValueList
	}
	v, err := values.Deserialize(b[n:])
	return slidingRecord[V]{at: at, seq: seq, v: v}, err
}

// inArrivalOrder returns recs sorted by their order of arrival.
func inArrivalOrder[V any](recs []slidingRecord[V]) []slidingRecord[V] {
	out := slices.Clone(recs)
	slices.SortFunc(out, func(a, b slidingRecord[V]) int { return cmp.Compare(a.seq, b.seq) })
	return out
}

// slidingRecords reads the records of key kept in buf from from to to, in
// order of time.
func slidingRecords[V any](buf store.Window, values serde.Serde[V], storeName string, kb []byte, from, to time.Time) ([]slidingRecord[V], error) {
	var recs []slidingRecord[V]
	for ts, list := range buf.Fetch(kb, from, to) {
		if err := eachValue(list, func(b []byte) error {
			r, err := decodeSliding(values, ts, b)
			if err != nil {
				return fmt.Errorf("stored value of %q in %s: %w", kb, storeName, err)
			}
			recs = append(recs, r)
			return nil
		}); err != nil {
			return nil, err
		}
	}
	return recs, nil
}

// sortedStarts sorts window starts and drops the repeated ones.
func sortedStarts(starts []time.Time) []time.Time {
	slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
	return slices.CompactFunc(starts, func(a, b time.Time) bool { return a.Equal(b) })
}

// slidingClosed hands fold every window of every key that ends in
// [from, to): the window ending at each record, and the one starting just
// after each record, with the key's records in the order they arrived.
// The keys and their records are read first, since what fold hands on may
// write the store.
func slidingClosed[K, V any](buf store.Window, c serde.Codec[K, V], storeName string, d time.Duration, from, to time.Time,
	fold func(K, []slidingRecord[V], time.Time) error) error {
	type keyed struct {
		k    K
		recs []slidingRecord[V]
	}
	var order []string
	byKey := map[string]*keyed{}
	for wk, list := range buf.FetchAll(from.Add(-d-slidingStep), to.Add(-time.Nanosecond)) {
		x, ok := byKey[string(wk.Key)]
		if !ok {
			k, err := c.Key.Deserialize(wk.Key)
			if err != nil {
				return fmt.Errorf("stored key %q in %s: %w", wk.Key, storeName, err)
			}
			x = &keyed{k: k}
			byKey[string(wk.Key)] = x
			order = append(order, string(wk.Key))
		}
		if err := eachValue(list, func(b []byte) error {
			r, err := decodeSliding(c.Value, wk.Start, b)
			if err != nil {
				return fmt.Errorf("stored value of %q in %s: %w", wk.Key, storeName, err)
			}
			x.recs = append(x.recs, r)
			return nil
		}); err != nil {
			return err
		}
	}
	for _, kb := range order {
		x := byKey[kb]
		slices.SortStableFunc(x.recs, func(a, b slidingRecord[V]) int { return a.at.Compare(b.at) })
		var starts []time.Time
		for _, r := range x.recs {
			// The window ending at r (at d for a record before d), and the
			// one just after r.
			for _, start := range []time.Time{slidingStart(r.at, d), r.at.Add(slidingStep)} {
				if end := start.Add(d); !end.Before(from) && end.Before(to) {
					starts = append(starts, start)
				}
			}
		}
		byArrival := inArrivalOrder(x.recs)
		for _, start := range sortedStarts(starts) {
			if err := fold(x.k, byArrival, start); err != nil {
				return err
			}
		}
	}
	return nil
}
