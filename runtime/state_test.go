package runtime_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/causeway-stream/causeway/runtime"
)

// After a clean stop, a worker keeping its stores on disk restarts without
// reading a store changelog record back, and its stores are as they were:
// a payment for an order written before the restart finds the order and
// the running count. Kept in memory, the same restart reads them all.
func TestCleanRestartReadsNoStoreChangelogBack(t *testing.T) {
	t.Parallel()
	eachClient(t, func(t *testing.T, client string) {
		for _, tc := range []struct {
			stores       string
			wantRestored bool
		}{
			{runtime.StoresPebble, false},
			{runtime.StoresMemory, true},
		} {
			t.Run(tc.stores, func(t *testing.T) {
				t.Parallel()
				b := startBroker(t)
				createTopics(t, b.Addr(), 2, "orders", "payments", "verdicts")
				produceShop(t, b.Addr(), 20, 2, "clean")
				cfg := testConfigFor(t, client, b.Addr(), "shop-clean")
				cfg.Stores = tc.stores
				first := startTopology(t, cfg, shopTopology(), nil)
				readCommitted(t, b.Addr(), "verdicts", 40, 60*time.Second)
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				require.NoError(t, first.Stop(ctx))

				m := runtime.NewMetrics()
				startTopology(t, cfg, shopTopology(), m)
				sendRecord(t, newProducer(t, b.Addr()), &kgo.Record{Topic: "payments", Key: []byte("clean-o7"), Value: []byte("late")}, nil)
				var late string
				for _, v := range readCommitted(t, b.Addr(), "verdicts", 41, 60*time.Second) {
					if strings.HasPrefix(string(v.Value), "late ") {
						late = string(v.Value)
					}
				}
				assert.Equal(t, "late known=true n=3", late, "the stores after the restart")
				restored := counterSum(t, m.RestoreRecords)
				if tc.wantRestored {
					assert.Positive(t, restored)
				} else {
					assert.Zero(t, restored, "store changelog records read back after a clean stop")
				}
			})
		}
	})
}

// State in the single changelog topic of an earlier Causeway is refused at
// start, with what to do, rather than silently restored as empty.
func TestStateInTheEarlierLayoutIsRefused(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	createTopics(t, b.Addr(), 2, "orders", "payments", "verdicts", "shop-legacy-changelog")
	w, err := runtime.NewStreamThread(testConfig(t, b.Addr(), "shop-legacy"), shopTopology(), nil, nil)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = w.Start(ctx)
	require.ErrorIs(t, err, runtime.ErrLegacyState)
	assert.ErrorContains(t, err, `"shop-legacy-changelog"`)
}
