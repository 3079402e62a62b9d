package store

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLimitRefusesWritesOverItBeforeWritingThem(t *testing.T) {
	for _, tc := range []struct {
		name       string
		limit      int
		key, value string
		wantErr    bool
	}{
		{"under", 10, "k", "123456789", false},
		{"at", 10, "k1", "12345678", false},
		{"over", 10, "k1", "123456789", true},
		{"no limit", 0, "k1", "123456789", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := Limit(NewMemory(), "counts", tc.limit)
			err := m.Put([]byte(tc.key), []byte(tc.value))
			_, exists, gerr := m.Get([]byte(tc.key))
			require.NoError(t, gerr)
			if !tc.wantErr {
				require.NoError(t, err)
				assert.True(t, exists)
				return
			}
			var tooLarge *RecordTooLargeError
			require.ErrorAs(t, err, &tooLarge)
			assert.Equal(t, RecordTooLargeError{Store: "counts", Size: 11, Limit: 10}, *tooLarge)
			assert.False(t, exists, "nothing written")
			assert.Empty(t, m.Changes(), "nothing for the changelog")
		})
	}
}
