// Package store holds processor state: key-value stores with range and
// prefix scans, window stores for windowed operators, and the two things
// exactly-once needs of them. Change capture lets the runtime write every
// change to a changelog in the same Kafka transaction as the outputs, and
// rebuild a store from that changelog. Transactions let the runtime keep a
// task's writes pending until that Kafka transaction commits: reads see
// them, Commit makes them the committed state, Abort discards them, so an
// aborted transaction never needs the changelog read again.
//
// A task's stores form a Set, committed and aborted together. NewMemorySet
// keeps them in memory; package pebblestore keeps them on disk.
package store

import (
	"bytes"
	"errors"
	"fmt"
	"iter"
	"slices"

	"github.com/google/btree"
)

// KeyValue is a sorted map of byte keys to byte values. Keys compare as
// bytes. Values must not be nil (nil is the changelog's delete).
type KeyValue interface {
	// Get returns the value of key and whether it exists. The value must
	// not be changed, and is valid until the store is next written.
	Get(key []byte) ([]byte, bool, error)
	// Put sets key to value.
	Put(key, value []byte) error
	// Delete removes key; deleting a missing key is not an error.
	Delete(key []byte) error
	// Range iterates keys in [from, to) in order; a nil bound is open.
	// The store must not be changed while iterating. Keys and values are
	// valid during their iteration step only.
	Range(from, to []byte) iter.Seq2[[]byte, []byte]
}

// Prefix iterates the keys of kv that start with prefix, in order.
func Prefix(kv KeyValue, prefix []byte) iter.Seq2[[]byte, []byte] {
	return kv.Range(prefix, PrefixEnd(prefix))
}

// PrefixEnd returns the smallest key greater than every key that starts
// with prefix, or nil when there is none (prefix is empty or all 0xff).
func PrefixEnd(prefix []byte) []byte {
	end := bytes.Clone(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		end[i]++
		if end[i] != 0 {
			return end[:i+1]
		}
	}
	return nil
}

// Change is one entry of a store's changelog: a put, or with a nil Value a
// delete.
type Change struct {
	Key   []byte
	Value []byte
}

// Logged is one store of a Set: a KeyValue whose pending writes can be
// listed for the changelog, and which can be restored from it.
type Logged interface {
	KeyValue
	// Changes returns the writes pending since the set's last Commit or
	// Abort, one per key (the last), in key order, deletes with a nil
	// Value.
	Changes() []Change
	// Restore applies changelog entries as committed state. It must not
	// be called while writes are pending.
	Restore(changes []Change) error
	// Committed is a read-only view of the store as of its set's last
	// Commit: what it holds with the pending writes set aside. It reads the
	// store as it is at each call, so it stays valid across commits.
	Committed() KeyValue
}

// Set is the stores of one task. Writes are pending until Commit, which
// makes every store's pending writes, together with a checkpoint, the
// committed state in one step; Abort discards them. Reads see pending
// writes.
type Set interface {
	// Store returns the store named name, empty when new.
	Store(name string) (Logged, error)
	// Commit makes the pending writes of every store, and checkpoint, the
	// committed state, atomically.
	Commit(checkpoint []byte) error
	// Abort discards the pending writes of every store.
	Abort() error
	// Checkpoint returns the checkpoint of the last Commit, nil when none.
	Checkpoint() ([]byte, error)
	// Close aborts what is pending and releases the set.
	Close() error
}

// ErrClosed is returned by a set, or one of its stores, after Close.
var ErrClosed = errors.New("store closed")

type item struct {
	key, value []byte
}

func less(a, b item) bool { return bytes.Compare(a.key, b.key) < 0 }

// pending is one key written since the last commit: its new value (nil for
// a delete) and what to put back on an abort.
type pending struct {
	key, value []byte
	old        []byte
	existed    bool
	// dropped marks a key DropRange removed: no change for the changelog.
	dropped bool
}

func lessPending(a, b pending) bool { return bytes.Compare(a.key, b.key) < 0 }

// Memory is an in-memory store on a B-tree (github.com/google/btree). Writes
// apply to the tree at once, and the first write of each key since the last
// commit keeps the key's previous value, so Abort can put it back. It
// copies keys and values on the way in, so callers may reuse buffers.
type Memory struct {
	tree    *btree.BTreeG[item]
	pending *btree.BTreeG[pending]
}

var _ Logged = (*Memory)(nil)

// NewMemory returns an empty in-memory store. Alone (outside a Set) it
// commits with Commit and aborts with Abort.
func NewMemory() *Memory {
	return &Memory{tree: btree.NewG(32, less), pending: btree.NewG(32, lessPending)}
}

// Get implements KeyValue.
func (m *Memory) Get(key []byte) ([]byte, bool, error) {
	it, ok := m.tree.Get(item{key: key})
	return it.value, ok, nil
}

// Put implements KeyValue. A nil value is stored as an empty one.
func (m *Memory) Put(key, value []byte) error {
	it := item{key: bytes.Clone(key), value: append([]byte{}, value...)}
	old, existed := m.tree.ReplaceOrInsert(it)
	m.note(it.key, it.value, old.value, existed, false)
	return nil
}

// Delete implements KeyValue.
func (m *Memory) Delete(key []byte) error {
	old, existed := m.tree.Delete(item{key: key})
	k := old.key
	if !existed {
		k = bytes.Clone(key)
	}
	m.note(k, nil, old.value, existed, false)
	return nil
}

// note records a write of key: its new value, whether DropRange made it,
// and its value before the first write since the last commit.
func (m *Memory) note(key, value, old []byte, existed, dropped bool) {
	if p, ok := m.pending.Get(pending{key: key}); ok {
		p.value, p.dropped = value, dropped
		m.pending.ReplaceOrInsert(p)
		return
	}
	m.pending.ReplaceOrInsert(pending{key: key, value: value, old: old, existed: existed, dropped: dropped})
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

// DropRange implements RangeDropper: the keys in [from, to) go, as
// pending writes that Changes does not list.
func (m *Memory) DropRange(from, to []byte) error {
	var doomed []item
	m.tree.AscendRange(item{key: from}, item{key: to}, func(it item) bool {
		doomed = append(doomed, it)
		return true
	})
	for _, it := range doomed {
		m.tree.Delete(it)
		m.note(it.key, nil, it.value, true, true)
	}
	return nil
}

// Committed implements Logged.
func (m *Memory) Committed() KeyValue { return committedMemory{m} }

// committedMemory reads a Memory with its pending writes set aside: a
// key written since the last commit reads as it was before.
type committedMemory struct{ m *Memory }

func (c committedMemory) Get(key []byte) ([]byte, bool, error) {
	if p, ok := c.m.pending.Get(pending{key: key}); ok {
		if !p.existed {
			return nil, false, nil
		}
		return p.old, true, nil
	}
	return c.m.Get(key)
}

func (c committedMemory) Put(key, _ []byte) error { return fmt.Errorf("put %q: %w", key, ErrReadOnly) }
func (c committedMemory) Delete(key []byte) error {
	return fmt.Errorf("delete %q: %w", key, ErrReadOnly)
}

func (c committedMemory) Range(from, to []byte) iter.Seq2[[]byte, []byte] {
	return func(yield func([]byte, []byte) bool) {
		in := func(key []byte) bool {
			return (from == nil || bytes.Compare(key, from) >= 0) && (to == nil || bytes.Compare(key, to) < 0)
		}
		var out []item
		for k, v := range c.m.Range(from, to) {
			if p, ok := c.m.pending.Get(pending{key: k}); ok {
				if p.existed {
					out = append(out, item{key: k, value: p.old})
				}
				continue
			}
			out = append(out, item{key: k, value: v})
		}
		// Keys deleted since the last commit are not in the tree.
		c.m.pending.Ascend(func(p pending) bool {
			if p.existed && in(p.key) {
				if _, ok := c.m.tree.Get(item{key: p.key}); !ok {
					out = append(out, item{key: p.key, value: p.old})
				}
			}
			return true
		})
		slices.SortFunc(out, func(a, b item) int { return bytes.Compare(a.key, b.key) })
		for _, it := range out {
			if !yield(it.key, it.value) {
				return
			}
		}
	}
}

// Changes implements Logged.
func (m *Memory) Changes() []Change {
	out := make([]Change, 0, m.pending.Len())
	m.pending.Ascend(func(p pending) bool {
		if !p.dropped {
			out = append(out, Change{Key: p.key, Value: p.value})
		}
		return true
	})
	return out
}

// Commit makes the pending writes committed.
func (m *Memory) Commit() { m.pending.Clear(false) }

// Abort puts back every key written since the last commit.
func (m *Memory) Abort() {
	m.pending.Ascend(func(p pending) bool {
		if p.existed {
			m.tree.ReplaceOrInsert(item{key: p.key, value: p.old})
		} else {
			m.tree.Delete(item{key: p.key})
		}
		return true
	})
	m.pending.Clear(false)
}

// Restore implements Logged.
func (m *Memory) Restore(changes []Change) error {
	if m.pending.Len() > 0 {
		return errors.New("store: restore with writes pending")
	}
	for _, c := range changes {
		if c.Value == nil {
			m.tree.Delete(item{key: c.Key})
			continue
		}
		m.tree.ReplaceOrInsert(item{key: bytes.Clone(c.Key), value: bytes.Clone(c.Value)})
	}
	return nil
}

// MemorySet is a Set of in-memory stores.
type MemorySet struct {
	stores     map[string]*Memory
	checkpoint []byte
	closed     bool
}

var _ Set = (*MemorySet)(nil)

// NewMemorySet returns an empty set of in-memory stores.
func NewMemorySet() *MemorySet { return &MemorySet{stores: map[string]*Memory{}} }

// Store implements Set.
func (s *MemorySet) Store(name string) (Logged, error) {
	if s.closed {
		return nil, ErrClosed
	}
	m, ok := s.stores[name]
	if !ok {
		m = NewMemory()
		s.stores[name] = m
	}
	return m, nil
}

// Commit implements Set.
func (s *MemorySet) Commit(checkpoint []byte) error {
	if s.closed {
		return ErrClosed
	}
	for _, m := range s.stores {
		m.Commit()
	}
	s.checkpoint = bytes.Clone(checkpoint)
	return nil
}

// Abort implements Set.
func (s *MemorySet) Abort() error {
	for _, m := range s.stores {
		m.Abort()
	}
	return nil
}

// Checkpoint implements Set.
func (s *MemorySet) Checkpoint() ([]byte, error) { return s.checkpoint, nil }

// Close implements Set.
func (s *MemorySet) Close() error {
	s.closed = true
	s.stores = nil
	return nil
}

// splitSet keeps the stores named in inMemory in memory and the others in
// another set.
type splitSet struct {
	other    Set
	memory   *MemorySet
	inMemory map[string]bool
}

// Split returns a set that keeps the stores named in inMemory in memory and
// the others in other, committing and aborting both together. Its
// checkpoint is other's: in-memory stores keep nothing across a restart.
func Split(other Set, inMemory map[string]bool) Set {
	return &splitSet{other: other, memory: NewMemorySet(), inMemory: inMemory}
}

var _ RangeDropper = (*Memory)(nil)

func (s *splitSet) Store(name string) (Logged, error) {
	if s.inMemory[name] {
		return s.memory.Store(name)
	}
	return s.other.Store(name)
}

// Commit commits the other set first: a memory set cannot fail.
func (s *splitSet) Commit(checkpoint []byte) error {
	if err := s.other.Commit(checkpoint); err != nil {
		return err
	}
	return s.memory.Commit(nil)
}

func (s *splitSet) Abort() error {
	return errors.Join(s.other.Abort(), s.memory.Abort())
}

func (s *splitSet) Checkpoint() ([]byte, error) { return s.other.Checkpoint() }

func (s *splitSet) Close() error {
	return errors.Join(s.other.Close(), s.memory.Close())
}

// ErrReadOnly is returned by the writes of a read-only store.
var ErrReadOnly = errors.New("store is read-only")

// ReadOnly returns kv with its writes refused (ErrReadOnly): what a task
// sees of a global table, which the worker alone writes.
func ReadOnly(kv KeyValue) KeyValue { return readOnly{kv} }

type readOnly struct{ kv KeyValue }

func (r readOnly) Get(key []byte) ([]byte, bool, error) { return r.kv.Get(key) }
func (r readOnly) Put(key, _ []byte) error {
	return fmt.Errorf("put %q: %w", key, ErrReadOnly)
}
func (r readOnly) Delete(key []byte) error {
	return fmt.Errorf("delete %q: %w", key, ErrReadOnly)
}
func (r readOnly) Range(from, to []byte) iter.Seq2[[]byte, []byte] { return r.kv.Range(from, to) }
