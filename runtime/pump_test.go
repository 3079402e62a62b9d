package runtime

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/runtime/internal/transport"
)

// The pump leaves handled events in its batch's array for the next batch
// to write over, but once the consumer has nothing to give it lets go of
// them: an idle worker keeps no fetched record alive through them.
func TestIdlePumpLetsGoOfHandledEvents(t *testing.T) {
	w := &StreamThread{log: zaptest.NewLogger(t)}
	p := &w.pump
	for _, n := range []int{3, 1} { // a smaller batch leaves more behind it
		for range n {
			p.polled = append(p.polled, transport.Event{Kind: transport.EventError, Msg: transport.Message{Topic: "in", Value: []byte("v")}, Err: errors.New("e")})
		}
		w.handlePolled()
		require.Empty(t, p.polled)
	}
	kept := p.polled[:3]
	assert.Equal(t, transport.EventError, kept[2].Kind, "the events are cleared after every batch already")

	w.handlePolled() // the consumer had nothing
	assert.Equal(t, []transport.Event{{}, {}, {}}, kept, "an idle pump still holds events it handled")
}

// The pump counts the records it takes from each input topic in runs, not
// one at a time, and each topic's records-in counter has every record of
// it the pump handled once each batch is handled, whichever channels the
// batch mixed and wherever a run of one channel broke off.
func TestRecordsInCountsEveryHandledRecordByTheEndOfEachBatch(t *testing.T) {
	var poisoned atomic.Bool
	topo, counts := twoReaders(t, &poisoned)
	fake := newFakeKafka(t)
	w := newFakeWorker(t, fake, topo, counts)
	w.pump.batch = 4
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
	for n := w.poll(); n > 0; n = w.poll() {
		w.handlePolled()
		require.NoError(t, w.fate.fatal)
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

// A due commit waits while the consumer hands out full batches, which say
// it has more records ready, but never past a tenth of the interval; a
// batch that is not full, or none, lets it go ahead at once.
func TestCommitDueWaitsForReadyRecordsUpToATenthOfTheInterval(t *testing.T) {
	const batch = 512
	w := &StreamThread{cfg: Config{CommitInterval: 100 * time.Millisecond}}
	w.pump.batch = batch
	next := time.Unix(1_700_000_000, 0)
	for _, c := range []struct {
		name   string
		over   time.Duration // how far past next the pump is
		polled int
		want   bool
	}{
		{"not due, full batch", -time.Millisecond, batch, false},
		{"not due, batch not full", -time.Millisecond, 3, false},
		{"due, batch not full", 0, batch - 1, true},
		{"due, nothing polled", 0, 0, true},
		{"due, full batch", 0, batch, false},
		{"overdue within the tenth, full batch", 9 * time.Millisecond, batch, false},
		{"overdue by the tenth, full batch", 10 * time.Millisecond, batch, true},
		{"overdue past the tenth, full batch", 50 * time.Millisecond, batch, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			w.pump.time = next.Add(c.over)
			assert.Equal(t, c.want, w.commitDue(next, c.polled))
		})
	}
}
