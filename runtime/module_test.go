package runtime_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.uber.org/zap/zaptest"

	"github.com/causeway-stream/causeway/runtime"
)

// The fx module starts the worker process, with one stream thread or two,
// and the HTTP server, and stops both.
func TestModuleStartsAndStops(t *testing.T) {
	t.Parallel()
	for _, threads := range []int{1, 2} {
		t.Run(fmt.Sprint(threads, " threads"), func(t *testing.T) {
			t.Parallel()
			b := startBroker(t)
			createTopics(t, b.Addr(), 2, "orders", "payments", "verdicts")
			cfg := testConfig(t, b.Addr(), "shop-fx")
			cfg.HTTPAddr = "127.0.0.1:0"
			cfg.Threads = threads
			var srv *runtime.Server
			var w *runtime.Instance
			app := fxtest.New(t, fx.Supply(cfg, shopTopology()), runtime.Module, fx.Populate(&srv, &w))
			app.RequireStart()
			require.NotNil(t, srv)
			resp, err := http.Get("http://" + srv.Addr() + "/healthz")
			require.NoError(t, err)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			assert.Equal(t, http.StatusOK, resp.StatusCode)
			assert.Equal(t, "ok\n", string(body))
			require.Eventually(t, w.Ready, 30*time.Second, 50*time.Millisecond)
			require.Len(t, w.Threads(), threads)
			if threads > 1 {
				// The group gives each thread one of the two tasks.
				require.Eventually(t, func() bool {
					for _, th := range w.Threads() {
						if len(th.Status().Tasks) != 1 {
							return false
						}
					}
					return len(w.Status().Tasks) == 2
				}, 30*time.Second, 50*time.Millisecond)
			}
			app.RequireStop()
			select {
			case <-w.Done():
			default:
				t.Fatal("the worker still runs after the app stopped")
			}
		})
	}
}

// Without bootstrap servers, a process of two threads starts one embedded
// broker, which both threads use: they join one group and share the
// tasks, under instance ids derived from the process's.
func TestThreadsShareTheEmbeddedBroker(t *testing.T) {
	t.Parallel()
	cfg := runtime.DefaultConfig()
	cfg.ApplicationID, cfg.StateDir, cfg.HTTPAddr, cfg.CreateTopics, cfg.DefaultPartitions = "embedded-threads", t.TempDir(), "", true, 2
	cfg.InstanceID, cfg.Threads = "proc", 2
	in, err := runtime.NewInstance(cfg, shopTopology(), zaptest.NewLogger(t), nil)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, in.Start(ctx))
	defer func() { assert.NoError(t, in.Stop(context.Background())) }()
	threads := in.Threads()
	require.Eventually(t, func() bool {
		return in.Ready() && len(in.Status().Tasks) == 2 && len(threads[0].Status().Tasks) == 1 && len(threads[1].Status().Tasks) == 1
	}, 30*time.Second, 50*time.Millisecond, "%+v", in.Status())
	assert.Equal(t, threads[0].Bootstrap(), threads[1].Bootstrap(), "one broker")
	assert.Equal(t, "proc", in.Status().InstanceID)
	var onThread []int
	for _, ts := range in.Status().Tasks {
		onThread = append(onThread, ts.Thread)
	}
	assert.ElementsMatch(t, []int{0, 1}, onThread, "the status says which thread runs each task")
	assert.Equal(t, []string{"proc-0", "proc-1"}, []string{threads[0].Status().InstanceID, threads[1].Status().InstanceID})
}
