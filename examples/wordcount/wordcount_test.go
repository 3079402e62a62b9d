package main

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/driver"
	"github.com/causeway-stream/causeway/framework/serde"
	"github.com/causeway-stream/causeway/operators"
	"github.com/causeway-stream/causeway/runtime"
	"github.com/causeway-stream/causeway/runtime/embedded"
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

// runTwoApplications runs two workers of topo on one embedded broker,
// under different application ids, over the same lines, and returns the
// highest count each word reached in the shared counts topic.
func runTwoApplications(t *testing.T, topo *framework.Topology) (got, want map[string]int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	lines := textLines(300)
	want = map[string]int64{}
	words := 0
	for _, l := range lines {
		for _, w := range Words(l) {
			want[w]++
			words++
		}
	}
	b, err := embedded.Start()
	require.NoError(t, err)
	defer b.Close()
	require.NoError(t, feed(ctx, b.Addr(), lines, 2))
	for _, id := range []string{"wordcount-a", "wordcount-b"} {
		cfg := runtime.DefaultConfig()
		cfg.ApplicationID, cfg.BootstrapServers, cfg.StateDir, cfg.HTTPAddr = id, b.Addr(), t.TempDir(), ""
		cfg.CreateTopics, cfg.DefaultPartitions = true, 2
		w, err := runtime.NewStreamThread(cfg, topo, zap.NewNop(), nil)
		require.NoError(t, err)
		require.NoError(t, w.Start(ctx))
		defer func() {
			stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			assert.NoError(t, w.Stop(stopCtx))
		}()
	}
	c, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.ConsumeTopics(CountsTopic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer c.Close()
	got = map[string]int64{}
	// Each application emits one count per word it reads: twice the words
	// in all when each reads only its own repartition topic. What comes
	// after that, until the topic stays quiet, is read too.
	quiet := time.Time{}
	for seen := 0; ctx.Err() == nil; {
		poll, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		fetches := c.PollFetches(poll)
		cancel()
		if fetches.NumRecords() > 0 {
			for it := fetches.RecordIter(); !it.Done(); {
				m := it.Next()
				n, err := serde.Int64().Deserialize(m.Value)
				require.NoError(t, err)
				got[string(m.Key)] = max(got[string(m.Key)], n)
				seen++
			}
			quiet = time.Time{}
			continue
		}
		if seen >= 2*words {
			if quiet.IsZero() {
				quiet = time.Now()
			} else if time.Since(quiet) > 3*time.Second {
				break
			}
		}
	}
	require.NoError(t, ctx.Err())
	return got, want
}

// Two applications running the same topology on one cluster each have
// their own repartition topic, named after the application id: neither
// counts the other's words.
func TestTwoApplicationsDoNotShareInternalTopics(t *testing.T) {
	topo, err := Topology()
	require.NoError(t, err)
	got, want := runTwoApplications(t, topo)
	assert.Equal(t, want, got)
}

// Negative control: the same topology with the words topic shared (a
// plain topic, as every internal topic was before it carried the
// application id) counts each word twice.
func TestSharedWordsTopicCountsTwice(t *testing.T) {
	topo, err := framework.NewBuilder("wordcount").
		Processor("split", operators.FlatMap(text, text, func(_, line string) ([]operators.KV[string, string], error) {
			var out []operators.KV[string, string]
			for _, w := range Words(line) {
				out = append(out, operators.KV[string, string]{Key: w, Value: w})
			}
			return out, nil
		}), framework.From(LinesTopic), framework.To("words")).
		Processor("count", operators.Count(text, CountsStore), framework.From("words"), framework.To(CountsTopic),
			framework.Stores(framework.KeyValueStore(CountsStore))).
		Build()
	require.NoError(t, err)
	got, want := runTwoApplications(t, topo)
	doubled := 0
	for w, n := range want {
		if got[w] == 2*n {
			doubled++
		}
	}
	assert.Equal(t, len(want), doubled, "every word counted by both applications")
}
