package dsl

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/serde"
	"github.com/causeway-stream/causeway/framework/store"
	"github.com/causeway-stream/causeway/operators"
)

// joinMode says which rows or records of a join come out without a
// partner.
type joinMode int

const (
	innerJoin joinMode = iota // only pairs
	leftJoin                  // pairs, and the left side alone
	outerJoin                 // pairs, and either side alone
)

// keeps reports whether a join in this mode has a result when the left
// and right sides are present as said.
func (j joinMode) keeps(left, right bool) bool {
	switch j {
	case leftJoin:
		return left
	case outerJoin:
		return left || right
	}
	return left && right
}

// JoinTables joins two tables on their key (Kafka Streams' KTable-KTable
// join): the result is a table with a row for every key both have. Each
// update of either side looks up the other side's current row; when the
// key no longer has a result but had one, a tombstone deletes it. Both
// tables are read by one processor, so their inputs must be
// co-partitioned. The result is not materialized: join it with a stream
// only after aggregating it.
func JoinTables[K, L, R, J any](l Table[K, L], r Table[K, R], joiner func(k K, l L, r R) (J, error)) Table[K, J] {
	return joinTables(l, r, innerJoin, func(k K, lv L, _ bool, rv R, _ bool) (J, error) { return joiner(k, lv, rv) })
}

// LeftJoinTables is JoinTables with a row for every key of the left table:
// joiner is called with found false and the zero row when the right table
// has none.
func LeftJoinTables[K, L, R, J any](l Table[K, L], r Table[K, R], joiner func(k K, l L, r R, found bool) (J, error)) Table[K, J] {
	return joinTables(l, r, leftJoin, func(k K, lv L, _ bool, rv R, rok bool) (J, error) { return joiner(k, lv, rv, rok) })
}

// OuterJoinTables is JoinTables with a row for every key of either table;
// lok and rok say which sides have one.
func OuterJoinTables[K, L, R, J any](l Table[K, L], r Table[K, R], joiner func(k K, l L, lok bool, r R, rok bool) (J, error)) Table[K, J] {
	return joinTables(l, r, outerJoin, joiner)
}

func joinTables[K, L, R, J any](l Table[K, L], r Table[K, R], mode joinMode, joiner func(K, L, bool, R, bool) (J, error)) Table[K, J] {
	b := l.s.b
	if l.store == "" || r.store == "" {
		b.fail("a table joined with another must be materialized in a store: join the tables it came from, or aggregate it first")
	}
	g := union(l.s.g, r.s.g)
	l.s.n.wantsPrior, r.s.n.wantsPrior = true, true
	n := newNode[K, J]()
	out := Stream[K, J]{b: b, g: g, n: n, codec: operators.Codec[K, J]{Key: l.s.codec.Key, Value: Default[J]()},
		origins: unionOrigins(l.s.origins, r.s.origins)}
	l.s.n.then(func(t *task) (push[K, L], error) {
		return tableSide(t, n, l.s, r.store, r.s.codec.Value, func(lok, rok bool) bool { return mode.keeps(lok, rok) },
			func(k K, lv L, lok bool, rv R, rok bool) (J, error) { return joiner(k, lv, lok, rv, rok) })
	})
	r.s.n.then(func(t *task) (push[K, R], error) {
		return tableSide(t, n, r.s, l.store, l.s.codec.Value, func(rok, lok bool) bool { return mode.keeps(lok, rok) },
			func(k K, rv R, rok bool, lv L, lok bool) (J, error) { return joiner(k, lv, lok, rv, rok) })
	})
	return Table[K, J]{s: out}
}

// tableSide is one side of a table-table join: on each change of this
// side, look up the other side's row and hand on the result, or a
// tombstone where a result existed and no longer does.
func tableSide[K, A, B, J any](t *task, n *node[K, J], this Stream[K, A], otherStore string, otherRows serde.Serde[B],
	keeps func(thisOK, otherOK bool) bool, joiner func(k K, a A, aok bool, b B, bok bool) (J, error)) (push[K, A], error) {
	kv, err := t.ctx.KeyValueStore(otherStore)
	if err != nil {
		return nil, err
	}
	next, err := n.open(t)
	if err != nil {
		return nil, err
	}
	var change meta
	return func(k K, a A, m *meta) error {
		kb, err := keyBytes(this, k, m)
		if err != nil {
			return err
		}
		b, bok, err := current(kv, otherRows, kb, otherStore)
		if err != nil {
			return err
		}
		aok := !m.tombstone
		now, before := keeps(aok, bok), keeps(m.prior, bok)
		change = *m
		change.prior, change.tombstone = before, !now
		var j J
		switch {
		case now:
			if j, err = joiner(k, a, aok, b, bok); err != nil {
				return err
			}
		case !before:
			return nil // no result before, none now
		}
		return next(k, j, &change)
	}, nil
}

// JoinWindows says which records of two streams join: a left record at
// time t joins the right records from t-Before to t+After (both
// included); a right record at t joins the left records from t-After to
// t+Before. Grace is how long after a record's window ends, in stream
// time, records that fall in it are still taken: a record whose own
// window has closed is dropped as late. Kafka Streams' JoinWindows.
type JoinWindows struct {
	Before, After, Grace time.Duration
}

// JoinWindowsOf is JoinWindows of d either way, Kafka Streams'
// JoinWindows.ofTimeDifferenceAndGrace.
func JoinWindowsOf(d, grace time.Duration) JoinWindows {
	return JoinWindows{Before: d, After: d, Grace: grace}
}

// JoinStreams joins two streams on their key within a time window (Kafka
// Streams' KStream-KStream join): every pair of records of one key no
// further apart than the windows allow gives one result, when the second
// of the two arrives, with the later of their timestamps. Both streams
// are kept for the length of the window in window stores named
// "<name>-left" and "<name>-right", and read by one processor, so they
// must be co-partitioned (a stream whose key may have changed is
// repartitioned first, "<name>-left-repartition" or
// "<name>-right-repartition"). A record with no value takes part in
// nothing and is reported as dropped ("no-value"), as Kafka Streams skips
// it.
func JoinStreams[K, L, R, J any](l Stream[K, L], r Stream[K, R], w JoinWindows, name string, joiner func(k K, l L, r R) (J, error)) Stream[K, J] {
	return joinStreams(l, r, w, name, innerJoin, func(k K, lv L, _ bool, rv R, _ bool) (J, error) { return joiner(k, lv, rv) })
}

// LeftJoinStreams is JoinStreams that also gives a result for every left
// record no right record joined: once its window has closed (stream time
// past t+After+Grace), joiner is called with found false and the zero
// right value. Like Kafka Streams since 3.1, it emits no such result
// while a partner may still come; the records waiting for one are kept
// in "<name>-left-unmatched".
func LeftJoinStreams[K, L, R, J any](l Stream[K, L], r Stream[K, R], w JoinWindows, name string, joiner func(k K, l L, r R, found bool) (J, error)) Stream[K, J] {
	return joinStreams(l, r, w, name, leftJoin, func(k K, lv L, _ bool, rv R, rok bool) (J, error) { return joiner(k, lv, rv, rok) })
}

// OuterJoinStreams is LeftJoinStreams that does the same for right
// records (stream time past t+Before+Grace, kept in
// "<name>-right-unmatched"); lok and rok say which sides a result has.
func OuterJoinStreams[K, L, R, J any](l Stream[K, L], r Stream[K, R], w JoinWindows, name string, joiner func(k K, l L, lok bool, r R, rok bool) (J, error)) Stream[K, J] {
	return joinStreams(l, r, w, name, outerJoin, joiner)
}

// joinSide is one side of a stream-stream join, as its records see it.
type joinSide struct {
	// store keeps this side's records; other, the other side's.
	store, other string
	// unmatched keeps this side's records no partner has joined yet, when
	// the join emits them alone ("" otherwise); otherUnmatched, the other
	// side's.
	unmatched, otherUnmatched string
	// behind and ahead: a record at t joins the other side's from
	// t-behind to t+ahead.
	behind, ahead time.Duration
}

func joinStreams[K, L, R, J any](l Stream[K, L], r Stream[K, R], w JoinWindows, name string, mode joinMode, joiner func(K, L, bool, R, bool) (J, error)) Stream[K, J] {
	b := l.b
	if w.Before < 0 || w.After < 0 || w.Grace < 0 || name == "" {
		b.fail("stream join %q: windows %+v must not be negative, and the join needs a name", name, w)
	}
	if l.rekeyed {
		l = repartition(l, name+"-left")
	}
	if r.rekeyed {
		r = repartition(r, name+"-right")
	}
	g := union(l.g, r.g)
	retention := w.Before + w.After + w.Grace
	left := joinSide{store: name + "-left", other: name + "-right", behind: w.Before, ahead: w.After}
	right := joinSide{store: name + "-right", other: name + "-left", behind: w.After, ahead: w.Before}
	stores := []string{left.store, right.store}
	if mode != innerJoin {
		left.unmatched, right.otherUnmatched = name+"-left-unmatched", name+"-left-unmatched"
		stores = append(stores, left.unmatched)
	}
	if mode == outerJoin {
		right.unmatched, left.otherUnmatched = name+"-right-unmatched", name+"-right-unmatched"
		stores = append(stores, right.unmatched)
	}
	for _, s := range stores {
		g.stores = append(g.stores, framework.WindowStore(s, retention))
	}
	n := newNode[K, J]()
	out := Stream[K, J]{b: b, g: g, n: n, codec: operators.Codec[K, J]{Key: l.codec.Key, Value: Default[J]()},
		origins: unionOrigins(l.origins, r.origins)}
	// Both sides of a task share what closes unmatched records: the
	// task keeps it under a key of this join's own.
	type shared struct {
		flush func(now time.Time, m *meta) error
	}
	key := new(shared)
	flusher := func(t *task, next push[K, J]) (*shared, error) {
		if f, ok := t.opened[key]; ok {
			return f.(*shared), nil
		}
		f, err := unmatchedFlusher(t, l.codec, r.codec, left, right, w, next, joiner)
		if err != nil {
			return nil, err
		}
		sh := &shared{flush: f}
		t.opened[key] = sh
		return sh, nil
	}
	// open gives a side of a task what comes after the join, and the
	// flusher both sides share.
	open := func(t *task) (push[K, J], *shared, error) {
		next, err := n.open(t)
		if err != nil {
			return nil, nil, err
		}
		f, err := flusher(t, next)
		return next, f, err
	}
	l.n.then(func(t *task) (push[K, L], error) {
		next, f, err := open(t)
		if err != nil {
			return nil, err
		}
		return streamSide(t, l, r.codec.Value, left, w.Grace, next, f.flush,
			func(k K, lv L, rv R, rok bool) (J, error) { return joiner(k, lv, true, rv, rok) })
	})
	r.n.then(func(t *task) (push[K, R], error) {
		next, f, err := open(t)
		if err != nil {
			return nil, err
		}
		return streamSide(t, r, l.codec.Value, right, w.Grace, next, f.flush,
			func(k K, rv R, lv L, lok bool) (J, error) { return joiner(k, lv, lok, rv, true) })
	})
	return out
}

// streamSide is the push of one side of a stream-stream join.
func streamSide[K, A, B, J any](t *task, this Stream[K, A], otherValues serde.Serde[B], side joinSide, grace time.Duration,
	next push[K, J], flush func(time.Time, *meta) error, joiner func(k K, a A, b B, bok bool) (J, error)) (push[K, A], error) {
	mine, err := t.ctx.WindowStore(side.store)
	if err != nil {
		return nil, err
	}
	theirs, err := t.ctx.WindowStore(side.other)
	if err != nil {
		return nil, err
	}
	var unmatched, theirUnmatched store.Window
	if side.unmatched != "" {
		if unmatched, err = t.ctx.WindowStore(side.unmatched); err != nil {
			return nil, err
		}
	}
	if side.otherUnmatched != "" {
		if theirUnmatched, err = t.ctx.WindowStore(side.otherUnmatched); err != nil {
			return nil, err
		}
	}
	var joined meta
	return func(k K, a A, m *meta) error {
		now, ts := t.ctx.StreamTime(), m.rec.Timestamp
		switch {
		case m.rec.Value == nil:
			t.ctx.Report(framework.DropEvent{Reason: "no-value", Record: m.rec, Detail: "a record with no value joins nothing"})
			return flush(now, m)
		case ts.Add(side.ahead + grace).Before(now):
			reportLate(t, m, now, "its join window")
			return flush(now, m)
		}
		kb, ab, err := keepRecord(mine, this, k, a, m)
		if err != nil {
			return err
		}
		// Read the partners first, then hand results on: what comes after
		// may write the stores.
		type partner struct {
			at time.Time
			b  B
		}
		var partners []partner
		for at, list := range theirs.Fetch(kb, ts.Add(-side.behind), ts.Add(side.ahead)) {
			if err := eachValue(list, func(v []byte) error {
				b, err := otherValues.Deserialize(v)
				if err != nil {
					return fmt.Errorf("stored value of %q in %s: %w", kb, side.other, err)
				}
				partners = append(partners, partner{at, b})
				return nil
			}); err != nil {
				return err
			}
		}
		for _, p := range partners {
			if theirUnmatched != nil {
				if err := theirUnmatched.Delete(kb, p.at); err != nil {
					return err
				}
			}
			j, err := joiner(k, a, p.b, true)
			if err != nil {
				return err
			}
			joined = *m
			joined.rec.Timestamp = maxTime(ts, p.at)
			if err := next(k, j, &joined); err != nil {
				return err
			}
		}
		if len(partners) == 0 && unmatched != nil {
			if err := appendValue(unmatched, kb, ts, ab); err != nil {
				return err
			}
		}
		return flush(now, m)
	}, nil
}

// unmatchedFlusher returns what a task of a stream-stream join runs after
// every record: hand on, alone, the unmatched records whose windows have
// closed since the last record, then drop what no record can join any
// more.
func unmatchedFlusher[K, L, R, J any](t *task, lc operators.Codec[K, L], rc operators.Codec[K, R], left, right joinSide, w JoinWindows,
	next push[K, J], joiner func(K, L, bool, R, bool) (J, error)) (func(time.Time, *meta) error, error) {
	var stores []store.Window
	for _, name := range []string{left.store, right.store, left.unmatched, right.unmatched} {
		if name == "" {
			stores = append(stores, nil)
			continue
		}
		ws, err := t.ctx.WindowStore(name)
		if err != nil {
			return nil, err
		}
		stores = append(stores, ws)
	}
	leftUnmatched, rightUnmatched := stores[2], stores[3]
	// A left record at t is closed once stream time passes t+After+Grace:
	// those before leftClosed were handed on in committed transactions.
	start := t.ctx.StreamTime()
	leftClosed, rightClosed := start.Add(-w.After-w.Grace), start.Add(-w.Before-w.Grace)
	var alone meta
	return func(now time.Time, m *meta) error {
		// handOn hands on a record alone, at its own time.
		handOn := func(k K, at time.Time, j J, err error) error {
			if err != nil {
				return err
			}
			alone = *m
			alone.rec.Timestamp = at
			return next(k, j, &alone)
		}
		if err := closeSide(leftUnmatched, lc, &leftClosed, now.Add(-w.After-w.Grace), func(k K, at time.Time, lv L) error {
			j, err := joiner(k, lv, true, *new(R), false)
			return handOn(k, at, j, err)
		}); err != nil {
			return err
		}
		if err := closeSide(rightUnmatched, rc, &rightClosed, now.Add(-w.Before-w.Grace), func(k K, at time.Time, rv R) error {
			j, err := joiner(k, *new(L), false, rv, true)
			return handOn(k, at, j, err)
		}); err != nil {
			return err
		}
		// A record on time from now on is at now-Before-Grace at the
		// earliest (left) and joins back to After before that.
		drop := now.Add(-w.Before - w.After - w.Grace)
		for _, ws := range stores {
			if ws == nil {
				continue
			}
			if err := ws.DropBefore(drop); err != nil {
				return err
			}
		}
		return nil
	}, nil
}

// closeSide hands alone, once, the unmatched records of one side (ws; nil
// when the join keeps none) whose windows closed since closed, up to
// closeAt, and moves closed on.
func closeSide[K, V any](ws store.Window, c operators.Codec[K, V], closed *time.Time, closeAt time.Time, alone func(K, time.Time, V) error) error {
	if ws == nil || !closeAt.After(*closed) {
		return nil
	}
	if err := closeUnmatched(ws, c, *closed, closeAt, alone); err != nil {
		return err
	}
	*closed = closeAt
	return nil
}

// closeUnmatched hands emit every record of ws at a time in [from, to),
// decoded, and deletes them.
func closeUnmatched[K, V any](ws store.Window, c operators.Codec[K, V], from, to time.Time, emit func(K, time.Time, V) error) error {
	type rec struct {
		kb []byte
		k  K
		at time.Time
		v  V
	}
	return readThenEmit(ws, from, to.Add(-time.Nanosecond), func(wk store.WindowKey, list []byte, add func(rec)) error {
		k, err := c.Key.Deserialize(wk.Key)
		if err != nil {
			return fmt.Errorf("stored key %q: %w", wk.Key, err)
		}
		kb := slices.Clone(wk.Key)
		return eachValue(list, func(b []byte) error {
			v, err := c.Value.Deserialize(b)
			if err != nil {
				return fmt.Errorf("stored value of %q: %w", wk.Key, err)
			}
			add(rec{kb, k, wk.Start, v})
			return nil
		})
	}, func(r rec) error {
		if err := ws.Delete(r.kb, r.at); err != nil {
			return err
		}
		return emit(r.k, r.at, r.v)
	})
}

// appendValue adds v to the values of key at time at: a join keeps every
// record, several of one key and time included, each as its length
// (uvarint) and its bytes.
func appendValue(ws store.Window, key []byte, at time.Time, v []byte) error {
	list, _, err := ws.Get(key, at)
	if err != nil {
		return err
	}
	out := make([]byte, 0, len(list)+binary.MaxVarintLen64+len(v))
	out = append(out, list...)
	out = binary.AppendUvarint(out, uint64(len(v)))
	return ws.Put(key, at, append(out, v...))
}

// errBadValueList is returned for a stored list of values that does not
// parse.
var errBadValueList = errors.New("stored list of join values does not parse")

// eachValue calls f with every value of a list appendValue wrote.
func eachValue(list []byte, f func([]byte) error) error {
	for len(list) > 0 {
		n, l := binary.Uvarint(list)
		if l <= 0 || uint64(len(list)-l) < n {
			return errBadValueList
		}
		if err := f(list[l : l+int(n)]); err != nil {
			return err
		}
		list = list[l+int(n):]
	}
	return nil
}
