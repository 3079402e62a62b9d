package runtime_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap/zaptest"

	"github.com/causeway-stream/causeway/runtime"
)

// Faults injected into the broker's answers: the worker either rides
// through them or fails loudly, and what it committed is never wrong.
func TestFaults(t *testing.T) {
	t.Parallel()
	eachClient(t, func(t *testing.T, client string) {
		tests := []struct {
			name      string
			fault     kfake.Fault
			wantAbort bool
		}{
			{"retriable produce errors", kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "verdicts", Err: kerr.NotEnoughReplicas, Count: 5}, false},
			{"coordinator unavailable for transactions", kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn, kmsg.AddOffsetsToTxn, kmsg.TxnOffsetCommit},
				Err: kerr.CoordinatorNotAvailable, Count: 6}, false},
			{"a produce error that aborts the transaction", kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "verdicts", Err: kerr.InvalidRecord, Count: 1}, true},
			{"group coordinator unavailable for offset fetches", kfake.Fault{Keys: []kmsg.Key{kmsg.OffsetFetch}, Err: kerr.CoordinatorLoadInProgress, Count: 3}, false},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				b := startBroker(t)
				createTopics(t, b.Addr(), 2, "orders", "payments", "verdicts")
				h := b.Cluster().Fault(tt.fault)
				wl := produceShop(t, b.Addr(), 5, 4, "f")
				m := runtime.NewMetrics()
				w := startWorkerWith(t, testConfigFor(t, client, b.Addr(), "shop-faults"), m)
				verdicts := readCommitted(t, b.Addr(), "verdicts", 20, 60*time.Second)
				assert.Empty(t, checkVerdicts(wl, verdicts))
				assert.Len(t, verdicts, 20)
				assert.NoError(t, w.Err())
				assert.Positive(t, h.Hits(), "the fault never fired")
				if tt.wantAbort {
					assert.Positive(t, testutil.ToFloat64(m.Aborts), "the transaction was never aborted")
				}
				h.Remove()
			})
		}
	})
}

// Fencing: another producer takes over the worker's transactional id. The
// worker must stop with an error saying so, and a worker started again from
// the same state dir finishes the work exactly once.
func TestProducerFencingFailsLoudly(t *testing.T) {
	t.Parallel()
	eachClient(t, func(t *testing.T, client string) {
		b := startBroker(t)
		createTopics(t, b.Addr(), 2, "orders", "payments", "verdicts")
		wl := produceShop(t, b.Addr(), 5, 4, "fence")
		cfg := testConfigFor(t, client, b.Addr(), "shop-fence")
		cfg.InstanceID = "one"
		w, err := runtime.NewStreamThread(cfg, shopTopology(), zaptest.NewLogger(t), nil)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(t, w.Start(ctx))
		readCommitted(t, b.Addr(), "verdicts", 20, 30*time.Second)

		zombie, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.TransactionalID("shop-fence-one"))
		require.NoError(t, err)
		_, _, err = zombie.ProducerID(ctx) // InitProducerID: a newer epoch for the worker's transactional id
		require.NoError(t, err)
		zombie.Close()
		more := produceShop(t, b.Addr(), 5, 2, "after")
		for k, v := range more.payments {
			wl.payments[k] = v
		}
		select {
		case <-w.Done():
		case <-time.After(30 * time.Second):
			t.Fatal("the fenced worker kept running")
		}
		require.Error(t, w.Err())
		assert.True(t, strings.Contains(strings.ToLower(w.Err().Error()), "fenced"), w.Err().Error())
		require.ErrorIs(t, w.Stop(ctx), w.Err())

		startWorker(t, cfg)
		verdicts := readCommitted(t, b.Addr(), "verdicts", 30, 60*time.Second)
		assert.Empty(t, checkVerdicts(wl, verdicts))
		assert.Len(t, verdicts, 30)
	})
}
