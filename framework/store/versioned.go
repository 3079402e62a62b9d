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
// "l" + k holds the time of k's latest version and how many it has, so
// that the common reads and writes (of the latest) need no scan; "s"
// holds the stream time.
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

// latestOf reads key's index entry: its latest version's time and how
// many versions it has; ok false when it has none.
func (v *versioned) latestOf(key []byte) (latest int64, count uint32, ok bool, err error) {
	b, ok, err := v.kv.Get(append([]byte{'l'}, key...))
	if err != nil || !ok {
		return 0, 0, false, err
	}
	if len(b) != 12 {
		return 0, 0, false, fmt.Errorf("versioned store: an index entry of %d bytes", len(b))
	}
	return int64(binary.BigEndian.Uint64(b)), binary.BigEndian.Uint32(b[8:]), true, nil
}

func (v *versioned) Put(key, value []byte, at time.Time) (VersionedPut, error) {
	ts := at.UnixMilli()
	st, known, err := v.streamTime()
	if err != nil {
		return VersionedPut{}, err
	}
	cutoff := int64(math.MinInt64)
	if known {
		cutoff = st - v.history.Milliseconds()
	}
	if ts < cutoff {
		return VersionedPut{}, nil
	}
	if !known || ts > st {
		cutoff = ts - v.history.Milliseconds()
		if err := v.kv.Put(streamTimeKey, binary.BigEndian.AppendUint64(nil, uint64(ts))); err != nil {
			return VersionedPut{}, err
		}
	}
	latest, count, has, err := v.latestOf(key)
	if err != nil {
		return VersionedPut{}, err
	}
	out := VersionedPut{Put: true}
	vk := versionKey(key, ts)
	replaced := has && ts == latest
	if has && ts < latest {
		// Into the history: the oldest newer version ends it.
		validTo := int64(math.MinInt64)
		for k := range v.kv.Range(versionPrefix(key), vk) {
			if validTo, err = versionTime(k); err != nil {
				return VersionedPut{}, err
			}
		}
		out.ValidTo = time.UnixMilli(validTo).UTC()
		if _, replaced, err = v.kv.Get(vk); err != nil {
			return VersionedPut{}, err
		}
	} else {
		latest = ts
	}
	stored := []byte{0}
	if value != nil {
		stored = append([]byte{1}, value...)
	}
	if err := v.kv.Put(vk, stored); err != nil {
		return VersionedPut{}, err
	}
	if !replaced {
		count++
	}
	// Drop what is no longer readable now and then: when the key's
	// versions reach a power of two, so that a key written more often
	// than its history lasts keeps a bounded number.
	if count >= 2 && count&(count-1) == 0 && cutoff != math.MinInt64 {
		dropped, err := v.expire(key, cutoff)
		if err != nil {
			return VersionedPut{}, err
		}
		count -= dropped
	}
	index := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint64(nil, uint64(latest)), count)
	if err := v.kv.Put(append([]byte{'l'}, key...), index); err != nil {
		return VersionedPut{}, err
	}
	return out, nil
}

// expire drops key's versions no longer valid at the cutoff (all older
// than the newest at or before it), and says how many.
func (v *versioned) expire(key []byte, cutoff int64) (uint32, error) {
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
			return 0, err
		}
	}
	return uint32(len(old)), nil
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
	latest, _, ok, err := v.latestOf(key)
	if err != nil || !ok {
		return VersionedRecord{}, false, err
	}
	stored, ok, err := v.kv.Get(versionKey(key, latest))
	if err != nil || !ok || len(stored) == 0 || stored[0] == 0 {
		return VersionedRecord{}, false, err // none, or a tombstone
	}
	return VersionedRecord{Value: slices.Clone(stored[1:]), Timestamp: time.UnixMilli(latest).UTC()}, true, nil
}

func (v *versioned) GetAsOf(key []byte, asOf time.Time) (VersionedRecord, bool, error) {
	at := asOf.UnixMilli()
	cutoff, err := v.cutoff()
	if err != nil || at < cutoff {
		return VersionedRecord{}, false, err
	}
	if latest, _, ok, err := v.latestOf(key); err != nil || !ok {
		return VersionedRecord{}, false, err
	} else if at >= latest {
		return v.Get(key)
	}
	// Newest first: the first version at or before at is the one, and
	// the one seen just before it ends it.
	validTo := int64(math.MinInt64)
	for k, stored := range v.kv.Range(versionPrefix(key), PrefixEnd(versionPrefix(key))) {
		ts, err := versionTime(k)
		if err != nil {
			return VersionedRecord{}, false, err
		}
		if ts > at {
			validTo = ts
			continue
		}
		if len(stored) == 0 || stored[0] == 0 {
			return VersionedRecord{}, false, nil // a tombstone
		}
		rec := VersionedRecord{Value: slices.Clone(stored[1:]), Timestamp: time.UnixMilli(ts).UTC()}
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
