package runtime_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A worker started before its topics exist waits for them, serving
// /healthz, /readyz and /status meanwhile, which name them; once they are
// created it runs. With --topic-wait-timeout 0 (what a worker did before)
// it exits at once, naming them.
func TestAWorkerWaitsForItsTopicsAndSaysSo(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	const app = "shop-topic-wait"
	w := spawnWorker(t, b.Addr(), app, t.TempDir(), "--http-addr", "127.0.0.1:0", "--topic-wait-timeout", "2m")
	addr := w.servingAddr(30 * time.Second)
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	require.Eventually(t, func() bool {
		code, body := get("/status")
		return code == 200 && strings.Contains(body, `"starting": "waiting for topics [orders payments verdicts] to exist`)
	}, 30*time.Second, 100*time.Millisecond, "/status never named the missing topics: %s", w.tail())
	code, body := get("/readyz")
	assert.Equal(t, 503, code)
	assert.Contains(t, body, "waiting for topics [orders payments verdicts]")
	code, _ = get("/healthz")
	assert.Equal(t, 200, code)
	code, body = get("/stores/orders/get?key=a")
	assert.Equal(t, 503, code, "a query while the worker starts is told to come back")
	assert.Contains(t, body, "the worker is starting: waiting for topics")

	createTopics(t, b.Addr(), 1, "orders", "payments", "verdicts")
	wl := produceShop(t, b.Addr(), 2, 1, "w")
	verdicts := readCommitted(t, b.Addr(), "verdicts", wl.count(), 60*time.Second)
	assert.Empty(t, checkVerdicts(wl, verdicts), w.tail())
	require.NoError(t, w.stop(30*time.Second), w.tail())

	impatient := spawnWorker(t, startBroker(t).Addr(), app, t.TempDir(), "--topic-wait-timeout", "0")
	select {
	case <-impatient.done:
		assert.Contains(t, impatient.logs.String(), "do not exist: create them, or run with --create-topics")
	case <-time.After(60 * time.Second):
		t.Fatal("a worker that may not wait did not exit")
	}
}
