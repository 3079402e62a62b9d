package runtime_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/causeway-stream/causeway/runtime"
)

// Records deleted (retention, truncation) before a task processed them are
// lost: the task fails, naming the channel and the offsets, unless the
// application opted into resets.
func TestOffsetOutOfRangeFailsTaskUnlessAllowed(t *testing.T) {
	t.Parallel()
	eachClient(t, func(t *testing.T, client string) {
		b := startBroker(t)
		createTopics(t, b.Addr(), 1, "orders", "payments", "verdicts")
		produceShop(t, b.Addr(), 2, 2, "before")
		cfg := testConfigFor(t, client, b.Addr(), "shop-reset")
		w, err := runtime.NewStreamThread(cfg, shopTopology(), zaptest.NewLogger(t), nil)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		require.NoError(t, w.Start(ctx))
		readCommitted(t, b.Addr(), "verdicts", 4, 30*time.Second)
		require.NoError(t, w.Stop(ctx))

		produceShop(t, b.Addr(), 2, 3, "after") // payments/0 now runs to offset 9
		require.NoError(t, b.Cluster().DeleteRecords("payments", 0, 8))

		failing := startWorker(t, cfg)
		require.Eventually(t, func() bool {
			for _, ts := range failing.Status().Tasks {
				if ts.ID == "ledger/0" && ts.State == runtime.StateFailed {
					return strings.Contains(ts.LastError, "committed offset 4 of payments/0 is outside the log [8, 10]")
				}
			}
			return false
		}, 30*time.Second, 50*time.Millisecond, "status: %+v", failing.Status())
		require.NoError(t, failing.Stop(ctx))

		cfg.AllowOffsetReset = true
		startWorker(t, cfg)
		verdicts := readCommitted(t, b.Addr(), "verdicts", 6, 30*time.Second)
		assert.Len(t, verdicts, 6, "the 4 from before and the 2 payments left after offset 8")
	})
}
