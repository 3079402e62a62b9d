package framework_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/causeway-stream/causeway/framework"
)

func TestFitDeadLetterCutsWhatDoesNotFit(t *testing.T) {
	hs := []framework.Header{{Key: framework.HeaderDLQError, Value: []byte("boom")}}
	for _, tc := range []struct {
		name      string
		key, val  string
		limit     int
		truncated string // "" when left whole
		wantSize  string
	}{
		{"fits", "k", "value", 100, "", ""},
		{"no bound", "k", strings.Repeat("v", 5000), 0, "", ""},
		{"value cut", "k", strings.Repeat("v", 5000), 200, "value", "5001"},
		{"key too large too", strings.Repeat("k", 300), "v", 200, "key,value", "301"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dl := framework.Record{Key: []byte(tc.key), Value: []byte(tc.val), Headers: hs}
			got := framework.FitDeadLetter(dl, tc.limit)
			trunc, cut := got.Header(framework.HeaderDLQTruncated)
			size, _ := got.Header(framework.HeaderDLQOriginalSize)
			assert.Equal(t, tc.truncated, string(trunc))
			assert.Equal(t, tc.truncated != "", cut)
			assert.Equal(t, tc.wantSize, string(size))
			n := len(got.Key) + len(got.Value)
			for _, h := range got.Headers {
				n += len(h.Key) + len(h.Value)
			}
			if tc.limit > 0 {
				assert.LessOrEqual(t, n, tc.limit, "it fits")
			}
			assert.True(t, strings.HasPrefix(tc.val, string(got.Value)), "what is kept is the start")
			// Cut again whole, it keeps the first original size.
			again := framework.CutDeadLetter(got)
			size, _ = again.Header(framework.HeaderDLQOriginalSize)
			n, err := strconv.Atoi(string(size))
			assert.NoError(t, err)
			assert.Equal(t, len(tc.key)+len(tc.val), n)
			assert.Empty(t, again.Value)
		})
	}
}
