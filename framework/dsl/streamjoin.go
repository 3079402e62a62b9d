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
// "<name>-right-repartition"). The join's stream time is that of both
// sides' records; a record that arrives late still joins the other side's
// records kept within the join's retention (Before+After+Grace), and one
// that joins nothing and is older than that is reported as dropped
// ("late"). A record with no value takes part in nothing and is reported
// as dropped ("no-value"), as Kafka Streams skips it.
func JoinStreams[K, L, R, J any](l Stream[K, L], r Stream[K, R], w JoinWindows, name string, joiner func(k K, l L, r R) (J, error)) Stream[K, J] {
	return joinStreams(l, r, w, name, innerJoin, func(k K, lv L, _ bool, rv R, _ bool) (J, error) { return joiner(k, lv, rv) })
}

// LeftJoinStreams is JoinStreams that also gives a result for every left
// record no right record joined: once its window has closed (stream time
// past t+After+Grace), joiner is called with found false and the zero
// right value. Like Kafka Streams since 3.1, it emits no such result
// while a partner may still come; the records waiting for one are kept
// in "<name>-left-unmatched". A record at stream time first hands on the
// records alone whose windows it closed, then its own results; one whose
// window has already passed when it arrives comes out alone at once.
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
	plays(l, roleJoin, name)
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
	out := Stream[K, J]{b: b, g: g, n: n, codec: serde.Codec[K, J]{Key: l.codec.Key, Value: Default[J]()},
		origins: unionOrigins(l.origins, r.origins)}
	// Both sides of a task share the join's stream time and what closes
	// unmatched records: the task keeps them under a key of this join's
	// own.
	key := new(int)
	shared := func(t *task, next push[K, J]) (*joinState, error) {
		if st, ok := t.opened[key]; ok {
			return st.(*joinState), nil
		}
		st, err := openJoinState(t, left, right, w, unmatchedEmitter(l.codec, r.codec, next, joiner))
		if err != nil {
			return nil, err
		}
		t.opened[key] = st
		return st, nil
	}
	// open gives a side of a task what comes after the join, and the
	// state both sides share.
	open := func(t *task) (push[K, J], *joinState, error) {
		next, err := n.open(t)
		if err != nil {
			return nil, nil, err
		}
		st, err := shared(t, next)
		return next, st, err
	}
	l.n.then(func(t *task) (push[K, L], error) {
		next, st, err := open(t)
		if err != nil {
			return nil, err
		}
		return streamSide(t, l, r.codec.Value, st, st.left, next,
			func(k K, lv L, rv R, rok bool) (J, error) { return joiner(k, lv, true, rv, rok) })
	})
	r.n.then(func(t *task) (push[K, R], error) {
		next, st, err := open(t)
		if err != nil {
			return nil, err
		}
		return streamSide(t, r, l.codec.Value, st, st.right, next,
			func(k K, rv R, lv L, lok bool) (J, error) { return joiner(k, lv, lok, rv, true) })
	})
	return out
}

// joinState is what both sides of a stream-stream join share in one task:
// the join's stream time (the largest timestamp of the records of either
// side, Kafka Streams' shared time tracker), and the stores.
type joinState struct {
	left, right *joinSideState
	// retention is how long a record can still join: Before+After+Grace.
	retention time.Duration
	w         JoinWindows
	// emit hands on, alone, an unmatched record whose window has closed.
	emit func(u unmatchedRecord, m *meta) error
}

// joinSideState is one side's stores and stream time in one task.
type joinSideState struct {
	joinSide
	// records keeps the side's records, and under its stream time the
	// largest timestamp of the records that reached the side.
	records *stepClock
	// unmatched keeps the side's records no partner has joined yet, when
	// the join emits them alone; nil otherwise.
	unmatched store.Window
	// lookBack is how long after its time a record of this side can
	// still be joined: After for the left side, Before for the right.
	lookBack time.Duration
	isLeft   bool
	// emittedTo is where the last look for closed unmatched records
	// stopped: nothing before it is left, since a record is put in the
	// unmatched store only while its window is open. It starts at the
	// epoch in every task instance.
	emittedTo time.Time
}

func openJoinState(t *task, left, right joinSide, w JoinWindows, emit func(unmatchedRecord, *meta) error) (*joinState, error) {
	st := &joinState{retention: w.Before + w.After + w.Grace, w: w, emit: emit}
	for _, x := range []struct {
		side     joinSide
		to       **joinSideState
		lookBack time.Duration
	}{{left, &st.left, w.After}, {right, &st.right, w.Before}} {
		ws, err := t.ctx.WindowStore(x.side.store)
		if err != nil {
			return nil, err
		}
		clock, err := openClock(ws)
		if err != nil {
			return nil, err
		}
		ss := &joinSideState{joinSide: x.side, records: clock, lookBack: x.lookBack, isLeft: x.to == &st.left, emittedTo: epoch}
		if x.side.unmatched != "" {
			if ss.unmatched, err = t.ctx.WindowStore(x.side.unmatched); err != nil {
				return nil, err
			}
		}
		*x.to = ss
	}
	return st, nil
}

// now is the join's stream time.
func (st *joinState) now() time.Time { return maxTime(st.left.records.now, st.right.records.now) }

// other is the side across from s.
func (st *joinState) other(s *joinSideState) *joinSideState {
	if s == st.left {
		return st.right
	}
	return st.left
}

// unmatchedRecord is a record kept until its window closes unjoined.
type unmatchedRecord struct {
	left bool
	kb   []byte
	at   time.Time
	v    []byte
}

// emitClosed hands on, alone, every unmatched record of either side whose
// window has closed by stream time now, and forgets it. As in Kafka
// Streams, they come in order of time, a right record before a left one
// at the same time, then in order of key.
func (st *joinState) emitClosed(now time.Time, m *meta) error {
	var closed []unmatchedRecord
	for _, s := range []*joinSideState{st.right, st.left} {
		if s.unmatched == nil {
			continue
		}
		// A record is closed once stream time is past its time plus the
		// look-back plus grace.
		to := now.Add(-s.lookBack - st.w.Grace - time.Nanosecond)
		if to.Before(s.emittedTo) {
			continue
		}
		for wk, list := range s.unmatched.FetchAll(s.emittedTo, to) {
			kb := slices.Clone(wk.Key)
			if err := eachValue(list, func(v []byte) error {
				closed = append(closed, unmatchedRecord{left: s.isLeft, kb: kb, at: wk.Start, v: slices.Clone(v)})
				return nil
			}); err != nil {
				return fmt.Errorf("%s: %w", s.joinSide.unmatched, err)
			}
		}
	}
	for _, s := range []*joinSideState{st.right, st.left} {
		s.emittedTo = maxTime(s.emittedTo, now.Add(-s.lookBack-st.w.Grace))
	}
	if len(closed) == 0 {
		return nil
	}
	slices.SortStableFunc(closed, func(a, b unmatchedRecord) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		if a.left != b.left {
			if a.left {
				return 1
			}
			return -1
		}
		return bytes.Compare(a.kb, b.kb)
	})
	for _, u := range closed {
		s := st.right
		if u.left {
			s = st.left
		}
		if err := s.unmatched.Delete(u.kb, u.at); err != nil {
			return err
		}
	}
	for _, u := range closed {
		if err := st.emit(u, m); err != nil {
			return err
		}
	}
	return nil
}

// unmatchedEmitter returns what hands on an unmatched record alone, at its
// own time, joined with the zero value of the other side.
func unmatchedEmitter[K, L, R, J any](lc serde.Codec[K, L], rc serde.Codec[K, R], next push[K, J],
	joiner func(K, L, bool, R, bool) (J, error)) func(unmatchedRecord, *meta) error {
	var alone meta
	return func(u unmatchedRecord, m *meta) error {
		k, err := lc.Key.Deserialize(u.kb)
		if err != nil {
			return fmt.Errorf("stored key %q: %w", u.kb, err)
		}
		var j J
		if u.left {
			lv, err := lc.Value.Deserialize(u.v)
			if err != nil {
				return fmt.Errorf("stored value of %q: %w", u.kb, err)
			}
			j, err = joiner(k, lv, true, *new(R), false)
			if err != nil {
				return err
			}
		} else {
			rv, err := rc.Value.Deserialize(u.v)
			if err != nil {
				return fmt.Errorf("stored value of %q: %w", u.kb, err)
			}
			if j, err = joiner(k, *new(L), false, rv, true); err != nil {
				return err
			}
		}
		return next(k, j, restamp(&alone, m, u.at))
	}
}

// streamSide is the push of one side of a stream-stream join, as Kafka
// Streams' KStreamKStreamJoin processes a record: the join's stream time
// moves on; a record at stream time first hands on the unmatched records
// whose windows have closed; then the record joins every record of the
// other side within its window that is still kept (however late the
// record itself is: it is only kept when it is not too late to be
// joined later); a record that joins nothing waits for a partner in the
// unmatched store, or, when its window has already passed stream time, is
// handed on alone at once.
func streamSide[K, A, B, J any](t *task, this Stream[K, A], otherValues serde.Serde[B], st *joinState, side *joinSideState,
	next push[K, J], joiner func(k K, a A, b B, bok bool) (J, error)) (push[K, A], error) {
	sj := &streamJoin[K, A, B, J]{t: t, this: this, otherValues: otherValues, st: st, side: side, other: st.other(side),
		next: next, joiner: joiner}
	return sj.push, nil
}

// streamJoin is one side of a stream-stream join: what its push needs.
type streamJoin[K, A, B, J any] struct {
	t           *task
	this        Stream[K, A]
	otherValues serde.Serde[B]
	st          *joinState
	side, other *joinSideState
	next        push[K, J]
	joiner      func(k K, a A, b B, bok bool) (J, error)
	// joined is the meta of the joined records handed on, reused.
	joined meta
}

// partner is a record of the other side within a record's window.
type partner[B any] struct {
	at time.Time
	b  B
}

func (sj *streamJoin[K, A, B, J]) push(k K, a A, m *meta) error {
	ts := m.rec.Timestamp
	if _, err := sj.side.records.observe(ts); err != nil {
		return err
	}
	now := sj.st.now()
	if (sj.this.rawKey && m.rec.Key == nil) || m.rec.Value == nil {
		return sj.withoutKeyOrValue(k, a, m)
	}
	if ts.Equal(now) {
		if err := sj.st.emitClosed(now, m); err != nil {
			return err
		}
	}
	kb, ab, err := keyAndValueBytes(sj.this, k, a, m)
	if err != nil {
		return err
	}
	// A record too old for any later record to join is not kept.
	kept := !ts.Before(now.Add(-sj.st.retention))
	if kept {
		if err := appendValue(sj.side.records.ws, kb, ts, ab); err != nil {
			return err
		}
	}
	// Read the partners first, then hand results on: what comes after
	// may write the stores.
	partners, err := sj.partners(kb, ts)
	if err != nil {
		return err
	}
	if err := sj.joinAll(k, a, m, kb, ts, partners); err != nil {
		return err
	}
	if len(partners) == 0 {
		if err := sj.alone(k, a, m, kb, ab, now, kept); err != nil {
			return err
		}
	}
	return sj.st.forget()
}

// withoutKeyOrValue handles a record with no key (where the key is the
// record's own) or no value: neither joins anything.
func (sj *streamJoin[K, A, B, J]) withoutKeyOrValue(k K, a A, m *meta) error {
	if sj.this.rawKey && m.rec.Key == nil {
		if sj.side.unmatched != nil && m.rec.Value != nil {
			// Kafka Streams (KIP-962): a side kept alone hands a
			// record without a key on alone at once.
			var zero B
			j, err := sj.joiner(k, a, zero, false)
			if err != nil {
				return err
			}
			return sj.next(k, j, m)
		}
		nullKey(sj.t, sj.this, m, "stream join")
		return nil
	}
	sj.t.ctx.Report(framework.DropEvent{Reason: "no-value", Record: m.rec, Detail: "a record with no value joins nothing"})
	return nil
}

// partners reads the other side's records of key kb within the window of
// a record at ts. The other side keeps records for the join's retention,
// measured by its own stream time.
func (sj *streamJoin[K, A, B, J]) partners(kb []byte, ts time.Time) ([]partner[B], error) {
	var partners []partner[B]
	from := maxTime(ts.Add(-sj.side.behind), sj.other.records.now.Add(-sj.st.retention+time.Millisecond))
	for at, list := range sj.other.records.ws.Fetch(kb, from, ts.Add(sj.side.ahead)) {
		if err := eachValue(list, func(v []byte) error {
			b, err := sj.otherValues.Deserialize(v)
			if err != nil {
				return fmt.Errorf("stored value of %q in %s: %w", kb, sj.side.other, err)
			}
			partners = append(partners, partner[B]{at, b})
			return nil
		}); err != nil {
			return nil, err
		}
	}
	return partners, nil
}

// joinAll hands on the record joined with each of its partners, which are
// then no longer unmatched.
func (sj *streamJoin[K, A, B, J]) joinAll(k K, a A, m *meta, kb []byte, ts time.Time, partners []partner[B]) error {
	for _, p := range partners {
		if sj.other.unmatched != nil {
			if err := sj.other.unmatched.Delete(kb, p.at); err != nil {
				return err
			}
		}
		j, err := sj.joiner(k, a, p.b, true)
		if err != nil {
			return err
		}
		if err := sj.next(k, j, restamp(&sj.joined, m, maxTime(ts, p.at))); err != nil {
			return err
		}
	}
	return nil
}

// alone handles a record that joined nothing: where its side is kept alone
// (outer joins), it waits for a partner as unmatched, or is handed on alone
// when its window has passed; otherwise a record nothing later can join
// is reported late.
func (sj *streamJoin[K, A, B, J]) alone(k K, a A, m *meta, kb, ab []byte, now time.Time, kept bool) error {
	ts := m.rec.Timestamp
	if sj.side.unmatched == nil {
		if !kept {
			// It joined nothing, and nothing later can join it.
			reportLate(sj.t, m, now, "its join window")
		}
		return nil
	}
	if !ts.Add(sj.side.ahead).Before(now) {
		return appendValue(sj.side.unmatched, kb, ts, ab)
	}
	// Its window has passed: no partner can come on time.
	var zero B
	j, err := sj.joiner(k, a, zero, false)
	if err != nil {
		return err
	}
	return sj.next(k, j, m)
}

// forget has each side forget what is past the retention by its own
// stream time, as a Kafka Streams window store does (the fetch of
// partners reads no further back). Unmatched records that old were handed
// on when stream time moved past them.
func (st *joinState) forget() error {
	for _, s := range []*joinSideState{st.left, st.right} {
		drop := s.records.now.Add(-st.retention)
		if err := s.records.ws.DropBefore(drop); err != nil {
			return err
		}
		if s.unmatched != nil {
			if err := s.unmatched.DropBefore(drop); err != nil {
				return err
			}
		}
	}
	return nil
}

// keyAndValueBytes returns the serialized key and value of a record at s.
func keyAndValueBytes[K, V any](s Stream[K, V], k K, v V, m *meta) (kb, vb []byte, err error) {
	if kb, err = keyBytes(s, k, m); err != nil {
		return nil, nil, err
	}
	vb = m.rec.Value
	if !s.rawValue {
		if vb, err = s.codec.Value.Serialize(v); err != nil {
			return nil, nil, fmt.Errorf("serialize value: %w", err)
		}
	}
	return kb, vb, nil
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
