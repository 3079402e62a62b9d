package runtime_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/internal/testport"
	"github.com/causeway-stream/causeway/runtime/embedded"
)

// holdPort holds a port nothing listens on, refusing connections, until
// it is released or the test ends (testport).
func holdPort(t *testing.T) *testport.Held {
	t.Helper()
	h, err := testport.Hold(0)
	require.NoError(t, err)
	t.Cleanup(h.Release)
	return h
}

// Both clients treat a cluster they cannot reach alike: they retry with
// backoff, logging the address and the cause of each failure, and give up
// after --connect-timeout with exit code 1 and an error naming both; a
// cluster that comes up while they retry is joined.
func TestAnUnreachableClusterIsRetriedThenRefusedOnBothClients(t *testing.T) {
	t.Parallel()
	eachClient(t, func(t *testing.T, client string) {
		t.Run("never up", func(t *testing.T) {
			t.Parallel()
			held := holdPort(t)
			addr := fmt.Sprintf("127.0.0.1:%d", held.Port)
			start := time.Now()
			w := spawnWorker(t, addr, "unreachable", t.TempDir(), "--client", client, "--connect-timeout", "3s")
			code := w.exited(30 * time.Second)
			took := time.Since(start)
			require.NotEqual(t, -1, code, "still running after 30s:\n%s", w.tail())
			assert.Equal(t, 1, code, w.tail())
			assert.GreaterOrEqual(t, took, 3*time.Second, "gave up before the connect timeout")
			logs := w.logs.String()
			assert.Contains(t, logs, fmt.Sprintf("cannot reach Kafka at %s within 3s", addr))
			assert.Contains(t, logs, "connect: connection refused", "the cause")
			assert.GreaterOrEqual(t, strings.Count(logs, "Kafka not reachable yet; retrying"), 3, "retried with backoff:\n%s", w.tail())
		})
		t.Run("up late", func(t *testing.T) {
			t.Parallel()
			held := holdPort(t)
			port := held.Port
			addr := fmt.Sprintf("127.0.0.1:%d", port)
			w := spawnWorker(t, addr, "unreachable-late", t.TempDir(), "--client", client, "--connect-timeout", "60s", "--create-topics")
			deadline := time.Now().Add(30 * time.Second)
			for !strings.Contains(w.logs.String(), "Kafka not reachable yet; retrying") {
				require.True(t, time.Now().Before(deadline), "no retry logged:\n%s", w.tail())
				time.Sleep(20 * time.Millisecond)
			}
			held.Release()
			b, err := embedded.Start(embedded.Port(port))
			require.NoError(t, err)
			t.Cleanup(b.Close)
			wl := workload{payments: map[string][]string{}}
			wl.add(produceShop(t, addr, 2, 2, "late"))
			verdicts := readCommitted(t, addr, "verdicts", wl.count(), 60*time.Second)
			assert.Empty(t, checkVerdicts(wl, verdicts), w.tail())
			assert.Contains(t, w.logs.String(), "reached Kafka")
			require.NoError(t, w.stop(30*time.Second), w.tail())
		})
	})
}
