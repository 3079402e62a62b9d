package dsl

import (
	"fmt"

	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/serde"
)

// GlobalTable is a topic read whole, every partition, by every task that
// joins it (Kafka Streams' GlobalKTable): a stream joins it on any key it
// derives from its records, with no co-partitioning and no repartition.
// Each worker keeps one copy, which it reads to the topic's end before its
// tasks start and then follows.
type GlobalTable[K, V any] struct {
	topic, store string
	codec        serde.Codec[K, V]
}

// GlobalTableFrom reads topic as a global table, kept in the named store
// (a record with a nil value deletes its key).
func GlobalTableFrom[K, V any](b *Builder, topic, storeName string, codec serde.Codec[K, V]) GlobalTable[K, V] {
	return GlobalTable[K, V]{topic: topic, store: storeName, codec: codec}
}

// JoinGlobal joins each record of s with the row of the global table
// under the key keyOf derives from the record, as the worker's copy stands
// when the record is delivered; a record with no row is reported as
// dropped ("no-match"). The causal gate holds a record that claims an
// offset of the global table's topic until the worker's copy has applied
// it: a client that updates a row and then writes a record in one session
// always sees its update joined.
func JoinGlobal[K, V, GK, GV, R any](s Stream[K, V], gt GlobalTable[GK, GV], keyOf func(K, V) (GK, error), joiner func(K, V, GV) (R, error)) Stream[K, R] {
	return joinGlobal(s, gt, keyOf, false, func(k K, v V, row GV, _ bool) (R, error) { return joiner(k, v, row) })
}

// LeftJoinGlobal is JoinGlobal that keeps records with no row: joiner is
// called with found false and the zero row.
func LeftJoinGlobal[K, V, GK, GV, R any](s Stream[K, V], gt GlobalTable[GK, GV], keyOf func(K, V) (GK, error), joiner func(k K, v V, row GV, found bool) (R, error)) Stream[K, R] {
	return joinGlobal(s, gt, keyOf, true, joiner)
}

func joinGlobal[K, V, GK, GV, R any](s Stream[K, V], gt GlobalTable[GK, GV], keyOf func(K, V) (GK, error), left bool, joiner func(K, V, GV, bool) (R, error)) Stream[K, R] {
	s.g.root().addGlobal(framework.GlobalTable{Topic: gt.topic, Store: gt.store})
	plays(s, roleJoin, s.name()+map[bool]string{false: "-join-", true: "-left-join-"}[left]+gt.store)
	out := step(s, serde.Codec[K, R]{Key: s.codec.Key, Value: Default[R]()}, func(t *task, next push[K, R]) (push[K, V], error) {
		kv, err := t.ctx.KeyValueStore(gt.store)
		if err != nil {
			return nil, err
		}
		return func(k K, v V, m *meta) error {
			gk, err := keyOf(k, v)
			if err != nil {
				return err
			}
			kb, err := gt.codec.Key.Serialize(gk)
			if err != nil {
				return fmt.Errorf("serialize global table key: %w", err)
			}
			return joinRow(t, kv, gt.codec.Value, gt.store, left, joiner, next, k, v, kb, m,
				fmt.Sprintf("no row for key %q in global table %s", kb, gt.topic))
		}, nil
	})
	out.rawKey = s.rawKey
	// What the join emits depends on the row it read.
	out.origins = unionOrigins(out.origins, []string{gt.topic})
	return out
}
