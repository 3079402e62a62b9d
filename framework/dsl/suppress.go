package dsl

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/causeway-stream/causeway/framework/serde"
	"github.com/causeway-stream/causeway/framework/store"
)

// ErrSuppressBufferFull is matched by the error of a suppression whose
// buffer is over its bounds with ShutDownWhenFull: the task fails on the
// record that overfilled it, and goes no further.
var ErrSuppressBufferFull = errors.New("suppress: the buffer exceeded its max capacity")

// SuppressBuffer bounds what a suppression holds (Kafka Streams'
// BufferConfig): make one with BufferUnbounded, BufferMaxRecords or
// BufferMaxBytes. When a record overfills it, the oldest keys are emitted
// early (emitEarlyWhenFull, the default), or, after ShutDownWhenFull, the
// task fails. The zero SuppressBuffer holds nothing, as maxRecords(0)
// does: each change goes on at once.
type SuppressBuffer struct {
	// maxRecords and maxBytes are the bounds; -1 for none.
	maxRecords, maxBytes int64
	shutDown             bool
}

// BufferUnbounded holds any number of keys (unbounded()).
func BufferUnbounded() SuppressBuffer { return SuppressBuffer{maxRecords: -1, maxBytes: -1} }

// BufferMaxRecords holds at most n keys (maxRecords(n)).
func BufferMaxRecords(n int64) SuppressBuffer { return SuppressBuffer{maxRecords: n, maxBytes: -1} }

// BufferMaxBytes holds at most n bytes of keys and values (maxBytes(n)).
func BufferMaxBytes(n int64) SuppressBuffer { return SuppressBuffer{maxRecords: -1, maxBytes: n} }

// WithMaxRecords bounds b's keys too (withMaxRecords).
func (b SuppressBuffer) WithMaxRecords(n int64) SuppressBuffer { b.maxRecords = n; return b }

// WithMaxBytes bounds b's bytes too (withMaxBytes).
func (b SuppressBuffer) WithMaxBytes(n int64) SuppressBuffer { b.maxBytes = n; return b }

// ShutDownWhenFull makes a record that overfills b fail its task with
// ErrSuppressBufferFull (shutDownWhenFull), rather than emit early.
func (b SuppressBuffer) ShutDownWhenFull() SuppressBuffer { b.shutDown = true; return b }

// entry overhead is what a buffered key costs beyond its key and values:
// its two times and flags, as the store holds them.
const suppressEntryOverhead = 8 + 8 + 1 + 4

// SuppressUntilTimeLimit is the table of t's changes held back until
// limit of stream time has passed since each key was first buffered
// (Kafka Streams' KTable.suppress(untilTimeLimit(limit, buffer))): a key
// changed again while buffered keeps its place and takes the new value,
// so one change comes out for the many that went in, carrying the value
// the key had before the first of them and its latest value and
// timestamp. A tombstone is buffered and emitted like any change. A zero
// limit emits each change at once. The buffer is kept in the named store
// (with its changelog, restored like any store), and the changes are
// emitted as stream time passes, which the records reaching the
// suppression move on. The result has no store of its own: read it with
// ToStream, or make a table of it.
func (t Table[K, V]) SuppressUntilTimeLimit(storeName string, limit time.Duration, buffer SuppressBuffer, opts ...StoreOpt) Table[K, V] {
	s := t.s
	switch {
	case limit < 0:
		s.b.fail("suppress %s: a negative time limit %s", storeName, limit)
	case buffer.maxRecords < -1 || buffer.maxBytes < -1:
		s.b.fail("suppress %s: a negative buffer bound", storeName)
	}
	declare(s, storeName, opts)
	plays(s, roleAggregate, "suppress-"+storeName)
	s.n.wantsOld = true // the value before the first buffered change goes on with the last
	out := step(s, s.codec, func(tk *task, next push[K, V]) (push[K, V], error) {
		kv, err := tk.ctx.KeyValueStore(storeName)
		if err != nil {
			return nil, err
		}
		b := &suppressBuffer[K, V]{kv: kv, limit: limit, bounds: buffer, name: storeName, codec: s.codec, next: next}
		if err := b.load(); err != nil {
			return nil, err
		}
		return func(k K, v V, m *meta) error {
			if nullKey(tk, s, m, "suppression "+storeName) {
				return nil
			}
			kb, err := keyBytes(s, k, m)
			if err != nil {
				return err
			}
			var value []byte
			if !m.tombstone && (!s.rawValue || m.rec.Value != nil) {
				if value, err = s.codec.Value.Serialize(v); err != nil {
					return fmt.Errorf("suppress %s: serialize value: %w", storeName, err)
				}
			}
			if err := b.put(kb, m, value); err != nil {
				return err
			}
			return b.evict(tk.ctx.StreamTime())
		}, nil
	})
	out.rawKey, out.rawValue = true, true
	return Table[K, V]{s: out}
}

// suppressBuffer is one task's buffer. In its store, "k"+key holds a
// key's entry and "t"+time+key its place in time order; records and
// bytes are counted as the store is loaded and written.
type suppressBuffer[K, V any] struct {
	kv     store.KeyValue
	limit  time.Duration
	bounds SuppressBuffer
	name   string
	codec  serde.Codec[K, V]
	next   push[K, V]
	// records and bytes are what the buffer holds.
	records, bytes int64
	// oldest is when the longest-buffered key was buffered (MaxInt64
	// when none is), so that a record that evicts nothing reads nothing.
	oldest int64
}

// bufferEntry is a buffered key: when it was first buffered, its latest
// record's timestamp, its value before the first buffered change (old,
// when prior) and its latest value (nil: a tombstone).
type bufferEntry struct {
	at, ts     int64
	prior      bool
	old, value []byte
}

func (e bufferEntry) encode() []byte {
	out := binary.BigEndian.AppendUint64(nil, uint64(e.at))
	out = binary.BigEndian.AppendUint64(out, uint64(e.ts))
	flags := byte(0)
	if e.prior {
		flags |= 1
	}
	if e.value != nil {
		flags |= 2
	}
	out = append(out, flags)
	out = binary.BigEndian.AppendUint32(out, uint32(len(e.old)))
	return append(append(out, e.old...), e.value...)
}

func decodeEntry(b []byte) (bufferEntry, error) {
	if len(b) < suppressEntryOverhead {
		return bufferEntry{}, errors.New("a buffered entry too short")
	}
	e := bufferEntry{at: int64(binary.BigEndian.Uint64(b)), ts: int64(binary.BigEndian.Uint64(b[8:])), prior: b[16]&1 != 0}
	n := int(binary.BigEndian.Uint32(b[17:]))
	rest := b[suppressEntryOverhead:]
	if n > len(rest) {
		return bufferEntry{}, errors.New("a buffered entry's old value runs past its end")
	}
	e.old = slices.Clone(rest[:n])
	if b[16]&2 != 0 {
		e.value = append([]byte{}, rest[n:]...)
	}
	return e, nil
}

func (b *suppressBuffer[K, V]) size(key []byte, e bufferEntry) int64 {
	return int64(len(key) + len(e.old) + len(e.value) + suppressEntryOverhead)
}

// timeKey is a key's place in time order: times as unsigned numbers that
// sort as the signed ones do.
func timeKey(at int64, key []byte) []byte {
	return append(binary.BigEndian.AppendUint64([]byte{'t'}, uint64(at)^(1<<63)), key...)
}

// load counts what the store holds.
func (b *suppressBuffer[K, V]) load() error {
	b.oldest = math.MaxInt64
	for k, v := range b.kv.Range([]byte("k"), []byte("l")) {
		e, err := decodeEntry(v)
		if err != nil {
			return fmt.Errorf("suppress %s: %w", b.name, err)
		}
		b.records++
		b.bytes += b.size(k[1:], e)
		b.oldest = min(b.oldest, e.at)
	}
	return nil
}

// put buffers a change of key, or updates the key's entry.
func (b *suppressBuffer[K, V]) put(key []byte, m *meta, value []byte) error {
	e := bufferEntry{at: m.rec.Timestamp.UnixMilli(), ts: m.rec.Timestamp.UnixMilli(), prior: m.prior, old: m.old, value: value}
	raw, found, err := b.kv.Get(append([]byte("k"), key...))
	if err != nil {
		return err
	}
	if found {
		was, err := decodeEntry(raw)
		if err != nil {
			return fmt.Errorf("suppress %s: %w", b.name, err)
		}
		// It keeps its place and what it was before the first change.
		e.at, e.prior, e.old = was.at, was.prior, was.old
		b.records--
		b.bytes -= b.size(key, was)
	} else {
		if err := b.kv.Put(timeKey(e.at, key), nil); err != nil {
			return err
		}
		b.oldest = min(b.oldest, e.at)
	}
	b.records++
	b.bytes += b.size(key, e)
	if err := b.kv.Put(append([]byte("k"), key...), e.encode()); err != nil {
		return err
	}
	if b.bounds.shutDown && b.full() {
		return fmt.Errorf("%w (%s: %d records, %d bytes; max %d records, %d bytes, -1 for no bound)", ErrSuppressBufferFull, b.name, b.records, b.bytes,
			b.bounds.maxRecords, b.bounds.maxBytes)
	}
	return nil
}

// full reports whether the buffer is over a bound.
func (b *suppressBuffer[K, V]) full() bool {
	return (b.bounds.maxRecords >= 0 && b.records > b.bounds.maxRecords) || (b.bounds.maxBytes >= 0 && b.bytes > b.bounds.maxBytes)
}

// evict emits, oldest first, the keys buffered limit or longer before
// streamTime, and then, while the buffer is over a bound, the oldest.
func (b *suppressBuffer[K, V]) evict(streamTime time.Time) error {
	expiry := int64(math.MinInt64)
	if !streamTime.IsZero() {
		expiry = streamTime.UnixMilli() - b.limit.Milliseconds()
	}
	for b.oldest <= expiry || b.full() {
		var key []byte
		at := int64(math.MaxInt64)
		for tk := range b.kv.Range([]byte("t"), []byte("u")) {
			at, key = int64(binary.BigEndian.Uint64(tk[1:])^(1<<63)), slices.Clone(tk[9:])
			break
		}
		if b.oldest = at; key == nil || (at > expiry && !b.full()) {
			return nil
		}
		if err := b.emit(key, at); err != nil {
			return err
		}
	}
	return nil
}

// emit hands the key's entry on and takes it out of the buffer.
func (b *suppressBuffer[K, V]) emit(key []byte, at int64) error {
	raw, found, err := b.kv.Get(append([]byte("k"), key...))
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("suppress %s: the time index names a key the buffer does not hold", b.name)
	}
	e, err := decodeEntry(raw)
	if err != nil {
		return fmt.Errorf("suppress %s: %w", b.name, err)
	}
	if err := b.kv.Delete(timeKey(at, key)); err != nil {
		return err
	}
	if err := b.kv.Delete(append([]byte("k"), key...)); err != nil {
		return err
	}
	b.records--
	b.bytes -= b.size(key, e)
	k, err := b.codec.Key.Deserialize(key)
	if err != nil {
		return fmt.Errorf("suppress %s: buffered key: %w", b.name, err)
	}
	var v V
	if e.value != nil {
		if v, err = b.codec.Value.Deserialize(e.value); err != nil {
			return fmt.Errorf("suppress %s: buffered value: %w", b.name, err)
		}
	}
	m := meta{tombstone: e.value == nil, prior: e.prior, old: e.old}
	m.rec.Key, m.rec.Value, m.rec.Timestamp = key, e.value, time.UnixMilli(e.ts).UTC()
	return b.next(k, v, &m)
}
