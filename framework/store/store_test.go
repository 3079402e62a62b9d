package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/framework/store"
)

func keys(kv store.KeyValue, from, to string) []string {
	var f, t []byte
	if from != "" {
		f = []byte(from)
	}
	if to != "" {
		t = []byte(to)
	}
	var out []string
	for k, v := range kv.Range(f, t) {
		out = append(out, string(k)+"="+string(v))
	}
	return out
}

func TestMemoryRange(t *testing.T) {
	m := store.NewMemory()
	for _, k := range []string{"b", "a", "d", "c"} {
		require.NoError(t, m.Put([]byte(k), []byte(k+k)))
	}
	tests := []struct {
		from, to string
		want     []string
	}{
		{"", "", []string{"a=aa", "b=bb", "c=cc", "d=dd"}},
		{"b", "", []string{"b=bb", "c=cc", "d=dd"}},
		{"", "c", []string{"a=aa", "b=bb"}},
		{"b", "d", []string{"b=bb", "c=cc"}},
		{"bb", "bc", nil},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, keys(m, tt.from, tt.to), "[%q, %q)", tt.from, tt.to)
	}
}

func TestMemoryCopiesInputs(t *testing.T) {
	m := store.NewMemory()
	k, v := []byte("k"), []byte("v")
	require.NoError(t, m.Put(k, v))
	k[0], v[0] = 'x', 'x'
	got, ok, err := m.Get([]byte("k"))
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "v", string(got))
}

// Changes are captured one per key (the last), deletes as nil values, and a
// store restored from them has the same contents.
func TestChangeCaptureAndRestore(t *testing.T) {
	m := store.NewMemory()
	require.NoError(t, m.Put([]byte("a"), []byte("1")))
	require.NoError(t, m.Put([]byte("b"), []byte("1")))
	require.NoError(t, m.Put([]byte("a"), []byte("2")))
	require.NoError(t, m.Delete([]byte("b")))
	require.NoError(t, m.Put([]byte("c"), []byte("3")))
	changes := m.TakeChanges()
	assert.Equal(t, []store.Change{{Key: []byte("a"), Value: []byte("2")}, {Key: []byte("b")}, {Key: []byte("c"), Value: []byte("3")}}, changes)
	assert.Empty(t, m.TakeChanges(), "taken changes are forgotten")

	r := store.NewMemory()
	require.NoError(t, r.Put([]byte("b"), []byte("stale")))
	require.NoError(t, r.Restore(changes))
	assert.Equal(t, keys(m, "", ""), keys(r, "", ""))
	assert.Equal(t, []store.Change{{Key: []byte("b"), Value: []byte("stale")}}, r.TakeChanges(),
		"restore records nothing; only the put before it is a change")
}

func TestWindowStore(t *testing.T) {
	w := store.NewWindow(store.NewMemory())
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 5 {
		require.NoError(t, w.Put([]byte("k"), t0.Add(time.Duration(i)*time.Minute), []byte(fmt.Sprint(i))))
	}
	require.NoError(t, w.Put([]byte("k2"), t0, []byte("other")))
	// A key that is a prefix of another must not leak into its fetches.
	require.NoError(t, w.Put([]byte("k"+"\x00"), t0, []byte("prefix")))
	var got []string
	for start, v := range w.Fetch([]byte("k"), t0.Add(time.Minute), t0.Add(3*time.Minute)) {
		got = append(got, start.Format("15:04")+"="+string(v))
	}
	assert.Equal(t, []string{"00:01=1", "00:02=2", "00:03=3"}, got)

	n, err := w.DeleteBefore(t0.Add(2 * time.Minute))
	require.NoError(t, err)
	assert.Equal(t, 4, n, "k@0, k@1, k2@0 and k\\x00@0")
	_, ok, err := w.Get([]byte("k"), t0.Add(time.Minute))
	require.NoError(t, err)
	assert.False(t, ok)
	count := 0
	for wk := range w.All() {
		assert.Equal(t, "k", string(wk.Key))
		count++
	}
	assert.Equal(t, 3, count)
}

// Window starts before 1970 still sort before later ones.
func TestWindowKeyOrderAcrossEpoch(t *testing.T) {
	w := store.NewWindow(store.NewMemory())
	early := time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC)
	late := time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)
	require.NoError(t, w.Put([]byte("k"), late, []byte("late")))
	require.NoError(t, w.Put([]byte("k"), early, []byte("early")))
	var got []string
	for _, v := range w.Fetch([]byte("k"), early, late) {
		got = append(got, string(v))
	}
	assert.Equal(t, []string{"early", "late"}, got)
}
