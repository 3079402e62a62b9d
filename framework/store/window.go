package store

import (
	"encoding/binary"
	"errors"
	"iter"
	"time"
)

// Window is a store of values per (key, window start), for windowed
// aggregations. It is laid over a KeyValue, so its changes reach the same
// changelog.
type Window interface {
	// Get returns the value of key's window starting at start.
	Get(key []byte, start time.Time) ([]byte, bool, error)
	// Put sets the value of key's window starting at start.
	Put(key []byte, start time.Time, value []byte) error
	// Fetch iterates key's windows whose start is in [from, to], in start
	// order.
	Fetch(key []byte, from, to time.Time) iter.Seq2[time.Time, []byte]
	// DeleteBefore removes every window that starts before start, for
	// retention, and returns how many it removed.
	DeleteBefore(start time.Time) (int, error)
	// All iterates every window in (key, start) order.
	All() iter.Seq2[WindowKey, []byte]
}

// WindowKey names one window of one key.
type WindowKey struct {
	Key   []byte
	Start time.Time
}

// ErrBadWindowKey is returned for a stored key that is not a window key.
var ErrBadWindowKey = errors.New("not a window store key")

type windowStore struct {
	kv KeyValue
}

// NewWindow lays a window store over kv. Its keys are the record key's
// length (uvarint), the key, then the window start in Unix nanoseconds as
// 8 big-endian bytes with the sign bit flipped, so that byte order is
// (key, start) order.
func NewWindow(kv KeyValue) Window { return &windowStore{kv: kv} }

func windowKey(key []byte, start time.Time) []byte {
	b := binary.AppendUvarint(make([]byte, 0, len(key)+12), uint64(len(key)))
	b = append(b, key...)
	return binary.BigEndian.AppendUint64(b, uint64(start.UnixNano())^(1<<63))
}

// ParseWindowKey splits a stored key into record key and window start.
func ParseWindowKey(b []byte) (WindowKey, error) {
	n, l := binary.Uvarint(b)
	if l <= 0 || uint64(len(b)-l) != n+8 {
		return WindowKey{}, ErrBadWindowKey
	}
	key := b[l : l+int(n)]
	ns := int64(binary.BigEndian.Uint64(b[l+int(n):]) ^ (1 << 63))
	return WindowKey{Key: key, Start: time.Unix(0, ns).UTC()}, nil
}

func (w *windowStore) Get(key []byte, start time.Time) ([]byte, bool, error) {
	return w.kv.Get(windowKey(key, start))
}

func (w *windowStore) Put(key []byte, start time.Time, value []byte) error {
	return w.kv.Put(windowKey(key, start), value)
}

func (w *windowStore) Fetch(key []byte, from, to time.Time) iter.Seq2[time.Time, []byte] {
	return func(yield func(time.Time, []byte) bool) {
		for k, v := range w.kv.Range(windowKey(key, from), windowKey(key, to.Add(1))) {
			wk, err := ParseWindowKey(k)
			if err != nil {
				continue
			}
			if !yield(wk.Start, v) {
				return
			}
		}
	}
}

func (w *windowStore) DeleteBefore(start time.Time) (int, error) {
	var doomed [][]byte
	for k := range w.kv.Range(nil, nil) {
		wk, err := ParseWindowKey(k)
		if err != nil {
			return 0, err
		}
		if wk.Start.Before(start) {
			doomed = append(doomed, k)
		}
	}
	for _, k := range doomed {
		if err := w.kv.Delete(k); err != nil {
			return 0, err
		}
	}
	return len(doomed), nil
}

func (w *windowStore) All() iter.Seq2[WindowKey, []byte] {
	return func(yield func(WindowKey, []byte) bool) {
		for k, v := range w.kv.Range(nil, nil) {
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
