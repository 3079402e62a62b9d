// Package pagetest drives the worker's page in a real browser: headless
// Chromium from Debian's packages (/usr/bin/chromium), through the
// DevTools protocol with chromedp. `make test` installs Chromium when it
// is missing and runs it; `make test-browser` runs it alone, and with
// SCREENSHOT=docs/img/worker-page.png saves the screenshot
// docs/operations.md shows.
package pagetest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/dsl"
	"github.com/causeway-stream/causeway/framework/serde"
	"github.com/causeway-stream/causeway/operators"
	"github.com/causeway-stream/causeway/runtime"
	"github.com/causeway-stream/causeway/runtime/embedded"
)

// shop is a topology worth drawing: payments joined with a table of
// orders, and payments counted per order.
func shop(t *testing.T) *framework.Topology {
	t.Helper()
	text := serde.Codec[string, string]{Key: serde.String(), Value: serde.String()}
	b := dsl.NewBuilder("shop")
	payments := dsl.From(b, "payments", text)
	dsl.LeftJoin(payments, dsl.TableFrom(b, "orders", "orders", text), func(_, pay, order string, found bool) (string, error) {
		if !found {
			return "unknown order", nil
		}
		return "paid: " + order, nil
	}).To("verdicts")
	payments.GroupByKey().Count("payments-per-order").ToStream().To("payment-counts")
	dsl.WindowedBy(payments.GroupByKey(), operators.Tumbling(time.Minute, time.Hour)).Count("payments-per-minute")
	topo, err := b.Build()
	require.NoError(t, err)
	return topo
}

// The page of a running worker (two stream threads) on the embedded
// broker draws the topology and lists every task the worker reports, and
// a screenshot of it is saved (to CAUSEWAY_SCREENSHOT when set, for
// docs/operations.md).
func TestPageShowsTopologyAndTasks(t *testing.T) {
	b, err := embedded.Start()
	require.NoError(t, err)
	defer b.Close()
	cfg := runtime.DefaultConfig()
	cfg.ApplicationID, cfg.BootstrapServers, cfg.StateDir, cfg.HTTPAddr = "shop", b.Addr(), t.TempDir(), ""
	cfg.CreateTopics, cfg.DefaultPartitions = true, 2
	cfg.Threads = 2 // one task each: the page shows the process's threads as one
	// The restart policy, slow enough that the failure below is seen
	// before its first attempt.
	cfg.TaskRestartBackoff, cfg.TaskRestartBackoffMax = 3*time.Second, 10*time.Second
	w, err := runtime.NewInstance(cfg, shop(t), zap.NewNop(), nil)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, w.Start(ctx))
	defer func() { assert.NoError(t, w.Stop(context.Background())) }()
	srv := runtime.NewServer("127.0.0.1:0", w, zap.NewNop())
	require.NoError(t, srv.Start(ctx))
	defer func() { assert.NoError(t, srv.Stop(context.Background())) }()
	// Ready once the group has given each thread its task (the first
	// thread to join holds both until the second joins).
	for !w.Ready() || len(w.Threads()[0].Status().Tasks) != 1 || len(w.Threads()[1].Status().Tasks) != 1 {
		require.NoError(t, ctx.Err(), "the worker never got ready: %+v", w.Status())
		time.Sleep(50 * time.Millisecond)
	}
	// Two payments of one order, counted and committed before the page
	// asks for them.
	p, err := kgo.NewClient(kgo.SeedBrokers(b.Addr())) // murmur2 placement, as the worker finds keys
	require.NoError(t, err)
	// One time for both, so that they fall in one minute's window however
	// slowly they are written.
	paid := time.Now()
	for range 2 {
		require.NoError(t, p.ProduceSync(ctx, &kgo.Record{Topic: "payments", Key: []byte("o-1"), Value: []byte("10 EUR"), Timestamp: paid}).FirstErr())
	}
	p.Close()
	for {
		a, err := w.Query(ctx, runtime.Query{Store: "payments-per-order", Kind: runtime.QueryGet, Key: []byte("o-1")})
		if errors.Is(err, runtime.ErrNotAvailable) { // a task still restoring: ask again
			require.NoError(t, ctx.Err(), "%v", err)
			time.Sleep(50 * time.Millisecond)
			continue
		}
		require.NoError(t, err)
		if len(a.Value) == 8 && a.Value[7] == 2 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}

	bctx := browser(t)
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Navigate("http://"+srv.Addr()+"/"),
		chromedp.WaitVisible(chromedp.CSS(`#diagram svg`)),
		chromedp.WaitVisible(chromedp.CSS(`#tasks tbody td.state-cell`)),
	))
	diagram, err := chromedp.Run(bctx, chromedp.TextContent(chromedp.CSS(`#diagram`)))
	require.NoError(t, err)
	tasks, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(`#tasks tbody`)))
	require.NoError(t, err)
	// The query form asks for the order's count of payments.
	require.NoError(t, chromedp.Do(bctx,
		chromedp.SetValue(chromedp.CSS(`#query-store`), "payments-per-order"),
		chromedp.SendKeys(chromedp.CSS(`#query-key`), "o-1"),
		chromedp.Click(chromedp.CSS(`#query button`)),
		chromedp.WaitVisible(chromedp.CSS(`#answer tbody td + td`)),
	))
	answer, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(`#answer tbody`)))
	require.NoError(t, err)
	assert.Contains(t, answer, "o-1")
	assert.Contains(t, answer, "2", "the count of the order's payments")
	// The form offers the window store too, which answers the key's
	// windows of the last hour.
	require.NoError(t, chromedp.Do(bctx,
		chromedp.SetValue(chromedp.CSS(`#query-store`), "payments-per-minute"),
	))
	// As a person's choice would, the choice of store tells the form.
	kindDisabled, err := chromedp.Run(bctx, chromedp.Evaluate[bool](
		`document.getElementById("query-store").dispatchEvent(new Event("change")), document.getElementById("query-kind").disabled`))
	require.NoError(t, err)
	assert.True(t, kindDisabled, "a window store has no get or prefix to choose")
	require.NoError(t, chromedp.Do(bctx, chromedp.Click(chromedp.CSS(`#query button`))))
	var windows string
	for !strings.Contains(windows, " @ ") { // the get's answer until the windows come
		require.NoError(t, bctx.Err(), "the page never showed the windows: %q", windows)
		windows, err = chromedp.Run(bctx, chromedp.Text(chromedp.CSS(`#answer tbody`)))
		require.NoError(t, err)
		time.Sleep(20 * time.Millisecond)
	}
	assert.Regexp(t, `o-1 @ \d{4}-\d\d-\d\dT\d\d:\d\d:00Z\s+2\b`, windows, "the order's minute, with its two payments")
	shot, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	for _, topic := range []string{"payments", "orders", "verdicts", "payment-counts"} {
		assert.Contains(t, diagram, topic, "the diagram names every topic")
	}
	st := w.Status()
	require.NotEmpty(t, st.Tasks)
	for _, ts := range st.Tasks {
		assert.Contains(t, tasks, ts.ID, "the task table lists every task")
	}
	assert.Contains(t, tasks, "RUNNING")
	out := os.Getenv("CAUSEWAY_SCREENSHOT")
	if out == "" {
		out = filepath.Join(t.TempDir(), "page.png")
	}
	require.NoError(t, os.WriteFile(out, shot, 0o644))
	assert.Greater(t, len(shot), 10_000, "a screenshot of a rendered page")
	assert.False(t, strings.Contains(tasks, "no tasks assigned"))
	badge, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(`#ready`)))
	require.NoError(t, err)
	assert.Equal(t, "ready", badge)

	// A record with a corrupt clock fails its task: the badge turns to a
	// red "degraded", and the page says which task and why.
	p, err = kgo.NewClient(kgo.SeedBrokers(b.Addr()))
	require.NoError(t, err)
	defer p.Close()
	require.NoError(t, p.ProduceSync(ctx, &kgo.Record{Topic: "payments", Key: []byte("o-1"), Value: []byte("5 EUR"),
		Headers: []kgo.RecordHeader{{Key: causal.HeaderKey, Value: []byte{0xff}}}}).FirstErr())
	for !w.Status().Degraded {
		require.NoError(t, ctx.Err(), "no task failed on the corrupt record: %+v", w.Status())
		time.Sleep(50 * time.Millisecond)
	}
	require.NoError(t, chromedp.Do(bctx, chromedp.WaitVisible(chromedp.CSS(`#worker-error`))))
	badge, err = chromedp.Run(bctx, chromedp.Text(chromedp.CSS(`#ready`)))
	require.NoError(t, err)
	class, err := chromedp.Run(bctx, chromedp.AttributeValue(chromedp.CSS(`#ready`), "class"))
	require.NoError(t, err)
	assert.Equal(t, "degraded", badge)
	assert.Contains(t, class.Value, "bad", "red")
	problem, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(`#worker-error`)))
	require.NoError(t, err)
	assert.Contains(t, problem, "1 task FAILED")
	assert.Contains(t, problem, "corrupt clock header on payments/")

	// The restart policy tries the task again (it fails again on the same
	// record), and the task table says how often and when next.
	var restarts string
	for !strings.Contains(restarts, "1 attempt, next at") {
		require.NoError(t, bctx.Err(), "the page never showed the restart: %q", restarts)
		restarts, err = chromedp.Run(bctx, chromedp.Text(chromedp.CSS(`#tasks tbody`)))
		require.NoError(t, err)
		time.Sleep(50 * time.Millisecond)
	}
}

// Two workers with a standby replica each keep a copy of the other's
// tasks: the page of one lists its copies, their role and their lag.
func TestPageShowsStandbyCopies(t *testing.T) {
	b, err := embedded.Start()
	require.NoError(t, err)
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var workers []*runtime.Instance
	for range 2 {
		cfg := runtime.DefaultConfig()
		cfg.ApplicationID, cfg.BootstrapServers, cfg.StateDir, cfg.HTTPAddr = "shop", b.Addr(), t.TempDir(), ""
		cfg.CreateTopics, cfg.DefaultPartitions, cfg.StaticMembership = true, 2, false
		cfg.Client, cfg.StandbyReplicas = runtime.ClientFranz, 1
		w, err := runtime.NewInstance(cfg, shop(t), zap.NewNop(), nil)
		require.NoError(t, err)
		require.NoError(t, w.Start(ctx))
		defer func() { assert.NoError(t, w.Stop(context.Background())) }()
		workers = append(workers, w)
	}
	// Each worker runs one of the two partitions' tasks and stands by for
	// the other's, once the copies have had a round.
	copied := func(st runtime.Status) bool {
		return len(st.Standbys) > 0 && st.Standbys[0].Lag != nil
	}
	for !copied(workers[0].Status()) || !copied(workers[1].Status()) {
		require.NoError(t, ctx.Err(), "no standby copies: %+v, %+v", workers[0].Status(), workers[1].Status())
		time.Sleep(50 * time.Millisecond)
	}
	srv := runtime.NewServer("127.0.0.1:0", workers[0], zap.NewNop())
	require.NoError(t, srv.Start(ctx))
	defer func() { assert.NoError(t, srv.Stop(context.Background())) }()

	bctx := browser(t)
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Navigate("http://"+srv.Addr()+"/"),
		chromedp.WaitVisible(chromedp.CSS(`#standbys tbody td + td + td`)),
	))
	copies, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(`#standbys tbody`)))
	require.NoError(t, err)
	st := workers[0].Status()
	for _, c := range st.Standbys {
		assert.Contains(t, copies, c.ID, "the table lists every copy")
	}
	for _, ts := range st.Tasks {
		assert.NotContains(t, copies, ts.ID+"\t", "a task the worker runs is no copy of its own")
	}
	assert.Contains(t, copies, "STANDBY")
	assert.NotContains(t, copies, "no copies")
}
