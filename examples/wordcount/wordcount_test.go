package main

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/framework/driver"
	"github.com/causeway-stream/causeway/framework/serde"
)

func TestWords(t *testing.T) {
	tests := []struct {
		give string
		want []string
	}{
		{"The Light, and the light.", []string{"the", "light", "and", "the", "light"}},
		{"Newton's 'Opticks' (1704)", []string{"newton's", "opticks", "1704"}},
		{"  -- ; ", nil},
		{"re-fracted", []string{"re", "fracted"}},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, Words(tt.give), tt.give)
	}
}

// The unchanged topology in the in-memory driver: the last count of each
// word is how often it occurs.
func TestTopologyCountsWords(t *testing.T) {
	topo, err := Topology()
	require.NoError(t, err)
	d, err := driver.New(topo, driver.DefaultPartitions(3))
	require.NoError(t, err)
	lines := driver.NewInput(d, LinesTopic, serde.String(), serde.String())
	for _, l := range []string{"to be or not to be", "that is the question", "to be"} {
		_, _, err := lines.Pipe(l, l)
		require.NoError(t, err)
	}
	require.NoError(t, d.Run())
	out, err := driver.NewOutput(d, CountsTopic, serde.String(), serde.Int64()).All()
	require.NoError(t, err)
	last := map[string]int64{}
	for _, kv := range out {
		last[kv.Key] = max(last[kv.Key], kv.Value)
	}
	assert.Equal(t, map[string]int64{"to": 3, "be": 3, "or": 1, "not": 1, "that": 1, "is": 1, "the": 1, "question": 1}, last)
	assert.Len(t, out, 12, "one count update per word")
}

// The demo end to end on the embedded broker with the real worker: every
// committed count matches an independent count of the text.
func TestDemoEndToEnd(t *testing.T) {
	topo, err := Topology()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := runDemo(ctx, topo, demoOptions{lines: 800, top: 5, partitions: 2, timeout: time.Minute}, io.Discard)
	require.NoError(t, err)
	assert.Positive(t, res.Words)
	assert.Equal(t, 800, res.Lines)
	assert.Empty(t, res.mismatch())
}

// The demo's own check can fail: a wrong count is reported.
func TestDemoMismatchIsReported(t *testing.T) {
	res := demoResult{Expected: map[string]int64{"light": 3}, Counts: map[string]int64{"light": 2}}
	assert.Contains(t, res.mismatch(), `"light" counted 2 times, expected 3`)
	res.Counts["dark"] = 1
	assert.Contains(t, res.mismatch(), "2 distinct words counted, 1 expected")
}

// The bundled text is the 100,000 words or more the quickstart promises.
func TestSampleTextIsLargeEnough(t *testing.T) {
	words := 0
	for _, l := range textLines(0) {
		words += len(Words(l))
	}
	assert.GreaterOrEqual(t, words, 100_000)
}
