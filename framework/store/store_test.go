package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/framework/store"
	"github.com/causeway-stream/causeway/framework/store/storetest"
)

func TestMemorySetBehaviour(t *testing.T) {
	storetest.Run(t, storetest.Backend{Open: func(*testing.T) store.Set { return store.NewMemorySet() }})
}

func TestPrefixEnd(t *testing.T) {
	for _, tc := range []struct{ prefix, want []byte }{
		{[]byte("a"), []byte("b")},
		{[]byte("a\xff"), []byte("b")},
		{[]byte("\xff\xff"), nil},
		{nil, nil},
	} {
		assert.Equal(t, tc.want, store.PrefixEnd(tc.prefix), "%q", tc.prefix)
	}
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
