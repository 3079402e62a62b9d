package dsl

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/spaolacci/murmur3"

	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/serde"
	"github.com/causeway-stream/causeway/framework/store"
)

// A foreign-key join (Kafka Streams' KTable.join with a foreign-key
// extractor, KIP-213) runs in two processors and a round trip between
// them, as Kafka Streams runs it:
//
//  1. The left table's processor turns each change of a left row into
//     subscriptions, keyed by the row's foreign key, on the topic
//     "<store>-subscription-registration-topic": subscribe the row's key
//     to its new foreign key, unsubscribe it from the old one. Each
//     carries a hash of the left row it was made from.
//  2. The right table's processor reads them, co-partitioned with the
//     right table, keeps who subscribes to what in
//     "<store>-subscription-store" (keyed by foreign key, then primary
//     key), and answers on "<store>-subscription-response-topic", keyed by
//     the left row's key, with the right row it finds. When a right row
//     changes, it answers every key subscribed to it.
//  3. The left table's processor reads the answers, co-partitioned with
//     the left table, and joins each with the left row, if the row still
//     has the hash the answer carries: an answer to a row that has since
//     changed is stale and dropped (reported "fk-stale-response"), since
//     the answer to the change is on its way.

// fkVersion is the first byte of every subscription and response; a
// reader refuses another.
const fkVersion byte = 1

// fkSeed is the seed of the row hashes, the one Kafka Streams gives
// Murmur3 (DEFAULT_SEED).
const fkSeed = 104729

// DropStaleResponse is the drop reason of a foreign-key join's answer to
// a left row that has changed since it asked.
const DropStaleResponse = "fk-stale-response"

// errFKFormat is wrapped by the errors of subscriptions and responses
// that do not parse.
var errFKFormat = errors.New("foreign-key join record does not parse")

// fkInstruction is what a subscription asks of the right side (Kafka
// Streams' SubscriptionWrapper.Instruction).
type fkInstruction byte

const (
	// unsubscribe, answer nothing: the row moved to another foreign key,
	// whose answer will tell.
	fkDeleteNoPropagate fkInstruction = iota + 1
	// unsubscribe and answer with no right row: the row is gone.
	fkDeleteAndPropagate
	// subscribe, answer with the right row or with none.
	fkPropagateNullIfNoValue
	// subscribe, answer only with a right row.
	fkPropagateOnlyIfValue
)

// rowHash is the 128-bit hash of a serialized row, or none (nil row).
type rowHash struct {
	set    bool
	h1, h2 uint64
}

func hashRow(b []byte) rowHash {
	h1, h2 := murmur3.Sum128WithSeed(b, fkSeed)
	return rowHash{set: true, h1: h1, h2: h2}
}

func (h rowHash) append(b []byte) []byte {
	if !h.set {
		return append(b, 0)
	}
	b = append(b, 1)
	b = binary.BigEndian.AppendUint64(b, h.h1)
	return binary.BigEndian.AppendUint64(b, h.h2)
}

// readHash reads what append wrote, and returns the rest of b.
func readHash(b []byte) (rowHash, []byte, error) {
	switch {
	case len(b) >= 1 && b[0] == 0:
		return rowHash{}, b[1:], nil
	case len(b) >= 17 && b[0] == 1:
		return rowHash{set: true, h1: binary.BigEndian.Uint64(b[1:]), h2: binary.BigEndian.Uint64(b[9:])}, b[17:], nil
	}
	return rowHash{}, nil, fmt.Errorf("%w: a hash of %d bytes", errFKFormat, len(b))
}

// subscription is the value of a subscription record; its key is the
// foreign key (none when the row has none, in a left join).
type subscription struct {
	hash        rowHash
	instruction fkInstruction
	primaryKey  []byte
}

func (s subscription) encode() []byte {
	b := s.hash.append([]byte{fkVersion, byte(s.instruction)})
	return append(b, s.primaryKey...)
}

func decodeSubscription(b []byte) (subscription, error) {
	if len(b) < 2 || b[0] != fkVersion || b[1] < byte(fkDeleteNoPropagate) || b[1] > byte(fkPropagateOnlyIfValue) {
		return subscription{}, fmt.Errorf("%w: not a version %d subscription", errFKFormat, fkVersion)
	}
	h, rest, err := readHash(b[2:])
	if err != nil {
		return subscription{}, err
	}
	return subscription{hash: h, instruction: fkInstruction(b[1]), primaryKey: rest}, nil
}

// response is the value of a response record, keyed by the left row's
// key: the hash of the row it answers and the right row found, if any.
type response struct {
	hash    rowHash
	found   bool
	foreign []byte
}

func (r response) encode() []byte {
	b := r.hash.append([]byte{fkVersion})
	if !r.found {
		return append(b, 0)
	}
	return append(append(b, 1), r.foreign...)
}

func decodeResponse(b []byte) (response, error) {
	if len(b) < 1 || b[0] != fkVersion {
		return response{}, fmt.Errorf("%w: not a version %d response", errFKFormat, fkVersion)
	}
	h, rest, err := readHash(b[1:])
	if err != nil {
		return response{}, err
	}
	if len(rest) < 1 || rest[0] > 1 {
		return response{}, fmt.Errorf("%w: no right-row flag", errFKFormat)
	}
	return response{hash: h, found: rest[0] == 1, foreign: rest[1:]}, nil
}

// subscriptionKey is the subscription store's key: the foreign key's
// length (4 bytes), the foreign key, the primary key, as Kafka Streams'
// CombinedKeySchema lays it out, so one foreign key's subscribers are one
// prefix.
func subscriptionKey(fk, pk []byte) []byte {
	b := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(fk)+len(pk)), uint32(len(fk)))
	return append(append(b, fk...), pk...)
}

// JoinForeignKey joins each row of l with the row of r whose key
// foreignKey extracts from it (Kafka Streams' KTable.join with a
// foreign-key extractor, KIP-213 and KIP-1104): the result is a table
// keyed like l, materialized in the named store, with a row for every
// left row whose foreign key has a right row. foreignKey returns ok false
// for a row that has none (Java's null), which joins nothing. A change of
// either side updates the results it touches; a left row that loses its
// match, or is deleted, goes on as a tombstone (also where no result was
// there to delete, as in Kafka Streams). The join needs two internal
// topics, "<store>-subscription-registration-topic" and
// "<store>-subscription-response-topic", and the store
// "<store>-subscription-store"; l's and r's inputs need not be
// co-partitioned. A result takes the later of its
// two rows' timestamps when a left change made it, the right row's when
// a right change did.
func JoinForeignKey[K, V, KO, VO, R any](l Table[K, V], r Table[KO, VO], storeName string, foreignKey func(K, V) (KO, bool, error), joiner func(k K, v V, o VO) (R, error), opts ...StoreOpt) Table[K, R] {
	return joinForeignKey(l, r, storeName, false, foreignKey, func(k K, v V, o VO, _ bool) (R, error) { return joiner(k, v, o) }, opts)
}

// LeftJoinForeignKey is JoinForeignKey with a result for every left row:
// joiner is called with found false and the zero right row when the
// foreign key has no right row, or the left row has no foreign key.
func LeftJoinForeignKey[K, V, KO, VO, R any](l Table[K, V], r Table[KO, VO], storeName string, foreignKey func(K, V) (KO, bool, error), joiner func(k K, v V, o VO, found bool) (R, error), opts ...StoreOpt) Table[K, R] {
	return joinForeignKey(l, r, storeName, true, foreignKey, joiner, opts)
}

// fkNames are the internal topics and stores of one foreign-key join.
type fkNames struct {
	store, subscriptions, responses, subscribers, foreignTimes string
}

func namesOf(storeName string) fkNames {
	return fkNames{
		store:         storeName,
		subscriptions: storeName + "-subscription-registration-topic",
		responses:     storeName + "-subscription-response-topic",
		subscribers:   storeName + "-subscription-store",
		foreignTimes:  storeName + "-foreign-times",
	}
}

func joinForeignKey[K, V, KO, VO, R any](l Table[K, V], r Table[KO, VO], storeName string, left bool, foreignKey func(K, V) (KO, bool, error), joiner func(K, V, VO, bool) (R, error), opts []StoreOpt) Table[K, R] {
	b := l.s.b
	if l.store == "" || r.store == "" {
		b.fail("a foreign-key join joins tables materialized in stores: aggregate the join result first, or join the tables it came from")
		return Table[K, R]{s: Stream[K, R]{b: b, g: l.s.g, n: newNode[K, R]()}}
	}
	names := namesOf(storeName)
	raw := serde.Codec[[]byte, []byte]{Key: serde.Bytes(), Value: serde.Bytes()}

	// 1. The left side subscribes.
	l.s.n.wantsOld = true
	plays(l.s, roleJoin, storeName+"-fk-"+map[bool]string{false: "join", true: "left-join"}[left])
	subs := step(l.s, raw, func(t *task, next push[[]byte, []byte]) (push[K, V], error) {
		return subscriber(t, l, r.s.codec.Key, left, foreignKey, next), nil
	})
	subs.rawKey, subs.rawValue = false, false
	subs.To(names.subscriptions)
	b.repartitions = append(b.repartitions, repartitionTopic{topic: names.subscriptions, like: first(r.s.origins)})

	// 2. The right side answers.
	in := newSource(b, b.newGroup(names.subscriptions), names.subscriptions, raw, sourceOpts[[]byte, []byte]{})
	g := union(r.s.g, in.g)
	g.stores = append(g.stores, framework.KeyValueStore(names.subscribers), framework.KeyValueStore(names.foreignTimes))
	plays(r.s, roleJoin, storeName+"-fk-subscriptions")
	r.s.n.wantsPrior = true
	answers := newNode[[]byte, []byte]()
	answered := Stream[[]byte, []byte]{b: b, g: g, n: answers, codec: raw, origins: unionOrigins(in.origins, r.s.origins)}
	in.n.then(func(t *task) (push[[]byte, []byte], error) { return answerSubscription(t, r, names, answers) })
	r.s.n.then(func(t *task) (push[KO, VO], error) { return answerChange(t, r, names, answers) })
	answered.To(names.responses)
	b.repartitions = append(b.repartitions, repartitionTopic{topic: names.responses, like: first(l.s.origins), reply: true})

	// 3. The left side joins the answers.
	back := newSource(b, b.newGroup(names.responses), names.responses, raw, sourceOpts[[]byte, []byte]{})
	back.g = union(l.s.g, back.g)
	declare(back, storeName, opts)
	n := newNode[K, R]()
	out := Stream[K, R]{b: b, g: back.g, n: n, codec: serde.Codec[K, R]{Key: l.s.codec.Key, Value: Default[R]()},
		origins: unionOrigins(back.origins, l.s.origins), rawKey: true}
	back.n.then(func(t *task) (push[[]byte, []byte], error) {
		return joinResponse(t, l, r.s.codec.Value, names, left, joiner, out)
	})
	return Table[K, R]{s: out, store: storeName}
}

// first is the first of names, or "".
func first(names []string) string {
	if len(names) == 0 {
		return ""
	}
	return names[0]
}

// rowsOf returns how a task reads t's current rows: its key-value store,
// or the latest versions of a versioned one.
func rowsOf[K, V any](t *task, tbl Table[K, V]) (func(key []byte) ([]byte, bool, error), error) {
	if tbl.versioned {
		vs, err := t.ctx.VersionedStore(tbl.store)
		if err != nil {
			return nil, err
		}
		return func(key []byte) ([]byte, bool, error) {
			rec, ok, err := vs.Get(key)
			return rec.Value, ok, err
		}, nil
	}
	kv, err := t.ctx.KeyValueStore(tbl.store)
	if err != nil {
		return nil, err
	}
	return kv.Get, nil
}

// rowBytes is a table change's new row, serialized; nil for a tombstone.
func rowBytes[K, V any](s Stream[K, V], v V, m *meta) ([]byte, error) {
	switch {
	case m.tombstone:
		return nil, nil
	case s.rawValue:
		return m.rec.Value, nil
	}
	return s.codec.Value.Serialize(v)
}

// subscriber is step 1 for one task: each change of a left row becomes
// the subscriptions Kafka Streams' SubscriptionSendProcessorSupplier
// sends for it.
func subscriber[K, V, KO any](t *task, l Table[K, V], fkSerde serde.Serde[KO], left bool, foreignKey func(K, V) (KO, bool, error), next push[[]byte, []byte]) push[K, V] {
	s := l.s
	var sent meta
	// fkOf is the serialized foreign key of row, nil when it has none.
	fkOf := func(k K, row V) ([]byte, error) {
		fk, ok, err := foreignKey(k, row)
		if err != nil || !ok {
			return nil, err
		}
		b, err := fkSerde.Serialize(fk)
		if err != nil {
			return nil, fmt.Errorf("serialize the foreign key of %s: %w", l.store, err)
		}
		return b, nil
	}
	return func(k K, v V, m *meta) error {
		if nullKey(t, s, m, "foreign-key join "+l.store) {
			return nil
		}
		pk, err := keyBytes(s, k, m)
		if err != nil {
			return err
		}
		newRow, err := rowBytes(s, v, m)
		if err != nil {
			return fmt.Errorf("serialize the row of %s: %w", l.store, err)
		}
		hadOld, hasNew := m.prior && m.old != nil, newRow != nil
		var oldFK, newFK []byte
		if hadOld {
			old, err := s.codec.Value.Deserialize(m.old)
			if err != nil {
				return fmt.Errorf("the row of %s before the change: %w", l.store, err)
			}
			if oldFK, err = fkOf(k, old); err != nil {
				return err
			}
		}
		if hasNew {
			if newFK, err = fkOf(k, v); err != nil {
				return err
			}
		}
		var hash rowHash
		if hasNew {
			hash = hashRow(newRow)
		}
		send := func(fk []byte, ins fkInstruction) error {
			sent = *m
			sent.tombstone, sent.prior, sent.old = false, false, nil
			sent.rec.Key = fk
			return next(fk, subscription{hash: hash, instruction: ins, primaryKey: pk}.encode(), &sent)
		}
		for _, x := range subscriptionsFor(left, hadOld, hasNew, oldFK, newFK) {
			if x.drop {
				t.ctx.Report(framework.DropEvent{Reason: "null-foreign-key", Record: m.rec, Detail: "foreign-key join " + l.store + ": the row has no foreign key"})
				continue
			}
			if err := send(x.fk, x.ins); err != nil {
				return err
			}
		}
		return nil
	}
}

// toSend is one subscription a left change sends, or a drop to report.
type toSend struct {
	fk   []byte
	ins  fkInstruction
	drop bool
}

// subscriptionsFor is what a change of a left row sends: hadOld and
// hasNew say whether the row was there before and is now, oldFK and newFK
// its foreign keys then and now (nil: none). It follows Kafka Streams'
// SubscriptionSendProcessorSupplier, left and inner.
func subscriptionsFor(left, hadOld, hasNew bool, oldFK, newFK []byte) []toSend {
	if left {
		// One answer per change: where Kafka Streams also has the old
		// foreign key answer "no right row" (DELETE_KEY_AND_PROPAGATE), that
		// answer carries the new row's hash too, and when it comes back
		// after the new foreign key's answer, as it can when the two keys
		// live on different partitions, it overwrites the right result
		// with a half one. So the old key is only unsubscribed.
		switch {
		case hadOld && !hasNew && oldFK != nil:
			return []toSend{{fk: oldFK, ins: fkDeleteAndPropagate}}
		case hadOld && !bytes.Equal(oldFK, newFK) && oldFK != nil:
			return []toSend{{fk: oldFK, ins: fkDeleteNoPropagate}, {fk: newFK, ins: fkPropagateNullIfNoValue}}
		case hadOld || hasNew:
			return []toSend{{fk: newFK, ins: fkPropagateNullIfNoValue}}
		}
		return nil
	}
	switch {
	case hadOld && oldFK == nil:
		return []toSend{{drop: true}}
	case hadOld && !hasNew:
		return []toSend{{fk: oldFK, ins: fkDeleteAndPropagate}}
	case hadOld && newFK == nil:
		return []toSend{{drop: true}}
	case hadOld:
		var out []toSend
		if !bytes.Equal(oldFK, newFK) {
			out = append(out, toSend{fk: oldFK, ins: fkDeleteNoPropagate})
		}
		return append(out, toSend{fk: newFK, ins: fkPropagateNullIfNoValue})
	case hasNew && newFK == nil:
		return []toSend{{drop: true}}
	case hasNew:
		return []toSend{{fk: newFK, ins: fkPropagateOnlyIfValue}}
	}
	return nil
}

// answerSubscription is step 2 for one subscription: note it in the
// subscription store, and answer it with the right row as its
// instruction says (Kafka Streams' SubscriptionReceiveProcessorSupplier
// and SubscriptionJoinProcessorSupplier).
func answerSubscription[KO, VO any](t *task, r Table[KO, VO], names fkNames, answers *node[[]byte, []byte]) (push[[]byte, []byte], error) {
	rows, err := rowsOf(t, r)
	if err != nil {
		return nil, err
	}
	subscribers, err := t.ctx.KeyValueStore(names.subscribers)
	if err != nil {
		return nil, err
	}
	times, err := t.ctx.KeyValueStore(names.foreignTimes)
	if err != nil {
		return nil, err
	}
	next, err := answers.open(t)
	if err != nil {
		return nil, err
	}
	var out meta
	return func(_ []byte, value []byte, m *meta) error {
		sub, err := decodeSubscription(value)
		if err != nil {
			return framework.ValueError(m.rec, err)
		}
		fk := m.rec.Key
		if fk == nil && sub.instruction != fkPropagateNullIfNoValue {
			t.ctx.Report(framework.DropEvent{Reason: "null-foreign-key", Record: m.rec, Detail: "foreign-key join " + names.store + ": a subscription without a foreign key"})
			return nil
		}
		var row []byte
		found := false
		at := m.rec.Timestamp
		if fk != nil {
			key := subscriptionKey(fk, sub.primaryKey)
			if sub.instruction == fkDeleteNoPropagate || sub.instruction == fkDeleteAndPropagate {
				err = subscribers.Delete(key)
			} else {
				err = subscribers.Put(key, sub.hash.append(nil))
			}
			if err != nil {
				return err
			}
			if row, found, err = rows(fk); err != nil {
				return err
			}
			if found {
				row = slices.Clone(row)
				if tb, ok, err := times.Get(fk); err != nil {
					return err
				} else if ok && len(tb) == 8 {
					at = maxTime(at, time.Unix(0, int64(binary.BigEndian.Uint64(tb))).UTC())
				}
			}
		}
		var answer response
		switch sub.instruction {
		case fkDeleteNoPropagate:
			return nil
		case fkDeleteAndPropagate:
			answer = response{hash: sub.hash}
		case fkPropagateNullIfNoValue:
			answer = response{hash: sub.hash, found: found, foreign: row}
		case fkPropagateOnlyIfValue:
			if !found {
				return nil
			}
			answer = response{hash: sub.hash, found: true, foreign: row}
		}
		restamp(&out, m, at)
		out.rec.Key = sub.primaryKey
		return next(sub.primaryKey, answer.encode(), &out)
	}, nil
}

// answerChange is step 2 for a change of a right row: answer every left
// row subscribed to its key with the new row, or with none (Kafka
// Streams' ForeignTableJoinProcessorSupplier).
func answerChange[KO, VO any](t *task, r Table[KO, VO], names fkNames, answers *node[[]byte, []byte]) (push[KO, VO], error) {
	subscribers, err := t.ctx.KeyValueStore(names.subscribers)
	if err != nil {
		return nil, err
	}
	times, err := t.ctx.KeyValueStore(names.foreignTimes)
	if err != nil {
		return nil, err
	}
	next, err := answers.open(t)
	if err != nil {
		return nil, err
	}
	var out meta
	var pending []toAnswer
	return func(k KO, v VO, m *meta) error {
		if nullKey(t, r.s, m, "foreign-key join "+names.store) {
			return nil
		}
		fk, err := keyBytes(r.s, k, m)
		if err != nil {
			return err
		}
		if m.tombstone {
			err = times.Delete(fk)
		} else {
			err = times.Put(fk, binary.BigEndian.AppendUint64(nil, uint64(m.rec.Timestamp.UnixNano())))
		}
		if err != nil || (m.tombstone && !m.prior) {
			return err // a deletion of a row that was not there changes no result
		}
		row, err := rowBytes(r.s, v, m)
		if err != nil {
			return fmt.Errorf("serialize the row of %s: %w", r.store, err)
		}
		// Gather first: the store's keys are valid during their step only,
		// and what is handed on must not run while the store is iterated.
		pending = pending[:0]
		prefix := subscriptionKey(fk, nil)
		for key, value := range store.Prefix(subscribers, prefix) {
			h, _, err := readHash(value)
			if err != nil {
				return fmt.Errorf("subscription store %s, key %q: %w", names.subscribers, key, err)
			}
			pending = append(pending, toAnswer{pk: slices.Clone(key[len(prefix):]), hash: h})
		}
		for _, a := range pending {
			out = *m
			out.tombstone, out.prior, out.old = false, false, nil
			out.rec.Key = a.pk
			answer := response{hash: a.hash, found: row != nil, foreign: row}
			if err := next(a.pk, answer.encode(), &out); err != nil {
				return err
			}
		}
		return nil
	}, nil
}

// toAnswer is one left row subscribed to a changed right row.
type toAnswer struct {
	pk   []byte
	hash rowHash
}

// joinResponse is step 3 for one task: join each answer with its left
// row, if that row still has the hash the answer carries, and write the
// result to the join's store (Kafka Streams' ResponseJoinProcessorSupplier).
func joinResponse[K, V, VO, R any](t *task, l Table[K, V], foreign serde.Serde[VO], names fkNames, left bool, joiner func(K, V, VO, bool) (R, error), out Stream[K, R]) (push[[]byte, []byte], error) {
	rows, err := rowsOf(t, l)
	if err != nil {
		return nil, err
	}
	results, err := t.ctx.KeyValueStore(names.store)
	if err != nil {
		return nil, err
	}
	next, err := out.n.open(t)
	if err != nil {
		return nil, err
	}
	var change meta
	return func(pk []byte, value []byte, m *meta) error {
		answer, err := decodeResponse(value)
		if err != nil {
			return framework.ValueError(m.rec, err)
		}
		row, found, err := rows(pk)
		if err != nil {
			return err
		}
		var now rowHash
		if found {
			now = hashRow(row)
		}
		if now != answer.hash {
			t.ctx.Report(framework.DropEvent{Reason: DropStaleResponse, Record: m.rec, Detail: "foreign-key join " + names.store + ": the left row changed since it asked"})
			return nil
		}
		change = *m
		change.prior, change.old = false, nil
		if out.n.wantsPrior || out.n.wantsOld {
			var old []byte
			if old, change.prior, err = results.Get(pk); err != nil {
				return err
			}
			change.old = slices.Clone(old)
		}
		k, err := l.s.codec.Key.Deserialize(pk)
		if err != nil {
			return framework.KeyError(m.rec, err)
		}
		if !answer.found && (!left || !found) {
			change.tombstone = true
			if err := results.Delete(pk); err != nil {
				return err
			}
			var zero R
			return next(k, zero, &change)
		}
		lv, err := l.s.codec.Value.Deserialize(row)
		if err != nil {
			return fmt.Errorf("the row of %q in %s: %w", pk, l.store, err)
		}
		var o VO
		if answer.found {
			if o, err = foreign.Deserialize(answer.foreign); err != nil {
				return fmt.Errorf("the right row answered to %q: %w", pk, err)
			}
		}
		res, err := joiner(k, lv, o, answer.found)
		if err != nil {
			return err
		}
		b, err := out.codec.Value.Serialize(res)
		if err != nil {
			return fmt.Errorf("serialize the row of %s: %w", names.store, err)
		}
		if err := results.Put(pk, b); err != nil {
			return err
		}
		change.tombstone = false
		return next(k, res, &change)
	}, nil
}
