package runtime_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/runtime"
)

// A record that claims an offset its channel never reaches is surfaced as
// an error naming the claim, instead of waiting silently.
func TestClaimBeyondTheEndFailsTheTask(t *testing.T) {
	t.Parallel()
	eachClient(t, func(t *testing.T, client string) {
		b := startBroker(t)
		createTopics(t, b.Addr(), 1, "orders", "payments", "verdicts")
		p := newProducer(t, b.Addr(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		bogus, err := causal.NewClock(causal.Entry{Channel: causal.Channel{Topic: "orders"}, Offset: 41})
		require.NoError(t, err)
		sendRecord(t, p, &kgo.Record{Topic: "orders", Key: []byte("a"), Value: []byte("order a")}, nil)
		sendRecord(t, p, &kgo.Record{Topic: "payments", Key: []byte("a"), Value: []byte("a-p0"),
			Headers: []kgo.RecordHeader{{Key: causal.HeaderKey, Value: causal.EncodeClock(bogus)}}}, nil)

		w := startWorker(t, testConfigFor(t, client, b.Addr(), "shop-bogus"))
		waitForFailure(t, w, "payments/0@0 claims orders/0 up to offset 41, which can never be met: orders/0 ends at offset 0")
	})
}

// With the check at entry off, a worker finds such a claim from where its
// consumer stands once the head has waited a while; this too after a
// restart, when the claimed partition has had nothing new to read since
// it was assigned, so that its position is where reading started.
func TestClaimBeyondTheEndFailsTheTaskAfterARestart(t *testing.T) {
	t.Parallel()
	eachClient(t, func(t *testing.T, client string) {
		b := startBroker(t)
		createTopics(t, b.Addr(), 1, "orders", "payments", "verdicts")
		p := newProducer(t, b.Addr())
		sendRecord(t, p, &kgo.Record{Topic: "orders", Key: []byte("a"), Value: []byte("order a")}, nil)
		cfg := testConfigFor(t, client, b.Addr(), "shop-bogus-later")
		cfg.CheckClaims = false
		first := startWorker(t, cfg)
		require.Eventually(t, func() bool { return committedOffset(t, b.Addr(), cfg.ApplicationID, "orders", 0) == 1 },
			30*time.Second, 50*time.Millisecond, "the order was never committed")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(t, first.Stop(ctx))

		w := startWorker(t, cfg)
		bogus, err := causal.NewClock(causal.Entry{Channel: causal.Channel{Topic: "orders"}, Offset: 41})
		require.NoError(t, err)
		sendRecord(t, p, &kgo.Record{Topic: "payments", Key: []byte("a"), Value: []byte("a-p0"),
			Headers: []kgo.RecordHeader{{Key: causal.HeaderKey, Value: causal.EncodeClock(bogus)}}}, nil)
		waitForFailure(t, w, "payments/0@0 claims orders/0 up to offset 41, which can never be met")
		// A failed task waits for an operator, not for a cause: its
		// channels say so.
		require.Eventually(t, func() bool {
			for _, ts := range w.Status().Tasks {
				for _, c := range ts.Channels {
					if ts.State == runtime.StateFailed && c.Blocked {
						return false
					}
				}
			}
			return true
		}, 10*time.Second, 100*time.Millisecond, "the failed task still lists a blocked channel")
	})
}

// waitForFailure waits for a task of w to fail with an error saying what.
func waitForFailure(t *testing.T, w *runtime.StreamThread, what string) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, ts := range w.Status().Tasks {
			if ts.State == runtime.StateFailed {
				return strings.Contains(ts.LastError, what)
			}
		}
		return false
	}, 30*time.Second, 100*time.Millisecond, "no task failed saying %q", what)
}

// A claim on a record of a transaction still open is a claim below the
// partition's high watermark: it waits for the commit, however long that
// takes, and fails nothing. A producer that writes a cause in a
// transaction learns its offset from the delivery report before the
// commit, so an effect acked meanwhile may claim it. A claim on a topic
// the worker reads is checked against the log once its head has waited
// (taskmgr.UnsatisfiableAfter); one on a topic it does not read, as the
// record arrives.
func TestClaimOnAnOpenTransactionWaitsForItsCommit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// cause is the topic the transaction writes the claimed record to.
		cause string
	}{
		{"on a topic the worker reads", "orders"},
		{"on a topic the worker does not read", "drafts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			eachClient(t, func(t *testing.T, client string) {
				b := startBroker(t)
				createTopics(t, b.Addr(), 1, "orders", "payments", "verdicts", "drafts")
				p := newProducer(t, b.Addr())
				s := &causal.Session{}
				if tc.cause != "orders" {
					sendRecord(t, p, &kgo.Record{Topic: "orders", Key: []byte("a"), Value: []byte("order a")}, s)
				}
				txn := newProducer(t, b.Addr(), kgo.TransactionalID("late-"+client))
				require.NoError(t, txn.BeginTransaction())
				value := "order a"
				if tc.cause != "orders" {
					value = "draft a"
				}
				sendRecord(t, txn, &kgo.Record{Topic: tc.cause, Key: []byte("a"), Value: []byte(value)}, s)
				sendRecord(t, p, &kgo.Record{Topic: "payments", Key: []byte("a"), Value: []byte("a-p0")}, s)

				w := startWorker(t, testConfigFor(t, client, b.Addr(), "shop-open-txn"))
				// Longer than a head waits before its claims are checked
				// against the log (taskmgr.UnsatisfiableAfter, 3 s).
				require.Never(t, func() bool {
					for _, ts := range w.Status().Tasks {
						if ts.State == runtime.StateFailed {
							t.Logf("failed: %s", ts.LastError)
							return true
						}
					}
					return false
				}, 4500*time.Millisecond, 100*time.Millisecond, "a task failed on a claim on an open transaction")
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				require.NoError(t, txn.EndTransaction(ctx, kgo.TryCommit))

				verdicts := readCommitted(t, b.Addr(), "verdicts", 1, 30*time.Second)
				require.Len(t, verdicts, 1)
				assert.Equal(t, "a-p0 known=true n=1", string(verdicts[0].Value))
			})
		})
	}
}
