package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"math"
	"slices"
	"time"
)

// Versioned is a key-value store that keeps each key's history (Kafka
// Streams' VersionedKeyValueStore, KIP-889): every put is a version of
// its key valid from its timestamp until the next version's, so a put
// older than the latest goes into the history in its place and does not
// overwrite a newer value. A delete is a version too, a tombstone. It is
// laid over a KeyValue, so its changes reach the same changelog and it is
// restored, committed and aborted with the task's other stores.
//
// History retention is how far behind the store's stream time (the
// largest timestamp put) versions stay readable: a read as of an older
// time finds nothing, a put older than that is not made
// (VersionedPut.Put false), and versions no longer valid within it are
// dropped as their key is written. The latest version of a key is kept
// whatever its age.
type Versioned interface {
	// Put makes value (nil: a tombstone) key's version from ts on, and
	// says until when it is valid.
	Put(key, value []byte, ts time.Time) (VersionedPut, error)
	// Delete puts a tombstone at ts, and returns the version that was
	// valid at ts, if one was.
	Delete(key []byte, ts time.Time) (VersionedRecord, bool, error)
	// Get returns key's latest version, unless it is a tombstone.
	Get(key []byte) (VersionedRecord, bool, error)
	// GetAsOf returns the version of key valid at asOf: the latest put at
	// or before it, unless that is a tombstone or asOf is older than the
	// history retention.
	GetAsOf(key []byte, asOf time.Time) (VersionedRecord, bool, error)
	// History iterates key's versions that were valid at some time in
	// [from, to], newest first, tombstones left out (KIP-968).
	History(key []byte, from, to time.Time) iter.Seq2[VersionedRecord, error]
	// StreamTime is the largest timestamp put so far.
	StreamTime() (time.Time, error)
}

// VersionedRecord is one version of a key: its value, the time it was
// put at, and the time the next version took over (zero while it is the
// latest).
type VersionedRecord struct {
	Value     []byte
	Timestamp time.Time
	ValidTo   time.Time
}

// VersionedPut says what a put did: whether the version was made (false:
// older than the history retention), and until when it is valid (zero:
// it is the latest).
type VersionedPut struct {
	Put     bool
	ValidTo time.Time
}

// ErrBadVersionKey is returned for a stored key that a versioned store
// did not write.
var ErrBadVersionKey = errors.New("not a versioned store key")

// versioned lays a Versioned over a KeyValue: key k's version at t is
// "v" + len(k) + k + t, with t written so that newer versions sort first,
// and its value a flag byte (1: a value, 0: a tombstone) then the value;
// "s" holds the stream time.
type versioned struct {
	kv      KeyValue
	history time.Duration
}

// NewVersioned keeps a versioned store in kv, with history retention
// history (0: only the latest version of each key is readable).
func NewVersioned(kv KeyValue, history time.Duration) Versioned {
	return &versioned{kv: kv, history: history}
}

var streamTimeKey = []byte("s")

func versionPrefix(key []byte) []byte {
	return append(binary.BigEndian.AppendUint32([]byte{'v'}, uint32(len(key))), key...)
}

// versionKey sorts versions of a key newest first.
func versionKey(key []byte, ts int64) []byte {
	return binary.BigEndian.AppendUint64(versionPrefix(key), ^(uint64(ts) ^ (1 << 63)))
}

func versionTime(stored []byte) (int64, error) {
	if len(stored) < 13 {
		return 0, ErrBadVersionKey
	}
	return int64(^binary.BigEndian.Uint64(stored[len(stored)-8:]) ^ (1 << 63)), nil
}

func (v *versioned) StreamTime() (time.Time, error) {
	ms, ok, err := v.streamTime()
	if err != nil || !ok {
		return time.Time{}, err
	}
	return time.UnixMilli(ms).UTC(), nil
}

func (v *versioned) streamTime() (int64, bool, error) {
	b, ok, err := v.kv.Get(streamTimeKey)
	if err != nil || !ok {
		return math.MinInt64, false, err
	}
	if len(b) != 8 {
		return 0, false, fmt.Errorf("versioned store: stream time of %d bytes", len(b))
	}
	return int64(binary.BigEndian.Uint64(b)), true, nil
}

// cutoff is the oldest time still readable: stream time less retention.
func (v *versioned) cutoff() (int64, error) {
	st, ok, err := v.streamTime()
	if err != nil || !ok {
		return math.MinInt64, err
	}
	return st - v.history.Milliseconds(), nil
}

func (v *versioned) Put(key, value []byte, at time.Time) (VersionedPut, error) {
	ts := at.UnixMilli()
	cutoff, err := v.cutoff()
	if err != nil {
		return VersionedPut{}, err
	}
	if ts < cutoff {
		return VersionedPut{}, nil
	}
	if st, ok, err := v.streamTime(); err != nil {
		return VersionedPut{}, err
	} else if !ok || ts > st {
		if err := v.kv.Put(streamTimeKey, binary.BigEndian.AppendUint64(nil, uint64(ts))); err != nil {
			return VersionedPut{}, err
		}
	}
	validTo, err := v.newerThan(key, ts)
	if err != nil {
		return VersionedPut{}, err
	}
	stored := []byte{0}
	if value != nil {
		stored = append([]byte{1}, value...)
	}
	if err := v.kv.Put(versionKey(key, ts), stored); err != nil {
		return VersionedPut{}, err
	}
	if err := v.expire(key); err != nil {
		return VersionedPut{}, err
	}
	out := VersionedPut{Put: true}
	if validTo != math.MinInt64 {
		out.ValidTo = time.UnixMilli(validTo).UTC()
	}
	return out, nil
}

// newerThan returns the time of key's oldest version newer than ts
// (math.MinInt64 when there is none): when a version at ts stops being
// valid.
func (v *versioned) newerThan(key []byte, ts int64) (int64, error) {
	next := int64(math.MinInt64)
	for k := range v.kv.Range(versionPrefix(key), versionKey(key, ts)) {
		t, err := versionTime(k)
		if err != nil {
			return 0, err
		}
		next = t // newest first: the last is the closest
	}
	return next, nil
}

// expire drops key's versions no longer valid at the cutoff: all older
// than the newest one at or before it.
func (v *versioned) expire(key []byte) error {
	cutoff, err := v.cutoff()
	if err != nil || cutoff == math.MinInt64 {
		return err
	}
	var old [][]byte
	kept := false
	for k := range v.kv.Range(versionKey(key, cutoff), PrefixEnd(versionPrefix(key))) {
		if !kept {
			kept = true // valid at the cutoff: still readable
			continue
		}
		old = append(old, slices.Clone(k))
	}
	for _, k := range old {
		if err := v.kv.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

func (v *versioned) Delete(key []byte, at time.Time) (VersionedRecord, bool, error) {
	was, ok, err := v.GetAsOf(key, at)
	if err != nil {
		return VersionedRecord{}, false, err
	}
	if _, err := v.Put(key, nil, at); err != nil {
		return VersionedRecord{}, false, err
	}
	return was, ok, nil
}

func (v *versioned) Get(key []byte) (VersionedRecord, bool, error) {
	return v.GetAsOf(key, time.UnixMilli(math.MaxInt64))
}

func (v *versioned) GetAsOf(key []byte, asOf time.Time) (VersionedRecord, bool, error) {
	at := asOf.UnixMilli()
	cutoff, err := v.cutoff()
	if err != nil || at < cutoff {
		return VersionedRecord{}, false, err
	}
	for k, stored := range v.kv.Range(versionKey(key, at), PrefixEnd(versionPrefix(key))) {
		ts, err := versionTime(k)
		if err != nil {
			return VersionedRecord{}, false, err
		}
		if len(stored) == 0 || stored[0] == 0 {
			return VersionedRecord{}, false, nil // a tombstone
		}
		rec := VersionedRecord{Value: slices.Clone(stored[1:]), Timestamp: time.UnixMilli(ts).UTC()}
		validTo, err := v.newerThan(key, ts)
		if err != nil {
			return VersionedRecord{}, false, err
		}
		if validTo != math.MinInt64 {
			rec.ValidTo = time.UnixMilli(validTo).UTC()
		}
		return rec, true, nil
	}
	return VersionedRecord{}, false, nil
}

func (v *versioned) History(key []byte, from, to time.Time) iter.Seq2[VersionedRecord, error] {
	return func(yield func(VersionedRecord, error) bool) {
		cutoff, err := v.cutoff()
		if err != nil {
			yield(VersionedRecord{}, err)
			return
		}
		validTo := int64(math.MinInt64)
		for k, stored := range v.kv.Range(versionPrefix(key), PrefixEnd(versionPrefix(key))) {
			ts, err := versionTime(k)
			if err != nil {
				yield(VersionedRecord{}, err)
				return
			}
			// Valid in [ts, validTo): it meets [from, to] unless it ends
			// at or before from, or starts after to.
			ends := validTo != math.MinInt64 && validTo <= from.UnixMilli()
			live := len(stored) > 0 && stored[0] == 1 && (validTo == math.MinInt64 || validTo > cutoff)
			if live && !ends && ts <= to.UnixMilli() {
				rec := VersionedRecord{Value: slices.Clone(stored[1:]), Timestamp: time.UnixMilli(ts).UTC()}
				if validTo != math.MinInt64 {
					rec.ValidTo = time.UnixMilli(validTo).UTC()
				}
				if !yield(rec, nil) {
					return
				}
			}
			if ends {
				return // the older ones end earlier still
			}
			validTo = ts
		}
	}
}
