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
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/runtime"
)

// A restart or skip asked of a worker that does not run the task is
// forwarded to the one that does (the members topic says which), with
// the admin token, and answered as that worker answers: an operator need
// not know where a task runs.
func TestRestartAndSkipAreForwardedToTheTasksWorker(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	createTopics(t, b.Addr(), 2, "orders", "payments", "verdicts")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var workers []*runtime.StreamThread
	var addrs []string
	for i := range 2 {
		cfg := testConfigFor(t, "franz", b.Addr(), "shop-forward")
		cfg.InstanceID, cfg.AdminToken = fmt.Sprint("worker-", i), "s3cret"
		w := startWorker(t, cfg)
		srv := runtime.NewServer("127.0.0.1:0", w, zap.NewNop())
		require.NoError(t, srv.Start(ctx))
		t.Cleanup(func() { assert.NoError(t, srv.Stop(context.Background())) })
		workers, addrs = append(workers, w), append(addrs, srv.Addr())
	}
	for len(workers[0].Status().Tasks) != 1 || len(workers[1].Status().Tasks) != 1 {
		require.NoError(t, ctx.Err(), "the workers never shared the tasks")
		time.Sleep(50 * time.Millisecond)
	}
	p := newProducer(t, b.Addr(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	s := &causal.Session{}
	sendRecord(t, p, &kgo.Record{Topic: "orders", Partition: 1, Key: []byte("a"), Value: []byte("order a")}, s)
	bad := sendRecord(t, p, &kgo.Record{Topic: "payments", Partition: 1, Key: []byte("a"), Value: []byte("a-p0"),
		Headers: []kgo.RecordHeader{{Key: causal.HeaderKey, Value: []byte{0xff, 0x01}}}}, nil)
	owner := -1
	require.Eventually(t, func() bool {
		for i, w := range workers {
			for _, ts := range w.Status().Tasks {
				if ts.ID == "ledger/1" && ts.State == runtime.StateFailed {
					owner = i
					return true
				}
			}
		}
		return false
	}, 30*time.Second, 50*time.Millisecond, "ledger/1 never failed")
	other := addrs[1-owner]

	post := func(path string) (int, string) {
		t.Helper()
		for {
			resp, err := adminPost(t, other, path, "s3cret")
			require.NoError(t, err)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound || ctx.Err() != nil {
				return resp.StatusCode, string(body)
			}
			time.Sleep(100 * time.Millisecond) // the members topic not read yet
		}
	}
	code, body := post("/tasks/ledger/1/restart")
	assert.Equal(t, http.StatusAccepted, code, body)
	assert.Contains(t, body, "task ledger/1 restarted from its committed state")
	waitForTask(t, workers[owner], "ledger/1", runtime.StateFailed, 30*time.Second) // the same record again
	code, body = post("/tasks/ledger/1/skip")
	assert.Equal(t, http.StatusAccepted, code, body)
	assert.Contains(t, body, fmt.Sprintf("past payments/1@%d", bad))
	waitForTask(t, workers[owner], "ledger/1", runtime.StateRunning, 30*time.Second)

	resp, err := adminPost(t, other, "/tasks/ledger/1/skip", "wrong")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "the token is still checked")
	resp, err = adminPost(t, other, "/tasks/nosuch/9/restart", "s3cret")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "a task nobody runs")
}
