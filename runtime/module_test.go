package runtime_test

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/causeway-stream/causeway/runtime"
)

// The fx module starts the worker and the HTTP server and stops both.
func TestModuleStartsAndStops(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	createTopics(t, b.Addr(), 1, "orders", "payments", "verdicts")
	cfg := testConfig(t, b.Addr(), "shop-fx")
	cfg.HTTPAddr = "127.0.0.1:0"
	var srv *runtime.Server
	var w *runtime.Worker
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
	app.RequireStop()
	select {
	case <-w.Done():
	default:
		t.Fatal("the worker still runs after the app stopped")
	}
}
