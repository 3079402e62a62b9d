package pebblestore_test

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/framework/store"
	"github.com/causeway-stream/causeway/framework/store/pebblestore"
)

// The versioned store against the plain key-value store it is laid over,
// on Pebble, side by side: puts of 10,000 keys in order of time, each
// commit after 1,000 (as a task commits), and gets of those keys (the
// latest, and as of a time between two versions). make bench runs them
// (bench-results/versioned.txt); docs/benchmarks.md has the ratios.

const benchKeys = 10_000

func benchStore(b *testing.B) (store.Set, store.Logged) {
	b.Helper()
	s, err := pebblestore.Open(b.TempDir())
	require.NoError(b, err)
	b.Cleanup(func() { _ = s.Close() })
	kv, err := s.Store("s")
	require.NoError(b, err)
	return s, kv
}

func benchKey(i int) []byte {
	return binary.BigEndian.AppendUint64([]byte("customer-"), uint64(i%benchKeys))
}

var benchValue = make([]byte, 100)

func BenchmarkPutPlain(b *testing.B) {
	s, kv := benchStore(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := kv.Put(benchKey(i), benchValue); err != nil {
			b.Fatal(err)
		}
		if i%1000 == 999 {
			if err := s.Commit(nil); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func BenchmarkPutVersioned(b *testing.B) {
	s, kv := benchStore(b)
	v := store.NewVersioned(kv, time.Hour)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := v.Put(benchKey(i), benchValue, time.UnixMilli(int64(i))); err != nil {
			b.Fatal(err)
		}
		if i%1000 == 999 {
			if err := s.Commit(nil); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func BenchmarkGetPlain(b *testing.B) {
	s, kv := benchStore(b)
	for i := range benchKeys {
		require.NoError(b, kv.Put(benchKey(i), benchValue))
	}
	require.NoError(b, s.Commit(nil))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, ok, err := kv.Get(benchKey(i)); err != nil || !ok {
			b.Fatal(err, ok)
		}
	}
}

// versionedForGets puts two versions of each key, at 0 and 1,000 ms.
func versionedForGets(b *testing.B) store.Versioned {
	s, kv := benchStore(b)
	v := store.NewVersioned(kv, time.Hour)
	for _, at := range []int64{0, 1000} {
		for i := range benchKeys {
			_, err := v.Put(benchKey(i), benchValue, time.UnixMilli(at))
			require.NoError(b, err)
		}
	}
	require.NoError(b, s.Commit(nil))
	return v
}

func BenchmarkGetVersionedLatest(b *testing.B) {
	v := versionedForGets(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, ok, err := v.Get(benchKey(i)); err != nil || !ok {
			b.Fatal(err, ok)
		}
	}
}

func BenchmarkGetVersionedAsOf(b *testing.B) {
	v := versionedForGets(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, ok, err := v.GetAsOf(benchKey(i), time.UnixMilli(500)); err != nil || !ok {
			b.Fatal(err, ok)
		}
	}
}
