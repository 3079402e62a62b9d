package runtime

import (
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/causal"
)

// The pump counts the records it takes from each input topic in runs, not
// one at a time, and each topic's records-in counter has every record of
// it the pump handled once each batch is handled, whichever channels the
// batch mixed and wherever a run of one channel broke off.
func TestRecordsInCountsEveryHandledRecordByTheEndOfEachBatch(t *testing.T) {
	var poisoned atomic.Bool
	topo, counts := twoReaders(t, &poisoned)
	fake := newFakeKafka(t)
	w := newFakeWorker(t, fake, topo, counts)
	var err error
	w.loop, err = w.newLoop(4)
	require.NoError(t, err)
	w.fate = &w.loop.Fate
	recordsIn := func(topic string) float64 {
		return testutil.ToFloat64(w.metrics.RecordsIn.WithLabelValues(topic))
	}

	var sent []causal.Channel // in the order the consumer hands them out
	for _, run := range []struct {
		ch causal.Channel
		n  int
	}{{in0, 5}, {side0, 3}, {in1, 1}, {side0, 2}, {in0, 6}} {
		for range run.n {
			fake.send(run.ch, "k")
			sent = append(sent, run.ch)
		}
	}
	handled := map[string]float64{}
	for n := pollAndHandle(w); n > 0; n = pollAndHandle(w) {
		require.NoError(t, w.fate.Fatal())
		for _, ch := range sent[:n] {
			handled[ch.Topic]++
		}
		sent = sent[n:]
		assert.Equal(t, handled["in"], recordsIn("in"), "in, after a batch of %d", n)
		assert.Equal(t, handled["side"], recordsIn("side"), "side, after a batch of %d", n)
	}
	assert.Empty(t, sent)
	assert.Equal(t, map[string]float64{"in": 12, "side": 5}, handled)
}
