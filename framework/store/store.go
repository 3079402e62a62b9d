// Package store holds processor state: key-value stores with range scans,
// window stores for windowed operators, and change capture so that the
// runtime can write every change to a changelog topic in the same
// transaction as the outputs, and rebuild a store from that changelog.
package store

import (
	"bytes"
	"iter"

	"github.com/google/btree"
)

// KeyValue is a sorted map of byte keys to byte values. Keys compare as
// bytes. Values must not be nil (nil is the changelog's delete).
type KeyValue interface {
	// Get returns the value of key and whether it exists.
	Get(key []byte) ([]byte, bool, error)
	// Put sets key to value.
	Put(key, value []byte) error
	// Delete removes key; deleting a missing key is not an error.
	Delete(key []byte) error
	// Range iterates keys in [from, to) in order; a nil bound is open.
	// The store must not be changed while iterating.
	Range(from, to []byte) iter.Seq2[[]byte, []byte]
	// Len is the number of keys.
	Len() int
}

// Change is one entry of a store's changelog: a put, or with a nil Value a
// delete.
type Change struct {
	Key   []byte
	Value []byte
}

// Logged is a store whose changes the runtime collects for its changelog.
type Logged interface {
	KeyValue
	// TakeChanges returns the changes since the last call, one per key (the
	// last one), in key order, and forgets them.
	TakeChanges() []Change
	// Restore applies changelog entries without recording them as changes.
	Restore(changes []Change) error
}

type item struct {
	key, value []byte
}

func less(a, b item) bool { return bytes.Compare(a.key, b.key) < 0 }

// Memory is an in-memory Logged store on a B-tree (github.com/google/btree).
// It copies keys and values on the way in, so callers may reuse buffers.
type Memory struct {
	tree    *btree.BTreeG[item]
	changed *btree.BTreeG[item] // pending changes, nil value = delete
}

var _ Logged = (*Memory)(nil)

// NewMemory returns an empty in-memory store.
func NewMemory() *Memory {
	return &Memory{tree: btree.NewG(32, less), changed: btree.NewG(32, less)}
}

// Get implements KeyValue.
func (m *Memory) Get(key []byte) ([]byte, bool, error) {
	it, ok := m.tree.Get(item{key: key})
	return it.value, ok, nil
}

// Put implements KeyValue. A nil value is stored as an empty one.
func (m *Memory) Put(key, value []byte) error {
	it := item{key: bytes.Clone(key), value: append([]byte{}, value...)}
	m.tree.ReplaceOrInsert(it)
	m.changed.ReplaceOrInsert(it)
	return nil
}

// Delete implements KeyValue.
func (m *Memory) Delete(key []byte) error {
	k := bytes.Clone(key)
	m.tree.Delete(item{key: k})
	m.changed.ReplaceOrInsert(item{key: k})
	return nil
}

// Range implements KeyValue.
func (m *Memory) Range(from, to []byte) iter.Seq2[[]byte, []byte] {
	return func(yield func([]byte, []byte) bool) {
		visit := func(it item) bool {
			if to != nil && bytes.Compare(it.key, to) >= 0 {
				return false
			}
			return yield(it.key, it.value)
		}
		if from == nil {
			m.tree.Ascend(visit)
			return
		}
		m.tree.AscendGreaterOrEqual(item{key: from}, visit)
	}
}

// Len implements KeyValue.
func (m *Memory) Len() int { return m.tree.Len() }

// TakeChanges implements Logged.
func (m *Memory) TakeChanges() []Change {
	out := make([]Change, 0, m.changed.Len())
	m.changed.Ascend(func(it item) bool {
		out = append(out, Change{Key: it.key, Value: it.value})
		return true
	})
	m.changed.Clear(false)
	return out
}

// Restore implements Logged.
func (m *Memory) Restore(changes []Change) error {
	for _, c := range changes {
		if c.Value == nil {
			m.tree.Delete(item{key: c.Key})
			continue
		}
		m.tree.ReplaceOrInsert(item{key: bytes.Clone(c.Key), value: bytes.Clone(c.Value)})
	}
	return nil
}
