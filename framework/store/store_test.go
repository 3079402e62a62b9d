package store_test

import (
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

// Window starts before 1970 still sort before later ones.
func TestWindowKeyOrderAcrossEpoch(t *testing.T) {
	w := store.NewWindow(store.NewMemory(), time.Hour)
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
