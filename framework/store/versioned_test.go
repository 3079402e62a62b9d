package store_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/framework/store"
)

// The constants of Kafka Streams' RocksDBVersionedStoreTest.
const (
	historyRetention = 300_000
	segment          = historyRetention / 3
	base             = 10
	latest           = math.MinInt64 // PUT_RETURN_CODE_VALID_TO_UNDEFINED
	notPut           = math.MaxInt64 // PUT_RETURN_CODE_NOT_PUT
	none             = ""            // a get that finds nothing
)

// vop is a put (value "" for null), checked against the validTo it
// returns; vget is a get as of at (latest: Get), checked against the
// value, timestamp and validTo it finds.
type (
	vop struct {
		value       string
		null        bool
		at, validTo int64
	}
	vget struct {
		asOf        int64
		value       string
		at, validTo int64
	}
)

func put(value string, at, validTo int64) vop { return vop{value: value, at: at, validTo: validTo} }
func putNull(at, validTo int64) vop           { return vop{null: true, at: at, validTo: validTo} }
func getAsOf(asOf int64, value string, at, validTo int64) vget {
	return vget{asOf: asOf, value: value, at: at, validTo: validTo}
}
func getNull(asOf int64) vget { return vget{asOf: asOf, value: none} }

func ms(t int64) time.Time { return time.UnixMilli(t).UTC() }

// TestVersionedStore ports RocksDBVersionedStoreTest's put and get cases
// (one key "k"), its get as of a time ("verifyTimestampedGet...") as
// GetAsOf and its latest get as Get (asOf latest below).
func TestVersionedStore(t *testing.T) {
	for _, tt := range []struct {
		name string
		puts []vop
		gets []vget
	}{
		{"shouldPutLatest", []vop{put("v", base, latest), put("v2", base+1, latest)},
			[]vget{getAsOf(latest, "v2", base+1, latest), getAsOf(base, "v", base, base+1), getAsOf(base+1, "v2", base+1, latest),
				getAsOf(base+2, "v2", base+1, latest)}},
		{"shouldPutNullAsLatest", []vop{putNull(base, latest), putNull(base+1, latest)},
			[]vget{getNull(latest), getNull(base), getNull(base + 1), getNull(base + 2)}},
		{"shouldPutOlderWithNonNullLatest", []vop{put("v", base, latest), put("v2", base-2, base), put("v1", base-1, base), put("v4", base-4, base-2)},
			[]vget{getAsOf(latest, "v", base, latest), getAsOf(base, "v", base, latest), getAsOf(base-1, "v1", base-1, base),
				getAsOf(base-2, "v2", base-2, base-1), getAsOf(base-3, "v4", base-4, base-2)}},
		{"shouldPutOlderWithNullLatest", []vop{putNull(base, latest), put("v2", base-2, base), put("v1", base-1, base), put("v4", base-4, base-2)},
			[]vget{getNull(latest), getNull(base), getAsOf(base-1, "v1", base-1, base), getAsOf(base-2, "v2", base-2, base-1),
				getAsOf(base-3, "v4", base-4, base-2)}},
		{"shouldPutOlderNullWithNonNullLatest", []vop{put("v", base, latest), putNull(base-2, base), putNull(base-1, base), putNull(base-4, base-2),
			put("v5", base-5, base-4), put("v3", base-3, base-2), putNull(base-6, base-5)},
			[]vget{getAsOf(latest, "v", base, latest), getAsOf(base, "v", base, latest), getNull(base - 1), getNull(base - 2),
				getAsOf(base-3, "v3", base-3, base-2), getNull(base - 4), getAsOf(base-5, "v5", base-5, base-4), getNull(base - 6)}},
		{"shouldPutRepeatTimestampAsLatest (its first part)", []vop{put("to_be_replaced", base, latest), put("b", base, latest)},
			[]vget{getAsOf(latest, "b", base, latest), getAsOf(base, "b", base, latest), getNull(base - 1)}},
		{"shouldPutRepeatTimestamps", []vop{put("to_be_replaced", segment+20, latest), putNull(segment-10, segment+20),
			put("to_be_replaced", segment-10, segment+20), putNull(segment-10, segment+20), put("to_be_replaced", segment-1, segment+20),
			put("to_be_replaced", segment+1, segment+20), putNull(segment-1, segment+1), putNull(segment+1, segment+20),
			putNull(segment+10, segment+20), putNull(segment+5, segment+10), put("vp5", segment+5, segment+10),
			put("to_be_replaced", segment-5, segment-1), put("vn5", segment-5, segment-1), putNull(segment+20, latest),
			putNull(segment+20, latest), put("vn6", segment-6, segment-5)},
			[]vget{getNull(latest), getNull(segment + 30), getNull(segment + 15), getAsOf(segment+6, "vp5", segment+5, segment+10),
				getNull(segment + 2), getNull(segment), getNull(segment - 1), getAsOf(segment-5, "vn5", segment-5, segment-1),
				getAsOf(segment-6, "vn6", segment-6, segment-5), getNull(segment - 8)}},
		{"shouldMoveRecordToOlderSegmentDuringPut", []vop{put("vp20", segment+20, latest), put("vp10", segment+10, segment+20),
			put("vn10", segment-10, segment+10), put("vn2", segment-2, segment+10), put("vn1", segment-1, segment+10), put("vp1", segment+1, segment+10)},
			[]vget{getAsOf(latest, "vp20", segment+20, latest), getAsOf(segment+30, "vp20", segment+20, latest),
				getAsOf(segment+15, "vp10", segment+10, segment+20), getAsOf(segment+5, "vp1", segment+1, segment+10),
				getAsOf(segment, "vn1", segment-1, segment+1), getAsOf(segment-1, "vn1", segment-1, segment+1),
				getAsOf(segment-2, "vn2", segment-2, segment-1), getAsOf(segment-5, "vn10", segment-10, segment-2)}},
		{"shouldFallThroughToExistingOlderSegmentAsLatestDuringPut", []vop{putNull(segment-5, latest), put("vn6", segment-6, segment-5),
			put("vp20", segment+20, latest), putNull(segment+10, segment+20), putNull(segment-1, segment+10), put("vn2", segment-2, segment-1)},
			[]vget{getAsOf(latest, "vp20", segment+20, latest), getAsOf(segment+30, "vp20", segment+20, latest), getNull(segment + 12),
				getNull(segment), getNull(segment - 1), getAsOf(segment-2, "vn2", segment-2, segment-1), getNull(segment - 5),
				getAsOf(segment-6, "vn6", segment-6, segment-5)}},
		{"Causeway's own, after shouldNotPutExpired: a put older than the retention is not made, and a get as of it finds nothing",
			[]vop{put("v", historyRetention+10, latest), put("old", 9, notPut), put("edge", 10, historyRetention+10)},
			[]vget{getAsOf(latest, "v", historyRetention+10, latest), getAsOf(10, "edge", 10, historyRetention+10), getNull(9)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := store.NewVersioned(store.NewMemory(), historyRetention*time.Millisecond)
			for i, p := range tt.puts {
				var value []byte
				if !p.null {
					value = []byte(p.value)
				}
				res, err := v.Put([]byte("k"), value, ms(p.at))
				require.NoError(t, err)
				switch p.validTo {
				case notPut:
					assert.False(t, res.Put, "put %d", i)
				case latest:
					assert.True(t, res.Put, "put %d", i)
					assert.True(t, res.ValidTo.IsZero(), "put %d: valid to %v", i, res.ValidTo)
				default:
					assert.True(t, res.Put, "put %d", i)
					assert.Equal(t, ms(p.validTo), res.ValidTo, "put %d", i)
				}
			}
			for _, g := range tt.gets {
				var rec store.VersionedRecord
				var ok bool
				var err error
				what := fmt.Sprintf("as of %d", g.asOf)
				if g.asOf == latest {
					rec, ok, err = v.Get([]byte("k"))
					what = "latest"
				} else {
					rec, ok, err = v.GetAsOf([]byte("k"), ms(g.asOf))
				}
				require.NoError(t, err)
				if g.value == none {
					assert.False(t, ok, "%s: found %q", what, rec.Value)
					continue
				}
				require.True(t, ok, what)
				assert.Equal(t, g.value, string(rec.Value), what)
				assert.Equal(t, ms(g.at), rec.Timestamp, what)
				if g.validTo == latest {
					assert.True(t, rec.ValidTo.IsZero(), "%s: valid to %v", what, rec.ValidTo)
				} else {
					assert.Equal(t, ms(g.validTo), rec.ValidTo, what)
				}
			}
		})
	}
}

// Delete puts a tombstone and returns what was valid at its time; the
// history lists the versions valid within a range, newest first; versions
// no longer valid within the retention are dropped from the store.
func TestVersionedDeleteHistoryAndRetention(t *testing.T) {
	kv := store.NewMemory()
	v := store.NewVersioned(kv, 100*time.Millisecond)
	for _, p := range []struct {
		value string
		at    int64
	}{{"a", 10}, {"b", 20}, {"c", 30}} {
		_, err := v.Put([]byte("k"), []byte(p.value), ms(p.at))
		require.NoError(t, err)
	}
	was, ok, err := v.Delete([]byte("k"), ms(25))
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "b", string(was.Value))
	_, ok, err = v.GetAsOf([]byte("k"), ms(27))
	require.NoError(t, err)
	assert.False(t, ok, "deleted as of 25")
	var history []string
	for rec, err := range v.History([]byte("k"), ms(15), ms(40)) {
		require.NoError(t, err)
		history = append(history, fmt.Sprintf("%s@%d-%d", rec.Value, rec.Timestamp.UnixMilli(), rec.ValidTo.UnixMilli()))
	}
	assert.Equal(t, []string{"c@30-" + fmt.Sprint(time.Time{}.UnixMilli()), "b@20-25", "a@10-20"}, history)

	// Stream time 135, then 140: the cutoff is 40; c (valid from 30 until
	// d at 140) stays readable, the older versions are not.
	_, err = v.Put([]byte("other"), []byte("x"), ms(135))
	require.NoError(t, err)
	_, err = v.Put([]byte("k"), []byte("d"), ms(140))
	require.NoError(t, err)
	rec, ok, err := v.GetAsOf([]byte("k"), ms(40))
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "c", string(rec.Value))
	_, ok, err = v.GetAsOf([]byte("k"), ms(39))
	require.NoError(t, err)
	assert.False(t, ok, "older than the retention")
	// They leave the store when k's versions next reach a power of two
	// (8, with e, f and g): a, b and the tombstone go, c stays.
	for i, value := range []string{"e", "f", "g"} {
		_, err = v.Put([]byte("k"), []byte(value), ms(int64(150+10*i)))
		require.NoError(t, err)
	}
	versions := 0
	for range store.Prefix(kv, []byte("v")) {
		versions++
	}
	assert.Equal(t, 6, versions, "k's c, d, e, f and g, other's x")
	rec, ok, err = v.GetAsOf([]byte("k"), ms(75))
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "c", string(rec.Value), "valid from 30 until 140")
}
