// Package pebblestore keeps a task's stores on disk, in one Pebble database
// (github.com/cockroachdb/pebble/v2) per task, so that state can outgrow
// memory and a restart need not read the changelog again.
//
// Writes go to an indexed batch that reads see (Pebble merges it over the
// database), and reach the database only when the set commits, in one
// atomic batch together with the checkpoint; an abort throws the batch
// away. The database therefore only ever holds a committed state, with the
// checkpoint of that very state beside it, whatever happens to the
// process. Commits do not wait for the disk, and there is no write-ahead
// log (see options): a crash of the process or the machine loses the
// commits not yet flushed from memory, but never splits one, so what is
// found after it is still a committed state with its own checkpoint. Sync
// and Close write every commit so far to disk.
//
// Layout: a store's keys are its name (uvarint length, then the bytes)
// followed by the key; keys beginning with 0x00 (which no store name
// begins with) hold the set's own records: the format version and the
// checkpoint.
package pebblestore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/btree"

	"github.com/causeway-stream/causeway/framework/store"
)

// formatVersion is the layout version this package writes and reads.
const formatVersion = 1

var (
	versionKey    = []byte("\x00version")
	checkpointKey = []byte("\x00checkpoint")
)

// ErrIncompatible is returned by Open for a database written in another
// layout: wipe the directory and restore the stores from their changelogs.
var ErrIncompatible = errors.New("pebblestore: state written in another layout")

// Opt configures Open.
type Opt interface{ apply(*config) }

type config struct {
	fs        vfs.FS
	cacheSize int64
	cache     *pebble.Cache
}

type optFunc func(*config)

func (f optFunc) apply(c *config) { f(c) }

// FS sets the file system Pebble uses. Default: the operating system's.
// Tests use vfs.NewMem.
func FS(fs vfs.FS) Opt { return optFunc(func(c *config) { c.fs = fs }) }

// CacheSize sets the size of the set's own block cache in bytes. Default:
// 8 MiB.
func CacheSize(n int64) Opt { return optFunc(func(c *config) { c.cacheSize = n }) }

// SharedCache makes the set use cache, shared with other sets, instead of
// a cache of its own: a worker's tasks share one, so that its size does
// not grow with their number. The set takes a reference of its own.
func SharedCache(cache *pebble.Cache) Opt { return optFunc(func(c *config) { c.cache = cache }) }

// Set is a store.Set in one Pebble database. Not safe for concurrent use.
type Set struct {
	db     *pebble.DB
	batch  *pebble.Batch // indexed; nil when nothing is pending
	stores map[string]*kv
	// err is the first read error met where none can be returned (an
	// iteration); Commit returns it, so nothing is committed past it.
	err error
	// unflushed counts the bytes commits wrote since Commit last asked for
	// a flush (see flushEvery).
	unflushed int
	// background holds the first error of Pebble's own goroutines (a
	// flush or compaction that failed); Commit returns it.
	background *backgroundError
}

// backgroundError is the first error Pebble reported from a goroutine of
// its own. Without the write-ahead log, a flush that keeps failing leaves
// every commit in memory until writes stall; the set fails its next
// commit instead, so that its task fails on its own and is restored from
// the changelog when it runs again.
type backgroundError struct {
	mu  sync.Mutex
	err error
}

func (b *backgroundError) set(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err == nil {
		b.err = err
	}
}

func (b *backgroundError) get() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

var _ store.Set = (*Set)(nil)

// Open opens, or creates, the set in directory dir.
func Open(dir string, opts ...Opt) (*Set, error) {
	cfg := config{fs: vfs.Default, cacheSize: 8 << 20}
	for _, o := range opts {
		o.apply(&cfg)
	}
	cache := cfg.cache
	if cache == nil {
		cache = pebble.NewCache(cfg.cacheSize)
	} else {
		cache.Ref()
	}
	defer cache.Unref() // the database holds its own reference
	bg := &backgroundError{}
	o := options(cfg.fs, cache)
	o.EventListener = &pebble.EventListener{BackgroundError: bg.set}
	db, err := pebble.Open(dir, o)
	if err != nil {
		return nil, fmt.Errorf("pebblestore: open %s: %w", dir, err)
	}
	s := &Set{db: db, stores: map[string]*kv{}, background: bg}
	if err := s.checkVersion(); err != nil {
		return nil, errors.Join(err, db.Close())
	}
	return s, nil
}

// options is how the set tunes Pebble for a task's stores: a stream of
// small writes, mostly to keys read just before, and restores that write
// a whole changelog at once.
//
//   - No write-ahead log, as Kafka Streams runs RocksDB: the changelog
//     topics are what makes state durable. A commit lands in the memtable
//     with its checkpoint, and reaches disk when the memtable is flushed
//     (every few MiB of writes), at Sync, and at Close; after a crash the
//     database holds the last committed state flushed, checkpoint
//     included, and the changelog supplies the rest.
//   - Memtables of up to 32 MiB (Pebble's default is 4), for restores:
//     a restore writes a whole changelog at once, and with 4 MiB
//     memtables flushing them took about a quarter of its CPU. Commits,
//     the steady state, still flush every 4 MiB they write (flushEvery),
//     so the memory a store holds in memtables does not grow with its
//     state: Pebble starts each database with a small memtable and
//     doubles it as needed, and only what is written occupies memory.
//   - Level 0 takes more files before compacting (16, against Pebble's 4),
//     which halves the compactions a restore causes.
//   - A Bloom filter on every level (10 bits a key) lets a read of a key
//     that is not there, the common case of a count or a join, skip the
//     data blocks of every file it would otherwise look in.
func options(fs vfs.FS, cache *pebble.Cache) *pebble.Options {
	o := &pebble.Options{FS: fs, Cache: cache, Logger: quietLogger{},
		L0CompactionThreshold: 16, L0StopWritesThreshold: 64, DisableWAL: true, MemTableSize: memTableSize}
	for i := range o.Levels {
		o.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	return o
}

func (s *Set) checkVersion() error {
	v, found, err := s.get(s.db, versionKey)
	if err != nil {
		return err
	}
	if !found {
		if err := s.db.Set(versionKey, binary.AppendUvarint(nil, formatVersion), pebble.NoSync); err != nil {
			return fmt.Errorf("pebblestore: %w", err)
		}
		return nil
	}
	if n, l := binary.Uvarint(v); l <= 0 || n != formatVersion {
		return fmt.Errorf("%w: version %x, this build reads %d", ErrIncompatible, v, formatVersion)
	}
	return nil
}

// memTableSize is the largest memtable Pebble may use; flushEvery how
// much commits write before the set asks for a flush. Restores write
// into memtables of up to memTableSize; commits keep them near
// flushEvery.
const (
	memTableSize = 32 << 20
	flushEvery   = 4 << 20
)

// quietLogger keeps Pebble's informational lines out of the worker's log.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Errorf(string, ...any) {}
func (quietLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...)) // Pebble's contract: Fatalf does not return
}

func (s *Set) reader() pebble.Reader {
	if s.batch != nil {
		return s.batch
	}
	return s.db
}

// get reads key from r, copying the value.
func (s *Set) get(r pebble.Reader, key []byte) ([]byte, bool, error) {
	v, closer, err := r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("pebblestore: get: %w", err)
	}
	out := bytes.Clone(v)
	if out == nil {
		out = []byte{}
	}
	return out, true, closer.Close()
}

func (s *Set) writer() *pebble.Batch {
	if s.batch == nil {
		s.batch = s.db.NewIndexedBatch()
	}
	return s.batch
}

// Store implements store.Set.
func (s *Set) Store(name string) (store.Logged, error) {
	if s.db == nil {
		return nil, store.ErrClosed
	}
	if name == "" {
		return nil, errors.New("pebblestore: a store needs a name")
	}
	k, ok := s.stores[name]
	if !ok {
		prefix := binary.AppendUvarint(nil, uint64(len(name)))
		k = &kv{s: s, prefix: append(prefix, name...), changed: btree.NewG(32, lessChange)}
		s.stores[name] = k
	}
	return k, nil
}

// Commit implements store.Set: one Pebble batch holds the pending writes
// of every store and the checkpoint.
func (s *Set) Commit(checkpoint []byte) error {
	if s.db == nil {
		return store.ErrClosed
	}
	if s.err != nil {
		return s.err
	}
	if err := s.background.get(); err != nil {
		return fmt.Errorf("pebblestore: commit: a flush or compaction failed: %w", err)
	}
	b := s.writer()
	if err := b.Set(checkpointKey, checkpoint, nil); err != nil {
		return fmt.Errorf("pebblestore: commit: %w", err)
	}
	written := len(b.Repr())
	err := b.Commit(pebble.NoSync)
	s.discard()
	if err != nil {
		return fmt.Errorf("pebblestore: commit: %w", err)
	}
	if s.unflushed += written; s.unflushed >= flushEvery {
		// The commit stands either way: a flush only moves it from
		// memory to disk, which Sync and Close do too.
		s.unflushed = 0
		_, _ = s.db.AsyncFlush()
	}
	return nil
}

// Abort implements store.Set.
func (s *Set) Abort() error {
	s.discard()
	s.err = nil
	return nil
}

// discard drops the batch and the changes noted for it.
func (s *Set) discard() {
	if s.batch != nil {
		_ = s.batch.Close() // a batch's Close only returns it to its pool
		s.batch = nil
	}
	for _, k := range s.stores {
		k.changed.Clear(false)
	}
}

// Sync makes every commit so far durable: it returns once they are on
// disk, or with the error of a flush that failed (a full disk).
func (s *Set) Sync() error {
	if s.db == nil {
		return store.ErrClosed
	}
	if err := s.flush(); err != nil {
		return fmt.Errorf("pebblestore: sync: %w", err)
	}
	return nil
}

// flush writes the memtables to disk and waits for it, but not forever:
// Pebble tries a failed flush again and again (on a full disk, until
// space is freed), and its own Flush waits for one to succeed. This
// returns the first background error instead.
func (s *Set) flush() error {
	if err := s.background.get(); err != nil {
		return fmt.Errorf("a flush or compaction failed: %w", err)
	}
	flushed, err := s.db.AsyncFlush()
	if err != nil {
		return err
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-flushed:
			return nil
		case <-tick.C:
			if err := s.background.get(); err != nil {
				return fmt.Errorf("a flush or compaction failed: %w", err)
			}
		}
	}
}

// Checkpoint implements store.Set.
func (s *Set) Checkpoint() ([]byte, error) {
	if s.db == nil {
		return nil, store.ErrClosed
	}
	v, found, err := s.get(s.db, checkpointKey)
	if !found {
		return nil, err
	}
	return v, err
}

// Close implements store.Set. It flushes what was committed to disk.
func (s *Set) Close() error {
	if s.db == nil {
		return nil
	}
	s.discard()
	// A flush that failed is not waited for: the changelog holds what
	// the set did not write, and a restore reads it back.
	err := errors.Join(s.flush(), s.db.Close())
	s.db = nil
	if err != nil {
		return fmt.Errorf("pebblestore: close: %w", err)
	}
	return nil
}

// kv is one store of a set: its keys under its prefix.
type kv struct {
	s       *Set
	prefix  []byte
	changed *btree.BTreeG[store.Change] // pending, by key; nil Value: delete
	// keyBuf holds the stored key of a point read or write: Pebble copies
	// keys into its batches and reads them only during the call, so one
	// buffer saves an allocation per Get, Put and Delete.
	keyBuf []byte
}

func lessChange(a, b store.Change) bool { return bytes.Compare(a.Key, b.Key) < 0 }

func (k *kv) key(key []byte) []byte {
	return append(append(make([]byte, 0, len(k.prefix)+len(key)), k.prefix...), key...)
}

// pointKey is key's stored key in k.keyBuf, valid until the next call.
func (k *kv) pointKey(key []byte) []byte {
	k.keyBuf = append(append(k.keyBuf[:0], k.prefix...), key...)
	return k.keyBuf
}

// Get implements store.KeyValue.
func (k *kv) Get(key []byte) ([]byte, bool, error) {
	if k.s.db == nil {
		return nil, false, store.ErrClosed
	}
	return k.s.get(k.s.reader(), k.pointKey(key))
}

// Put implements store.KeyValue.
func (k *kv) Put(key, value []byte) error {
	if k.s.db == nil {
		return store.ErrClosed
	}
	if value == nil {
		value = []byte{}
	}
	if err := k.s.writer().Set(k.pointKey(key), value, nil); err != nil {
		return fmt.Errorf("pebblestore: put: %w", err)
	}
	k.changed.ReplaceOrInsert(store.Change{Key: bytes.Clone(key), Value: bytes.Clone(value)})
	return nil
}

// Delete implements store.KeyValue.
func (k *kv) Delete(key []byte) error {
	if k.s.db == nil {
		return store.ErrClosed
	}
	if err := k.s.writer().Delete(k.pointKey(key), nil); err != nil {
		return fmt.Errorf("pebblestore: delete: %w", err)
	}
	k.changed.ReplaceOrInsert(store.Change{Key: bytes.Clone(key)})
	return nil
}

// Range implements store.KeyValue. A read error ends the iteration and is
// returned by the set's next Commit.
func (k *kv) Range(from, to []byte) iter.Seq2[[]byte, []byte] {
	return k.rangeOf(k.s.reader, from, to)
}

// Committed implements store.Logged: the database under the set's pending
// batch.
func (k *kv) Committed() store.KeyValue { return committedKV{k} }

// committedKV reads a store's database, not the batch of its pending
// writes.
type committedKV struct{ k *kv }

func (c committedKV) Get(key []byte) ([]byte, bool, error) {
	if c.k.s.db == nil {
		return nil, false, store.ErrClosed
	}
	return c.k.s.get(c.k.s.db, c.k.key(key))
}

func (c committedKV) Put(key, _ []byte) error {
	return fmt.Errorf("pebblestore: put %q: %w", key, store.ErrReadOnly)
}

func (c committedKV) Delete(key []byte) error {
	return fmt.Errorf("pebblestore: delete %q: %w", key, store.ErrReadOnly)
}

func (c committedKV) Range(from, to []byte) iter.Seq2[[]byte, []byte] {
	return c.k.rangeOf(func() pebble.Reader { return c.k.s.db }, from, to)
}

// rangeOf iterates what reader holds of the store's keys in [from, to).
func (k *kv) rangeOf(reader func() pebble.Reader, from, to []byte) iter.Seq2[[]byte, []byte] {
	return func(yield func([]byte, []byte) bool) {
		if k.s.db == nil {
			return
		}
		opts := &pebble.IterOptions{LowerBound: k.key(from), UpperBound: store.PrefixEnd(k.prefix)}
		if to != nil {
			opts.UpperBound = k.key(to)
		}
		it, err := reader().NewIter(opts)
		if err != nil {
			k.s.fail(err)
			return
		}
		for valid := it.First(); valid; valid = it.Next() {
			v, err := it.ValueAndErr()
			if err != nil {
				k.s.fail(err)
				break
			}
			if !yield(it.Key()[len(k.prefix):], v) {
				break
			}
		}
		if err := it.Close(); err != nil {
			k.s.fail(err)
		}
	}
}

func (s *Set) fail(err error) {
	if s.err == nil {
		s.err = fmt.Errorf("pebblestore: read: %w", err)
	}
}

// DropRange implements store.RangeDropper: one range deletion in the
// pending batch, which the changelog does not record. Changes noted for
// keys in the range are forgotten with them.
func (k *kv) DropRange(from, to []byte) error {
	if k.s.db == nil {
		return store.ErrClosed
	}
	if err := k.s.writer().DeleteRange(k.key(from), k.key(to), nil); err != nil {
		return fmt.Errorf("pebblestore: drop range: %w", err)
	}
	var gone []store.Change
	k.changed.AscendRange(store.Change{Key: from}, store.Change{Key: to}, func(c store.Change) bool {
		gone = append(gone, c)
		return true
	})
	for _, c := range gone {
		k.changed.Delete(c)
	}
	return nil
}

var _ store.RangeDropper = (*kv)(nil)

// Changes implements store.Logged.
func (k *kv) Changes() []store.Change {
	out := make([]store.Change, 0, k.changed.Len())
	k.changed.Ascend(func(c store.Change) bool {
		out = append(out, c)
		return true
	})
	return out
}

// restoreBatchBytes is the size at which Restore commits and starts a new
// batch.
const restoreBatchBytes = 4 << 20

// Restore implements store.Logged: the changes are applied to the database
// directly, in batches, as committed state.
func (k *kv) Restore(changes []store.Change) error {
	if k.s.db == nil {
		return store.ErrClosed
	}
	if k.s.batch != nil {
		return errors.New("pebblestore: restore with writes pending")
	}
	b := k.s.db.NewBatch()
	defer func() { _ = b.Close() }()
	for _, c := range changes {
		if c.Value == nil {
			if err := b.Delete(k.pointKey(c.Key), nil); err != nil {
				return fmt.Errorf("pebblestore: restore: %w", err)
			}
		} else {
			// Written in place: the stored key and the value are copied
			// into the batch once.
			op := b.SetDeferred(len(k.prefix)+len(c.Key), len(c.Value))
			copy(op.Key[copy(op.Key, k.prefix):], c.Key)
			copy(op.Value, c.Value)
			if err := op.Finish(); err != nil {
				return fmt.Errorf("pebblestore: restore: %w", err)
			}
		}
		if b.Len() >= restoreBatchBytes {
			if err := k.s.background.get(); err != nil {
				return fmt.Errorf("pebblestore: restore: a flush or compaction failed: %w", err)
			}
			if err := b.Commit(pebble.NoSync); err != nil {
				return fmt.Errorf("pebblestore: restore: %w", err)
			}
			b.Reset()
		}
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("pebblestore: restore: %w", err)
	}
	return nil
}
