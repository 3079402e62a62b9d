package dsl

import (
	"encoding/binary"
	"errors"
	"time"

	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/serde"
)

// joinMode says which rows or records of a join come out without a
// partner.
type joinMode int

const (
	innerJoin joinMode = iota // only pairs
	leftJoin                  // pairs, and the left side alone
	outerJoin                 // pairs, and either side alone
)

// String names the mode as processor names do: join, left-join or
// outer-join.
func (j joinMode) String() string {
	switch j {
	case leftJoin:
		return "left-join"
	case outerJoin:
		return "outer-join"
	}
	return "join"
}

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
// key no longer has a result but had one, a tombstone deletes it. A
// result carries the later of the two rows' timestamps, kept for the join
// in the store "<left store>-<right store>-join-times". Both tables are
// read by one processor, so their inputs must be co-partitioned. The
// result is not materialized: join it with a stream only after
// aggregating it.
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
	if l.versioned || r.versioned {
		b.fail("a table-table join of a versioned table is not built: join a stream with it, or keep its latest rows in a table of their own")
	}
	g := union(l.s.g, r.s.g)
	plays(l.s, roleJoin, l.store+"-"+mode.String()+"-"+r.store)
	l.s.n.wantsPrior, r.s.n.wantsPrior = true, true
	times := l.store + "-" + r.store + "-join-times"
	g.root().stores = append(g.root().stores, framework.KeyValueStore(times))
	n := newNode[K, J]()
	out := Stream[K, J]{b: b, g: g, n: n, codec: serde.Codec[K, J]{Key: l.s.codec.Key, Value: Default[J]()},
		origins: unionOrigins(l.s.origins, r.s.origins)}
	l.s.n.then(func(t *task) (push[K, L], error) {
		return tableSide(t, n, l.s, tableSides{r.store, times, 'l', 'r'}, r.s.codec.Value, func(lok, rok bool) bool { return mode.keeps(lok, rok) },
			func(k K, lv L, lok bool, rv R, rok bool) (J, error) { return joiner(k, lv, lok, rv, rok) })
	})
	r.s.n.then(func(t *task) (push[K, R], error) {
		return tableSide(t, n, r.s, tableSides{l.store, times, 'r', 'l'}, l.s.codec.Value, func(rok, lok bool) bool { return mode.keeps(lok, rok) },
			func(k K, rv R, rok bool, lv L, lok bool) (J, error) { return joiner(k, lv, lok, rv, rok) })
	})
	return Table[K, J]{s: out}
}

// tableSides names, for one side of a table-table join, the other side's
// store and the store of both sides' timestamps, with the byte each side
// puts before its keys there.
type tableSides struct {
	other, times    string
	this, otherSide byte
}

// tableSide is one side of a table-table join: on each change of this
// side, look up the other side's row and hand on the result, or a
// tombstone where a result existed and no longer does, stamped with the
// later of the two rows' timestamps.
func tableSide[K, A, B, J any](t *task, n *node[K, J], this Stream[K, A], sides tableSides, otherRows serde.Serde[B],
	keeps func(thisOK, otherOK bool) bool, joiner func(k K, a A, aok bool, b B, bok bool) (J, error)) (push[K, A], error) {
	kv, err := t.ctx.KeyValueStore(sides.other)
	if err != nil {
		return nil, err
	}
	times, err := t.ctx.KeyValueStore(sides.times)
	if err != nil {
		return nil, err
	}
	next, err := n.open(t)
	if err != nil {
		return nil, err
	}
	var change meta
	var mine, theirs, at8 []byte // reused: the store copies keys and values
	return func(k K, a A, m *meta) error {
		kb, err := keyBytes(this, k, m)
		if err != nil {
			return err
		}
		b, bok, err := current(kv, otherRows, kb, sides.other)
		if err != nil {
			return err
		}
		mine = append(append(mine[:0], sides.this), kb...)
		theirs = append(append(theirs[:0], sides.otherSide), kb...)
		if m.tombstone {
			err = times.Delete(mine)
		} else {
			at8 = binary.BigEndian.AppendUint64(at8[:0], uint64(m.rec.Timestamp.UnixNano()))
			err = times.Put(mine, at8)
		}
		if err != nil {
			return err
		}
		at := m.rec.Timestamp
		if tb, ok, err := times.Get(theirs); err != nil {
			return err
		} else if ok && bok && len(tb) == 8 {
			at = maxTime(at, time.Unix(0, int64(binary.BigEndian.Uint64(tb))).UTC())
		}
		aok := !m.tombstone
		now, before := keeps(aok, bok), keeps(m.prior, bok)
		restamp(&change, m, at)
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

// errBadValueList is returned for a stored list of values that does not
// parse.
var errBadValueList = errors.New("stored list of join values does not parse")
