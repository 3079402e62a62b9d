package dsl

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/serde"
	"github.com/causeway-stream/causeway/framework/store"
	"github.com/causeway-stream/causeway/operators"
)

// Windowed is a grouped stream cut into time windows (Kafka Streams'
// TimeWindowedKStream): tumbling when the windows' Advance equals their
// Size, hopping when it is smaller. A record belongs to every window whose
// [start, start+Size) holds its timestamp. A window closes once stream
// time (the step's own: the largest timestamp of the records that reached
// it) reaches its end plus the grace period; a record all of whose
// windows are closed is reported as dropped ("late"). An update carries
// the timestamp of the window's latest record.
type Windowed[K, V any] struct {
	g     Grouped[K, V]
	w     operators.Windows
	final bool
}

// WindowedBy cuts a grouped stream into time windows (a function, not a
// method of Grouped: a method would make Go instantiate windows of
// windows of windows without end).
func WindowedBy[K, V any](g Grouped[K, V], w operators.Windows) Windowed[K, V] {
	if w.Size <= 0 || w.Advance <= 0 || w.Advance > w.Size || w.Grace < 0 {
		g.s.b.fail("windows %+v: size and advance must be positive, advance at most size, grace not negative", w)
	}
	return Windowed[K, V]{g: g, w: w}
}

// EmitOnWindowClose makes the aggregation emit one final result per
// window, when the window closes (stream time reaches its end plus grace),
// instead of an updated result after every record: Kafka Streams'
// EmitStrategy.onWindowClose, or suppress(untilWindowCloses). The result
// carries the timestamp of the window's latest record, as an update
// would, and the headers of the record whose arrival closed the window. A
// restarted task emits no window twice and misses none: what it emitted
// is what the step's committed stream time had closed.
func (w Windowed[K, V]) EmitOnWindowClose() Windowed[K, V] {
	w.final = true
	return w
}

// Count counts the records of each key and window, in the named window
// store.
func (w Windowed[K, V]) Count(storeName string, opts ...StoreOpt) Table[operators.Windowed[K], int64] {
	return WindowedAggregate(w, storeName, func() int64 { return 0 },
		func(_ K, _ V, n int64) (int64, error) { return n + 1, nil }, serde.Int64(), opts...)
}

// Reduce combines the values of each key and window with fn.
func (w Windowed[K, V]) Reduce(storeName string, fn func(acc, v V) (V, error), opts ...StoreOpt) Table[operators.Windowed[K], V] {
	return windowFold(w, storeName, w.g.s.codec.Value, reducer[K](fn), opts)
}

// WindowedAggregate folds the records of each key and window into an
// aggregate, starting from init(), in the named window store. agg
// serializes the aggregate; nil takes Default[A](). The table's keys are
// operators.Windowed, written in the layout of Kafka Streams'
// TimeWindowedSerializer (operators.WindowedKey).
func WindowedAggregate[K, V, A any](w Windowed[K, V], storeName string, init func() A, fn func(K, V, A) (A, error), agg serde.Serde[A], opts ...StoreOpt) Table[operators.Windowed[K], A] {
	if agg == nil {
		agg = Default[A]()
	}
	return windowFold(w, storeName, agg, aggregator(init, fn), opts)
}

func windowFold[K, V, A any](w Windowed[K, V], storeName string, agg serde.Serde[A], fn func(k K, v V, acc A, found bool) (A, error), opts []StoreOpt) Table[operators.Windowed[K], A] {
	s := w.g.prepare(storeName)
	declareWindow(s, storeName, w.w.Size+w.w.Grace, append(opts, timestamped))
	plays(s, roleAggregate, "window-"+storeName)
	size, grace := w.w.Size, w.w.Grace
	keyOut := operators.WindowedKey(s.codec.Key, size)
	out := step(s, serde.Codec[operators.Windowed[K], A]{Key: keyOut, Value: agg}, func(t *task, next push[operators.Windowed[K], A]) (push[K, V], error) {
		ws, err := t.ctx.WindowStore(storeName)
		if err != nil {
			return nil, err
		}
		clock, err := openClock(ws)
		if err != nil {
			return nil, err
		}
		windows := windowAggregates[A]{ws: ws, agg: agg, name: storeName}
		// Windows ending at or before closed were emitted (when final) in
		// transactions already committed.
		closed := clock.now.Add(-grace)
		var result meta
		return func(k K, v V, m *meta) error {
			if nullKey(t, s, m, "windowed aggregation "+storeName) {
				return nil
			}
			kb, err := keyBytes(s, k, m)
			if err != nil {
				return err
			}
			ts := m.rec.Timestamp
			now, err := clock.observe(ts)
			if err != nil {
				return err
			}
			accepted := false
			for _, start := range w.w.Starts(ts) {
				end := start.Add(size)
				if !end.Add(grace).After(now) {
					continue // closed
				}
				accepted = true
				acc, latest, found, err := windows.get(kb, start)
				if err != nil {
					return err
				}
				if acc, err = fn(k, v, acc, found); err != nil {
					return err
				}
				// A window's result carries the timestamp of its latest
				// record, as Kafka Streams' timestamped window store does.
				if !found || ts.After(latest) {
					latest = ts
				}
				if err := windows.put(kb, start, latest, acc); err != nil {
					return err
				}
				if !w.final {
					if err := next(operators.Windowed[K]{Key: k, Start: start, End: end}, acc, restamp(&result, m, latest)); err != nil {
						return err
					}
				}
			}
			if !accepted {
				reportLate(t, m, now, "every window of "+ts.Format(time.RFC3339Nano))
			}
			if w.final {
				// Windows that closed since the last record: those ending in
				// (closed, now-grace].
				close := now.Add(-grace)
				if close.After(closed) {
					from, to := closed.Add(-size).Add(time.Nanosecond), close.Add(-size)
					if err := windowsStartingIn(windows, s.codec.Key, from, to, func(k K, start, latest time.Time, a A) error {
						return next(operators.Windowed[K]{Key: k, Start: start, End: start.Add(size)}, a, restamp(&result, m, latest))
					}); err != nil {
						return err
					}
					closed = close
				}
			}
			return ws.DropBefore(now.Add(-size - grace))
		}, nil
	})
	return Table[operators.Windowed[K], A]{s: out, store: storeName}
}

// windowAggregates reads and writes the aggregates of time windows in a
// window store: each value is the timestamp of the window's latest record
// (8 big-endian bytes of Unix nanoseconds), then the aggregate.
type windowAggregates[A any] struct {
	ws   store.Window
	agg  serde.Serde[A]
	name string
}

// errBadWindowValue is returned for a stored window too short for its
// timestamp.
var errBadWindowValue = errors.New("stored window shorter than its timestamp")

func (w windowAggregates[A]) decode(key, b []byte) (A, time.Time, error) {
	var a A
	if len(b) < 8 {
		return a, time.Time{}, fmt.Errorf("window of %q in %s: %w", key, w.name, errBadWindowValue)
	}
	latest := time.Unix(0, int64(binary.BigEndian.Uint64(b))).UTC()
	a, err := w.agg.Deserialize(b[8:])
	if err != nil {
		return a, latest, fmt.Errorf("stored aggregate of %q in %s: %w", key, w.name, err)
	}
	return a, latest, nil
}

// get returns the aggregate of key's window at start, and the timestamp
// of its latest record.
func (w windowAggregates[A]) get(key []byte, start time.Time) (A, time.Time, bool, error) {
	b, ok, err := w.ws.Get(key, start)
	if err != nil || !ok {
		var a A
		return a, time.Time{}, false, err
	}
	a, latest, err := w.decode(key, b)
	return a, latest, err == nil, err
}

func (w windowAggregates[A]) put(key []byte, start, latest time.Time, a A) error {
	b, err := w.agg.Serialize(a)
	if err != nil {
		return fmt.Errorf("serialize aggregate: %w", err)
	}
	v := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(b)), uint64(latest.UnixNano()))
	return w.ws.Put(key, start, append(v, b...))
}

// windowsStartingIn hands emit every window of every key of w starting
// in [from, to], decoded, with the timestamp of its latest record. The
// windows are read first and handed on after, since what emit does may
// write the store.
func windowsStartingIn[K, A any](w windowAggregates[A], keys serde.Serde[K], from, to time.Time, emit func(k K, start, latest time.Time, a A) error) error {
	type window struct {
		key           K
		start, latest time.Time
		acc           A
	}
	return readThenEmit(w.ws, from, to, func(wk store.WindowKey, b []byte, add func(window)) error {
		k, err := keys.Deserialize(wk.Key)
		if err != nil {
			return fmt.Errorf("stored key %q in %s: %w", wk.Key, w.name, err)
		}
		a, latest, err := w.decode(wk.Key, b)
		if err != nil {
			return err
		}
		add(window{k, wk.Start, latest, a})
		return nil
	}, func(x window) error { return emit(x.key, x.start, x.latest, x.acc) })
}

// readThenEmit decodes what ws holds for windows starting in [from, to],
// every key, then hands each decoded item to emit: all is read first,
// since what emit does may write the store.
func readThenEmit[T any](ws store.Window, from, to time.Time, decode func(wk store.WindowKey, v []byte, add func(T)) error, emit func(T) error) error {
	var found []T
	add := func(x T) { found = append(found, x) }
	for wk, v := range ws.FetchAll(from, to) {
		if err := decode(wk, v, add); err != nil {
			return err
		}
	}
	for _, x := range found {
		if err := emit(x); err != nil {
			return err
		}
	}
	return nil
}

// timestamped marks a window store whose values lead with the time of
// the window's latest record (see windowAggregates).
func timestamped(s *framework.StoreSpec) { s.Timestamped = true }

// sessions marks a window store of sessions (framework.StoreSpec.Sessions).
func sessions(s *framework.StoreSpec) { s.Sessions = true }

// declareWindow adds a window store to the group of s.
func declareWindow[K, V any](s Stream[K, V], name string, retention time.Duration, opts []StoreOpt) {
	spec := framework.WindowStore(name, retention)
	for _, o := range opts {
		o(&spec)
	}
	g := s.g.root()
	g.stores = append(g.stores, spec)
}

// SessionWindows groups each key's records into sessions: runs of records
// no more than Gap apart (Kafka Streams' SessionWindows). A record within
// Gap of one or more sessions merges them into one. A session closes once
// stream time passes its end plus Grace plus Gap (KAFKA-12718: until then
// a record on time could still join it); a record that would only make
// or extend a closed session is reported as dropped ("late"). A session's
// result, and the tombstone of one merged away, carries the session's
// end.
type SessionWindows struct {
	Gap, Grace time.Duration
}

// Sessioned is a grouped stream cut into sessions (Kafka Streams'
// SessionWindowedKStream).
type Sessioned[K, V any] struct {
	g     Grouped[K, V]
	w     SessionWindows
	final bool
}

// SessionWindowedBy cuts a grouped stream into sessions.
func SessionWindowedBy[K, V any](g Grouped[K, V], w SessionWindows) Sessioned[K, V] {
	if w.Gap <= 0 || w.Grace < 0 {
		g.s.b.fail("session windows %+v: the gap must be positive, grace not negative", w)
	}
	return Sessioned[K, V]{g: g, w: w}
}

// EmitOnWindowClose makes the aggregation emit one result per session
// when it is final, instead of an update (and a tombstone for every
// session a record merged away) after every record. A session is final
// once no record still on time can join it: when stream time passes its
// end plus grace plus the gap, as in Kafka Streams' onWindowClose for
// session windows.
func (w Sessioned[K, V]) EmitOnWindowClose() Sessioned[K, V] {
	w.final = true
	return w
}

// Count counts the records of each session, in the named store.
func (w Sessioned[K, V]) Count(storeName string, opts ...StoreOpt) Table[operators.Windowed[K], int64] {
	return SessionAggregate(w, storeName, func() int64 { return 0 },
		func(_ K, _ V, n int64) (int64, error) { return n + 1, nil },
		func(_ K, a, b int64) (int64, error) { return a + b, nil }, serde.Int64(), opts...)
}

// SessionAggregate folds the records of each session into an aggregate,
// in the named store: init() starts a session's aggregate, fn folds a
// record in, and merge combines the aggregates of sessions a record joins
// together. agg serializes the aggregate; nil takes Default[A](). The
// table's keys are written in the layout of Kafka Streams'
// SessionWindowedSerializer (operators.SessionWindowedKey); when sessions
// merge, each one merged away gets a tombstone before the merged session
// is emitted, as in Kafka Streams.
func SessionAggregate[K, V, A any](w Sessioned[K, V], storeName string, init func() A, fn func(K, V, A) (A, error),
	merge func(k K, a, b A) (A, error), agg serde.Serde[A], opts ...StoreOpt) Table[operators.Windowed[K], A] {
	if agg == nil {
		agg = Default[A]()
	}
	s := w.g.prepare(storeName)
	gap, grace := w.w.Gap, w.w.Grace
	// A session can still be merged until stream time passes its end plus
	// grace plus twice the gap (a record on time, at most grace plus a gap
	// behind, joins sessions ending a gap before it).
	declareWindow(s, storeName, 2*gap+grace, append(opts, sessions))
	plays(s, roleAggregate, "sessions-"+storeName)
	keyOut := operators.SessionWindowedKey(s.codec.Key)
	out := step(s, serde.Codec[operators.Windowed[K], A]{Key: keyOut, Value: agg}, func(t *task, next push[operators.Windowed[K], A]) (push[K, V], error) {
		// Sessions are kept in a window store under their end; the value is
		// the start (8 big-endian bytes of Unix nanoseconds), then the
		// aggregate.
		ws, err := t.ctx.WindowStore(storeName)
		if err != nil {
			return nil, err
		}
		clock, err := openClock(ws)
		if err != nil {
			return nil, err
		}
		// A session is late, and final, once it ends before stream time
		// minus grace minus the gap (KAFKA-12718): until then a record on
		// time can still join it. Sessions ending before closed were
		// emitted (when final) in transactions already committed.
		closed := clock.now.Add(-grace - gap)
		sessions := sessionStore[A]{ws: ws, agg: agg, name: storeName}
		var result, del meta
		return func(k K, v V, m *meta) error {
			if nullKey(t, s, m, "session aggregation "+storeName) {
				return nil
			}
			kb, err := keyBytes(s, k, m)
			if err != nil {
				return err
			}
			ts := m.rec.Timestamp
			now, err := clock.observe(ts)
			if err != nil {
				return err
			}
			close := now.Add(-grace - gap)
			start, end := ts, ts
			acc := init()
			var merged []operators.Windowed[K]
			err = sessions.near(kb, ts, gap, func(sStart, sEnd time.Time, a A) error {
				if acc, err = merge(k, acc, a); err != nil {
					return err
				}
				merged = append(merged, operators.Windowed[K]{Key: k, Start: sStart, End: sEnd})
				start, end = minTime(start, sStart), maxTime(end, sEnd)
				return nil
			})
			if err != nil {
				return err
			}
			if end.Before(close) {
				reportLate(t, m, now, "its session")
			} else {
				if acc, err = fn(k, v, acc); err != nil {
					return err
				}
				for _, old := range merged {
					if err := ws.Delete(kb, old.End); err != nil {
						return err
					}
					if !w.final {
						// A merged-away session's tombstone carries its end.
						var zero A
						restamp(&del, m, old.End).tombstone = true
						if err := next(old, zero, &del); err != nil {
							return err
						}
					}
				}
				if err := sessions.put(kb, start, end, acc); err != nil {
					return err
				}
				if !w.final {
					// A session's result carries its end, as in Kafka Streams.
					if err := next(operators.Windowed[K]{Key: k, Start: start, End: end}, acc, restamp(&result, m, end)); err != nil {
						return err
					}
				}
			}
			if w.final && close.After(closed) {
				// Sessions that became final since the last record: those
				// ending in [closed, close).
				if err := sessionsEndingIn(sessions, closed, close.Add(-time.Nanosecond), s.codec.Key, func(k K, sStart, sEnd time.Time, a A) error {
					return next(operators.Windowed[K]{Key: k, Start: sStart, End: sEnd}, a, restamp(&result, m, sEnd))
				}); err != nil {
					return err
				}
				closed = close
			}
			// A record on time (at close or later) joins sessions that end
			// a gap before it at the earliest.
			return ws.DropBefore(close.Add(-gap))
		}, nil
	})
	return Table[operators.Windowed[K], A]{s: out, store: storeName}
}

// sessionStore reads and writes sessions in a window store, under their
// end.
type sessionStore[A any] struct {
	ws   store.Window
	agg  serde.Serde[A]
	name string
}

// errBadSession is returned for a stored session too short for its start.
var errBadSession = errors.New("stored session shorter than its start")

func (s sessionStore[A]) decode(key, b []byte) (time.Time, A, error) {
	var a A
	if len(b) < 8 {
		return time.Time{}, a, fmt.Errorf("session of %q in %s: %w", key, s.name, errBadSession)
	}
	start := time.Unix(0, int64(binary.BigEndian.Uint64(b))).UTC()
	a, err := s.agg.Deserialize(b[8:])
	if err != nil {
		return start, a, fmt.Errorf("stored aggregate of %q in %s: %w", key, s.name, err)
	}
	return start, a, nil
}

// near calls f with every session of key that a record at ts joins: those
// that end no more than gap before ts and start no more than gap after
// it.
func (s sessionStore[A]) near(key []byte, ts time.Time, gap time.Duration, f func(start, end time.Time, a A) error) error {
	type session struct {
		start, end time.Time
		a          A
	}
	var found []session
	for end, b := range s.ws.Fetch(key, ts.Add(-gap), time.Unix(0, math.MaxInt64-1)) {
		start, a, err := s.decode(key, b)
		if err != nil {
			return err
		}
		if start.After(ts.Add(gap)) {
			break // sessions of a key do not overlap: every later one starts later still
		}
		found = append(found, session{start, end, a})
	}
	for _, x := range found {
		if err := f(x.start, x.end, x.a); err != nil {
			return err
		}
	}
	return nil
}

func (s sessionStore[A]) put(key []byte, start, end time.Time, a A) error {
	b, err := s.agg.Serialize(a)
	if err != nil {
		return fmt.Errorf("serialize aggregate: %w", err)
	}
	v := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(b)), uint64(start.UnixNano()))
	return s.ws.Put(key, end, append(v, b...))
}

// sessionsEndingIn calls emit with every session of every key ending in
// [from, to]. The sessions are read first and handed on after, since what
// emit does may write the store.
func sessionsEndingIn[K, A any](s sessionStore[A], from, to time.Time, keys serde.Serde[K], emit func(K, time.Time, time.Time, A) error) error {
	type session struct {
		key        K
		start, end time.Time
		a          A
	}
	return readThenEmit(s.ws, from, to, func(wk store.WindowKey, b []byte, add func(session)) error {
		k, err := keys.Deserialize(wk.Key)
		if err != nil {
			return fmt.Errorf("stored key %q in %s: %w", wk.Key, s.name, err)
		}
		start, a, err := s.decode(wk.Key, b)
		if err != nil {
			return err
		}
		add(session{k, start, wk.Start, a})
		return nil
	}, func(x session) error { return emit(x.key, x.start, x.end, x.a) })
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// reportLate reports a record dropped because what it belongs to (what)
// closed before stream time now.
func reportLate(t *task, m *meta, now time.Time, what string) {
	t.ctx.Report(framework.DropEvent{Reason: "late", Record: m.rec, Detail: what + " closed at stream time " + now.Format(time.RFC3339Nano)})
}
