package runtime_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/causeway-stream/causeway/runtime"
)

// A revocation can come in the middle of a poll batch: librdkafka runs the
// rebalance callback inside Poll, after the pump has taken some events of
// the batch and before it has handled them. Those events belong to the
// assignment being revoked, so the callback handles them first and the
// commit it makes covers them. With the gate off every record is delivered
// on arrival, so the committed offset of each partition must be one past
// the last record the consumer handed out before the revocation.
func TestRevocationMidBatchCommitsWhatWasTaken(t *testing.T) {
	t.Parallel()
	eachClient(t, func(t *testing.T, client string) {
		b := startBroker(t)
		createTopics(t, b.Addr(), 1, "orders", "payments", "verdicts")
		produceShop(t, b.Addr(), 3, 5, "mid")
		cfg := testConfigFor(t, client, b.Addr(), "shop-mid")
		cfg.GateOff = true
		w, err := runtime.NewStreamThread(cfg, shopTopology(), zaptest.NewLogger(t), nil)
		require.NoError(t, err)

		var mu sync.Mutex
		taken := map[string]int64{} // topic -> offset of the last record handed out
		revoked := false
		runtime.RevokeInABatch(w, 4, func(topic string, offset int64) {
			mu.Lock()
			defer mu.Unlock()
			taken[topic] = offset
		}, func() {
			mu.Lock()
			defer mu.Unlock()
			revoked = true
		})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(t, w.Start(ctx))
		require.Eventually(t, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return revoked
		}, 30*time.Second, 20*time.Millisecond, "the consumer never handed out a batch to revoke in")
		require.NoError(t, w.Stop(ctx))

		mu.Lock()
		defer mu.Unlock()
		require.NotEmpty(t, taken)
		for topic, last := range taken {
			assert.Equal(t, last+1, committedOffset(t, b.Addr(), "shop-mid", topic, 0),
				"%s/0: the records taken before the revocation were not all committed by it", topic)
		}
	})
}
