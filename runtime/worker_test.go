package runtime_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap/zaptest"

	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/runtime"
	"github.com/causeway-stream/causeway/runtime/embedded"
)

func testConfig(t *testing.T, addr, app string) runtime.Config {
	t.Helper()
	cfg := runtime.DefaultConfig()
	cfg.ApplicationID = app
	cfg.BootstrapServers = addr
	cfg.StateDir = t.TempDir()
	cfg.HTTPAddr = ""
	return cfg
}

// testConfigFor is testConfig for a worker on the given client library.
func testConfigFor(t *testing.T, client, addr, app string) runtime.Config {
	t.Helper()
	cfg := testConfig(t, addr, app)
	cfg.Client = client
	return cfg
}

// eachClient runs test once per Kafka client library built into the
// worker, in parallel subtests named after them. The broker tests that
// hold the worker's guarantees (exactly once, causal order, crashes,
// rebalances, faults, bad input) run through it, so that every transport
// passes the same suite, as watermill runs one pub/sub suite against each
// of its backends.
func eachClient(t *testing.T, test func(t *testing.T, client string)) {
	t.Helper()
	for _, client := range runtime.Clients() {
		t.Run(client, func(t *testing.T) {
			t.Parallel()
			test(t, client)
		})
	}
}

func startWorker(t *testing.T, cfg runtime.Config) *runtime.StreamThread {
	t.Helper()
	return startWorkerWith(t, cfg, nil)
}

func startWorkerWith(t *testing.T, cfg runtime.Config, m *runtime.Metrics) *runtime.StreamThread {
	t.Helper()
	return startTopology(t, cfg, shopTopology(), m)
}

func startTopology(t *testing.T, cfg runtime.Config, topo *framework.Topology, m *runtime.Metrics) *runtime.StreamThread {
	t.Helper()
	w, err := runtime.NewStreamThread(cfg, topo, zaptest.NewLogger(t), m)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, w.Start(ctx))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		assert.NoError(t, w.Stop(ctx))
	})
	return w
}

// End to end: a worker processes causally stamped orders and payments with
// state, and the committed verdicts are exactly once and in causal order.
func TestEndToEndExactlyOnce(t *testing.T) {
	t.Parallel()
	eachClient(t, func(t *testing.T, client string) {
		b := startBroker(t)
		createTopics(t, b.Addr(), 2, "orders", "payments", "verdicts")
		wl := produceShop(t, b.Addr(), 6, 5, "e2e")
		startWorker(t, testConfigFor(t, client, b.Addr(), "shop-e2e"))
		verdicts := readCommitted(t, b.Addr(), "verdicts", 30, 60*time.Second)
		assert.Empty(t, checkVerdicts(wl, verdicts))
		assert.Len(t, verdicts, 30)
	})
}

// lagOrders makes the orders topic unreadable (fetches fail) until the
// returned function is called: payments then reach the worker before the
// orders they depend on.
func lagOrders(t *testing.T, b *embedded.Broker) (release func()) {
	t.Helper()
	h := b.Cluster().Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Topic: "orders", Err: kerr.NotLeaderForPartition, Count: -1})
	return func() { h.Remove() }
}

func runLaggingShop(t *testing.T, client string, gateOff bool) (problems []string, sawBlocked bool, m *runtime.Metrics) {
	t.Helper()
	b := startBroker(t)
	createTopics(t, b.Addr(), 2, "orders", "payments", "verdicts")
	wl := produceShop(t, b.Addr(), 6, 5, "lag")
	release := lagOrders(t, b)
	cfg := testConfigFor(t, client, b.Addr(), "shop-lag")
	cfg.GateOff = gateOff
	m = runtime.NewMetrics()
	w := startWorkerWith(t, cfg, m)
	// Let payments arrive while the orders cannot be read: for 3 s, and
	// on a loaded machine until the status shows one waiting, or with the
	// gate off until verdicts were written (or 30 s): a worker that took
	// longer than the lag to start would otherwise see the orders first.
	lagged, deadline := time.Now().Add(3*time.Second), time.Now().Add(30*time.Second)
	seen := func() bool { return (!gateOff && sawBlocked) || (gateOff && verdictsWritten(t, b.Addr()) > 0) }
	for now := time.Now(); now.Before(lagged) || (!seen() && now.Before(deadline)); now = time.Now() {
		for _, ts := range w.Status().Tasks {
			for _, c := range ts.Channels {
				if c.Blocked && strings.HasPrefix(c.WaitingFor, "orders/") && c.BlockedSince != nil {
					sawBlocked = true
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	release()
	verdicts := readCommitted(t, b.Addr(), "verdicts", 30, 60*time.Second)
	return checkVerdicts(wl, verdicts), sawBlocked, m
}

// With the orders partition lagging, payments wait at the gate (and
// /status says what for); every verdict still sees its order.
func TestGateHoldsPaymentsWhileOrdersLag(t *testing.T) {
	t.Parallel()
	eachClient(t, func(t *testing.T, client string) {
		problems, sawBlocked, m := runLaggingShop(t, client, false)
		assert.Empty(t, problems)
		assert.True(t, sawBlocked, "status never showed a payment waiting for its order")
		// The gate-wait histogram times the records that waited, and only
		// those: the payments held for seconds, not the orders (or the
		// payments after them) delivered in the poll that brought them.
		var wait dto.Metric
		require.NoError(t, m.GateWait.(prometheus.Metric).Write(&wait))
		waited, waitedFor := wait.GetHistogram().GetSampleCount(), wait.GetHistogram().GetSampleSum()
		delivered := counterSum(t, m.Deliveries)
		require.Positive(t, waited, "no delivery was timed")
		assert.Less(t, float64(waited), delivered, "records delivered on arrival were timed too")
		mean := waitedFor / float64(waited)
		assert.Greater(t, mean, 0.1, "mean wait %.3fs of %d timed deliveries: the held payments waited for seconds", mean, waited)
	})
}

// counterSum adds up every series of a counter vector.
func counterSum(t *testing.T, v *prometheus.CounterVec) float64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 64)
	go func() { v.Collect(ch); close(ch) }()
	sum := 0.0
	for c := range ch {
		var d dto.Metric
		require.NoError(t, c.Write(&d))
		sum += d.GetCounter().GetValue()
	}
	return sum
}

// Negative control: the same run with the gate off processes payments for
// orders it has not seen.
func TestWithoutGateLaggingOrdersCauseAnomalies(t *testing.T) {
	t.Parallel()
	eachClient(t, func(t *testing.T, client string) {
		problems, _, _ := runLaggingShop(t, client, true)
		causalProblems := 0
		for _, p := range problems {
			if strings.HasPrefix(p, "causal:") {
				causalProblems++
			}
		}
		assert.Positive(t, causalProblems, "problems: %v", problems)
	})
}
