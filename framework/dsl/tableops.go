package dsl

import (
	"fmt"
	"slices"

	"github.com/causeway-stream/causeway/framework/serde"
)

// Filter is the table of the rows keep accepts (Kafka Streams'
// KTable.filter): a row it refuses reads as no row, so an update that
// fails it goes on as a tombstone of its key, as a deletion does. The
// filtered table is materialized in the named store.
func (t Table[K, V]) Filter(storeName string, keep func(K, V) bool, opts ...StoreOpt) Table[K, V] {
	return derive(t, storeName, "filter", func(k K, v V) (V, bool, error) { return v, keep(k, v), nil }, t.s.codec.Value, opts)
}

// FilterNot is Filter with the rows drop accepts left out (Kafka Streams'
// KTable.filterNot).
func (t Table[K, V]) FilterNot(storeName string, drop func(K, V) bool, opts ...StoreOpt) Table[K, V] {
	return derive(t, storeName, "filter-not", func(k K, v V) (V, bool, error) { return v, !drop(k, v), nil }, t.s.codec.Value, opts)
}

// TableMapValues is the table of each row's value turned by fn (Kafka
// Streams' KTable.mapValues), materialized in the named store; a deleted
// row stays deleted. values serializes the new values; nil takes
// Default[V2]().
func TableMapValues[K, V, V2 any](t Table[K, V], storeName string, fn func(K, V) (V2, error), values serde.Serde[V2], opts ...StoreOpt) Table[K, V2] {
	if values == nil {
		values = Default[V2]()
	}
	return derive(t, storeName, "map-values", func(k K, v V) (V2, bool, error) {
		v2, err := fn(k, v)
		return v2, true, err
	}, values, opts)
}

// ToTable is the table of s's records (Kafka Streams' KStream.toTable):
// each record sets its key's row, and one without a value (a tombstone)
// deletes it; a record without a key is reported dropped. The table is
// materialized in the named store. Where a step before may have changed
// the key, s is repartitioned first ("<store>-repartition").
func (s Stream[K, V]) ToTable(storeName string, opts ...StoreOpt) Table[K, V] {
	if s.rekeyed {
		s = repartition(s, storeName)
	}
	return derive(Table[K, V]{s: s}, storeName, "to-table", func(_ K, v V) (V, bool, error) { return v, true, nil }, s.codec.Value, opts)
}

// derive is the step behind every table made row by row from another:
// each change of t is turned by fn into the new table's row (or into no
// row), written to the named store and handed on; a tombstone of t, or a
// row fn refuses, deletes the key and goes on as a tombstone.
func derive[K, V, V2 any](t Table[K, V], storeName, what string, fn func(K, V) (V2, bool, error), values serde.Serde[V2], opts []StoreOpt) Table[K, V2] {
	s := t.s
	declare(s, storeName, opts)
	plays(s, roleTable, what+"-"+storeName)
	var out Stream[K, V2]
	out = step(s, serde.Codec[K, V2]{Key: s.codec.Key, Value: values}, func(tk *task, next push[K, V2]) (push[K, V], error) {
		kv, err := tk.ctx.KeyValueStore(storeName)
		if err != nil {
			return nil, err
		}
		var change meta
		return func(k K, v V, m *meta) error {
			if nullKey(tk, s, m, "table "+storeName) {
				return nil
			}
			kb, err := keyBytes(s, k, m)
			if err != nil {
				return err
			}
			change = *m
			change.prior, change.old = false, nil
			if out.n.wantsPrior || out.n.wantsOld {
				// Read only for the steps after that ask: a table-table
				// join (prior), a regrouping (old).
				var old []byte
				if old, change.prior, err = kv.Get(kb); err != nil {
					return err
				}
				change.old = slices.Clone(old)
			}
			var row V2
			keep := false
			// A tombstone: a deleted row, or a record read without a value.
			if !m.tombstone && (!s.rawValue || m.rec.Value != nil) {
				if row, keep, err = fn(k, v); err != nil {
					return err
				}
			}
			if !keep {
				if err := kv.Delete(kb); err != nil {
					return err
				}
				change.tombstone = true
				var zero V2
				return next(k, zero, &change)
			}
			b, err := values.Serialize(row)
			if err != nil {
				return fmt.Errorf("serialize the row of %s: %w", storeName, err)
			}
			if err := kv.Put(kb, b); err != nil {
				return err
			}
			change.tombstone = false
			return next(k, row, &change)
		}, nil
	})
	out.rawKey = s.rawKey
	return Table[K, V2]{s: out, store: storeName}
}
