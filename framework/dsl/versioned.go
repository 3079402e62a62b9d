package dsl

import (
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"math"
	"slices"
	"time"

	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/serde"
	"github.com/causeway-stream/causeway/framework/store"
)

// Versioned makes TableFrom's store a versioned one (Kafka Streams'
// Materialized.as(Stores.persistentVersionedKeyValueStore(name,
// history)), KIP-889/914): each record is a version of its key from its
// timestamp on, so a record older than its key's latest goes into the
// history and does not overwrite the newer row, nor does it go on to the
// steps after (as Kafka Streams forwards only the latest); a record older
// than history behind the store's stream time is reported dropped
// ("expired"). A stream joined with the table reads each key's row as of
// the stream record's timestamp.
func Versioned(history time.Duration) StoreOpt {
	return func(s *framework.StoreSpec) { s.Kind, s.Retention = framework.VersionedKind, history }
}

// isVersioned reports whether opts make a versioned store.
func isVersioned(opts []StoreOpt) bool {
	spec := framework.KeyValueStore("")
	for _, o := range opts {
		o(&spec)
	}
	return spec.Kind == framework.VersionedKind
}

// openVersionedTable is TableFrom's source over a versioned store.
func openVersionedTable[K, V any](t *task, out Stream[K, V], n *node[K, V], storeName string, codec serde.Codec[K, V]) (func(*meta) error, error) {
	vs, err := t.ctx.VersionedStore(storeName)
	if err != nil {
		return nil, err
	}
	next, err := n.open(t)
	if err != nil {
		return nil, err
	}
	var change meta
	return func(m *meta) error {
		if nullKey(t, out, m, "table "+storeName) {
			return nil
		}
		k, err := codec.Key.Deserialize(m.rec.Key)
		if err != nil {
			return framework.KeyError(m.rec, err)
		}
		var v V
		if m.rec.Value != nil {
			if v, err = codec.Value.Deserialize(m.rec.Value); err != nil {
				return framework.ValueError(m.rec, err)
			}
		}
		was, prior, err := vs.Get(m.rec.Key)
		if err != nil {
			return err
		}
		res, err := vs.Put(m.rec.Key, m.rec.Value, m.rec.Timestamp)
		if err != nil {
			return err
		}
		switch {
		case !res.Put:
			t.ctx.Report(framework.DropEvent{Reason: "expired", Record: m.rec, Detail: "older than the history retention of versioned store " + storeName})
			return nil
		case !res.ValidTo.IsZero():
			return nil // a version in the history: the latest row is unchanged
		}
		change = *m
		change.prior, change.old, change.tombstone = prior, was.Value, m.rec.Value == nil
		return next(k, v, &change)
	}, nil
}

// errAsOfOnly is what asOfRows answers to anything but Get.
var errAsOfOnly = errors.New("a versioned table is read as of a time only")

// asOfRows reads a versioned store as a key-value store as of at: what a
// stream-table join sees of a versioned table.
type asOfRows struct {
	vs store.Versioned
	at time.Time
}

func (a *asOfRows) Get(key []byte) ([]byte, bool, error) {
	rec, ok, err := a.vs.GetAsOf(key, a.at)
	return rec.Value, ok, err
}

func (a *asOfRows) Put([]byte, []byte) error { return errAsOfOnly }
func (a *asOfRows) Delete([]byte) error      { return errAsOfOnly }
func (a *asOfRows) Range([]byte, []byte) iter.Seq2[[]byte, []byte] {
	return func(func([]byte, []byte) bool) {}
}

// JoinWithGrace is Join against a versioned table (Versioned) with a
// grace period (Kafka Streams' Joined.withGracePeriod, KIP-923): each
// stream record waits, in the named store, until stream time has passed
// its timestamp by grace, and is then joined with the table's row as of
// its timestamp, in timestamp order; so a table update that comes up to
// grace late still meets the records it was valid for. A record already
// that late is joined at once. The table must be versioned, with a
// history retention of at least grace.
func JoinWithGrace[K, V, T, R any](s Stream[K, V], t Table[K, T], grace time.Duration, bufferStore string, joiner func(K, V, T) (R, error)) Stream[K, R] {
	checkGrace(s, t, grace)
	return joinGrace(s, t, false, grace, bufferStore, func(k K, v V, row T, _ bool) (R, error) { return joiner(k, v, row) })
}

// LeftJoinWithGrace is JoinWithGrace that keeps stream records with no
// row, as LeftJoin does.
func LeftJoinWithGrace[K, V, T, R any](s Stream[K, V], t Table[K, T], grace time.Duration, bufferStore string, joiner func(k K, v V, row T, found bool) (R, error)) Stream[K, R] {
	checkGrace(s, t, grace)
	return joinGrace(s, t, true, grace, bufferStore, joiner)
}

// checkGrace refuses a grace period against a table that cannot serve it,
// with Kafka Streams' words.
func checkGrace[K, V, T any](s Stream[K, V], t Table[K, T], grace time.Duration) {
	if !t.versioned {
		s.b.fail("KTable must be versioned to use a grace period in a stream table join (table %s: TableFrom with dsl.Versioned)", t.store)
		return
	}
	spec := framework.KeyValueStore("")
	for _, st := range t.s.g.root().stores {
		if st.Name == t.store {
			spec = st
		}
	}
	if spec.Retention < grace {
		s.b.fail("History retention must be at least grace period (table %s keeps %s, the join waits %s)", t.store, spec.Retention, grace)
	}
}

// graceBuffer holds the records of a join with a grace period in the
// named store, "r" + time + sequence number to each record (its key,
// value and timestamp), "n" to the next sequence number, and hands each
// to join once stream time has passed it by grace, oldest first.
func graceBuffer[K, V any](tk *task, s Stream[K, V], name string, grace time.Duration, join push[K, V]) (push[K, V], error) {
	kv, err := tk.ctx.KeyValueStore(name)
	if err != nil {
		return nil, err
	}
	// oldest is the time of the oldest buffered record (MaxInt64: none),
	// so that a record that makes none due reads nothing.
	oldest := firstBuffered(kv)
	return func(k K, v V, m *meta) error {
		expiry := tk.ctx.StreamTime().UnixMilli() - grace.Milliseconds()
		ts := m.rec.Timestamp.UnixMilli()
		if ts < expiry {
			return join(k, v, m) // too late to wait for: joined as of now
		}
		kb, err := keyBytes(s, k, m)
		if err != nil {
			return err
		}
		var vb []byte
		if !m.tombstone && (!s.rawValue || m.rec.Value != nil) {
			if vb, err = s.codec.Value.Serialize(v); err != nil {
				return fmt.Errorf("join buffer %s: serialize value: %w", name, err)
			}
		}
		seq := uint64(0)
		if b, ok, err := kv.Get([]byte("n")); err != nil {
			return err
		} else if ok && len(b) == 8 {
			seq = binary.BigEndian.Uint64(b)
		}
		if err := kv.Put([]byte("n"), binary.BigEndian.AppendUint64(nil, seq+1)); err != nil {
			return err
		}
		at := binary.BigEndian.AppendUint64([]byte{'r'}, uint64(ts)^(1<<63))
		entry := binary.BigEndian.AppendUint32(nil, uint32(len(kb)))
		entry = append(entry, kb...)
		if vb == nil {
			entry = append(entry, 0) // no value
		} else {
			entry = append(append(entry, 1), vb...)
		}
		if err := kv.Put(binary.BigEndian.AppendUint64(at, seq), entry); err != nil {
			return err
		}
		if oldest = min(oldest, ts); oldest > expiry {
			return nil
		}
		if err := evictJoins(kv, s, name, expiry, join); err != nil {
			return err
		}
		oldest = firstBuffered(kv)
		return nil
	}, nil
}

// firstBuffered is the time of the oldest record in a join buffer,
// math.MaxInt64 when it holds none.
func firstBuffered(kv store.KeyValue) int64 {
	for key := range kv.Range([]byte("r"), []byte("s")) {
		if len(key) >= 9 {
			return int64(binary.BigEndian.Uint64(key[1:9]) ^ (1 << 63))
		}
	}
	return math.MaxInt64
}

// evictJoins joins the buffered records at or before expiry, oldest first.
func evictJoins[K, V any](kv store.KeyValue, s Stream[K, V], name string, expiry int64, join push[K, V]) error {
	end := binary.BigEndian.AppendUint64([]byte{'r'}, uint64(expiry+1)^(1<<63))
	var due [][2][]byte
	for key, entry := range kv.Range([]byte("r"), end) {
		due = append(due, [2][]byte{slices.Clone(key), slices.Clone(entry)})
	}
	for _, d := range due {
		key, entry := d[0], d[1]
		if err := kv.Delete(key); err != nil {
			return err
		}
		if len(key) != 17 || len(entry) < 4 {
			return fmt.Errorf("join buffer %s: an entry of a %d-byte key and %d bytes", name, len(key), len(entry))
		}
		n := int(binary.BigEndian.Uint32(entry))
		if 4+n+1 > len(entry) {
			return fmt.Errorf("join buffer %s: an entry's key runs past its end", name)
		}
		m := meta{}
		m.rec.Key = entry[4 : 4+n]
		if m.tombstone = entry[4+n] == 0; !m.tombstone {
			m.rec.Value = entry[4+n+1:]
		}
		m.rec.Timestamp = time.UnixMilli(int64(binary.BigEndian.Uint64(key[1:9]) ^ (1 << 63))).UTC()
		k, err := s.codec.Key.Deserialize(m.rec.Key)
		if err != nil {
			return fmt.Errorf("join buffer %s: key: %w", name, err)
		}
		var v V
		if m.rec.Value != nil {
			if v, err = s.codec.Value.Deserialize(m.rec.Value); err != nil {
				return fmt.Errorf("join buffer %s: value: %w", name, err)
			}
		}
		if err := join(k, v, &m); err != nil {
			return err
		}
	}
	return nil
}
