package store

import (
	"encoding/binary"
	"errors"
	"iter"
	"math"
	"time"
)

// Window is a store of values per (key, window start), for windowed
// aggregations. It is laid over a KeyValue, so its changes reach the same
// changelog. Windows are kept in segments of time by their start, so that
// retention drops whole segments, not window by window.
type Window interface {
	// Get returns the value of key's window starting at start.
	Get(key []byte, start time.Time) ([]byte, bool, error)
	// Put sets the value of key's window starting at start.
	Put(key []byte, start time.Time, value []byte) error
	// Delete removes key's window starting at start; a missing window is
	// not an error.
	Delete(key []byte, start time.Time) error
	// Fetch iterates key's windows whose start is in [from, to], in start
	// order.
	Fetch(key []byte, from, to time.Time) iter.Seq2[time.Time, []byte]
	// FetchAll iterates the windows of every key whose start is in
	// [from, to], in (segment, key, start) order: what closes between two
	// stream times, for an aggregation that emits windows as they close.
	FetchAll(from, to time.Time) iter.Seq2[WindowKey, []byte]
	// DropBefore drops, for retention, every segment whose windows all
	// start before start: a window starting before start stays until the
	// rest of its segment goes too. The changelog does not record the
	// drop; its topic forgets old windows by its own retention, and a
	// restore drops them again at the next call.
	DropBefore(start time.Time) error
	// All iterates every window, in (segment, key, start) order.
	All() iter.Seq2[WindowKey, []byte]
	// Meta returns what the operator that owns the store last saved with
	// SetMeta, nil if nothing.
	Meta() ([]byte, error)
	// SetMeta saves a small value of the operator that owns the store (its
	// stream time, Kafka Streams' observed stream time, say) beside the
	// windows. It is a write like any other: committed, changelogged and
	// restored with the windows, so a restarted operator closes windows
	// exactly where it left off.
	SetMeta(b []byte) error
}

// metaKey is where a window store keeps its operator's value: one byte,
// shorter than any window's key (at least 17 bytes) and sorting before
// every segment, so that no range over segments meets it.
var metaKey = []byte{0}

// RangeDropper is a store that can drop a range of keys at once, as
// pending writes the changelog does not record.
type RangeDropper interface {
	DropRange(from, to []byte) error
}

// WindowKey names one window of one key.
type WindowKey struct {
	Key   []byte
	Start time.Time
}

// ErrBadWindowKey is returned for a stored key that is not a window key.
var ErrBadWindowKey = errors.New("not a window store key")

// DefaultSegment is the segment length of a window store without
// retention.
const DefaultSegment = time.Hour

// SegmentFor is the segment length for a retention: half of it, and at
// least a minute, as Kafka Streams does, so that a segment is dropped at
// most half a retention late; DefaultSegment without retention.
func SegmentFor(retention time.Duration) time.Duration {
	if retention <= 0 {
		return DefaultSegment
	}
	return max(retention/2, time.Minute)
}

type windowStore struct {
	kv      KeyValue
	segment int64 // nanoseconds
	// live is the lowest segment that may hold windows: nothing below it
	// is left to drop.
	live    uint64
	started bool
}

// NewWindow lays a window store over kv, with segments of length segment
// (SegmentFor gives the usual one). A stored key is the segment number (8
// big-endian bytes), the record key's length (uvarint), the key, then the
// window start in Unix nanoseconds as 8 big-endian bytes; the segment
// number and the start have their sign bit flipped, so that byte order is
// (segment, key, start) order.
func NewWindow(kv KeyValue, segment time.Duration) Window {
	if segment <= 0 {
		segment = DefaultSegment
	}
	return &windowStore{kv: kv, segment: int64(segment)}
}

// Window starts are kept as Unix nanoseconds, which reach from 1677 to
// 2262: a bound of a fetch beyond them (a far future "until", say) is
// taken as the last start there is, not wrapped around.
var (
	firstStart = time.Unix(0, math.MinInt64+1)
	lastStart  = time.Unix(0, math.MaxInt64-1)
)

// clampStart is t within the starts a window can have.
func clampStart(t time.Time) time.Time {
	switch {
	case t.Before(firstStart):
		return firstStart
	case t.After(lastStart):
		return lastStart
	}
	return t
}

func (w *windowStore) segmentOf(start time.Time) uint64 {
	ns := start.UnixNano()
	s := ns / w.segment
	if ns < 0 && ns%w.segment != 0 {
		s-- // floor
	}
	return uint64(s) ^ (1 << 63)
}

func segmentPrefix(seg uint64) []byte { return binary.BigEndian.AppendUint64(make([]byte, 0, 8), seg) }

func (w *windowStore) windowKey(key []byte, start time.Time) []byte {
	b := binary.BigEndian.AppendUint64(make([]byte, 0, len(key)+20), w.segmentOf(start))
	b = binary.AppendUvarint(b, uint64(len(key)))
	b = append(b, key...)
	return binary.BigEndian.AppendUint64(b, uint64(start.UnixNano())^(1<<63))
}

// ParseWindowKey splits a stored key into record key and window start.
func ParseWindowKey(b []byte) (WindowKey, error) {
	if len(b) < 8 {
		return WindowKey{}, ErrBadWindowKey
	}
	b = b[8:]
	n, l := binary.Uvarint(b)
	if l <= 0 || uint64(len(b)-l) != n+8 {
		return WindowKey{}, ErrBadWindowKey
	}
	key := b[l : l+int(n)]
	ns := int64(binary.BigEndian.Uint64(b[l+int(n):]) ^ (1 << 63))
	return WindowKey{Key: key, Start: time.Unix(0, ns).UTC()}, nil
}

func (w *windowStore) Get(key []byte, start time.Time) ([]byte, bool, error) {
	return w.kv.Get(w.windowKey(key, start))
}

func (w *windowStore) Put(key []byte, start time.Time, value []byte) error {
	return w.kv.Put(w.windowKey(key, start), value)
}

func (w *windowStore) Delete(key []byte, start time.Time) error {
	return w.kv.Delete(w.windowKey(key, start))
}

func (w *windowStore) Meta() ([]byte, error) {
	b, ok, err := w.kv.Get(metaKey)
	if err != nil || !ok {
		return nil, err
	}
	return b, nil
}

func (w *windowStore) SetMeta(b []byte) error { return w.kv.Put(metaKey, b) }

func (w *windowStore) FetchAll(from, to time.Time) iter.Seq2[WindowKey, []byte] {
	from, to = clampStart(from), clampStart(to)
	return func(yield func(WindowKey, []byte) bool) {
		if to.Before(from) {
			return
		}
		seg, last := w.segmentOf(from), w.segmentOf(to)
		for {
			next, ok := w.firstSegment(seg, last)
			if !ok {
				return
			}
			seg = next
			var hi []byte
			if seg != ^uint64(0) {
				hi = segmentPrefix(seg + 1)
			}
			for k, v := range w.kv.Range(segmentPrefix(seg), hi) {
				wk, err := ParseWindowKey(k)
				if err != nil || wk.Start.Before(from) || wk.Start.After(to) {
					continue
				}
				if !yield(wk, v) {
					return
				}
			}
			if seg == last {
				return
			}
			seg++
		}
	}
}

func (w *windowStore) Fetch(key []byte, from, to time.Time) iter.Seq2[time.Time, []byte] {
	from, to = clampStart(from), clampStart(to)
	return func(yield func(time.Time, []byte) bool) {
		seg, last := w.segmentOf(from), w.segmentOf(to)
		for {
			// Skip to the next segment holding anything at all.
			next, ok := w.firstSegment(seg, last)
			if !ok {
				return
			}
			seg = next
			lo, hi := w.windowKey(key, from), w.windowKey(key, to.Add(1))
			// Within one segment: the bounds with that segment's number.
			binary.BigEndian.PutUint64(lo, seg)
			binary.BigEndian.PutUint64(hi, seg)
			for k, v := range w.kv.Range(lo, hi) {
				wk, err := ParseWindowKey(k)
				if err != nil {
					continue
				}
				if !yield(wk.Start, v) {
					return
				}
			}
			if seg == last {
				return
			}
			seg++
		}
	}
}

// firstSegment returns the lowest segment in [from, last] that holds a
// window.
func (w *windowStore) firstSegment(from, last uint64) (uint64, bool) {
	var hi []byte
	if last != ^uint64(0) {
		hi = segmentPrefix(last + 1)
	}
	for k := range w.kv.Range(segmentPrefix(from), hi) {
		if len(k) >= 8 {
			return binary.BigEndian.Uint64(k), true
		}
	}
	return 0, false
}

func (w *windowStore) DropBefore(start time.Time) error {
	// Segments wholly before start: those below start's own segment.
	end := w.segmentOf(start)
	if !w.started {
		// The lowest segment present, found once per store instance.
		w.started = true
		w.live = end
		for k := range w.kv.Range(segmentPrefix(0), nil) {
			if len(k) >= 8 {
				w.live = binary.BigEndian.Uint64(k)
			}
			break
		}
	}
	if end <= w.live {
		return nil
	}
	from, to := segmentPrefix(w.live), segmentPrefix(end)
	if d, ok := w.kv.(RangeDropper); ok {
		if err := d.DropRange(from, to); err != nil {
			return err
		}
	} else {
		var doomed [][]byte
		for k := range w.kv.Range(from, to) {
			doomed = append(doomed, k)
		}
		for _, k := range doomed {
			if err := w.kv.Delete(k); err != nil {
				return err
			}
		}
	}
	w.live = end
	return nil
}

func (w *windowStore) All() iter.Seq2[WindowKey, []byte] {
	return func(yield func(WindowKey, []byte) bool) {
		for k, v := range w.kv.Range(segmentPrefix(0), nil) {
			wk, err := ParseWindowKey(k)
			if err != nil {
				continue
			}
			if !yield(wk, v) {
				return
			}
		}
	}
}
