package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap/zaptest"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/runtime"
)

func getStatus(t *testing.T, addr string) runtime.Status {
	t.Helper()
	st, err := tryStatus(addr)
	require.NoError(t, err)
	return st
}

func taskState(st runtime.Status, id string) (runtime.TaskStatus, bool) {
	for _, ts := range st.Tasks {
		if ts.ID == id {
			return ts, true
		}
	}
	return runtime.TaskStatus{}, false
}

// A corrupt clock header on one partition fails only that task: /status
// shows it FAILED with the channel and offset, the other task keeps going,
// the committed offset stays at the bad record, and a restart retries it
// (and fails again while the record is still corrupt).
func TestCorruptHeaderFailsOnlyItsTask(t *testing.T) {
	t.Parallel()
	eachClient(t, func(t *testing.T, client string) {
		b := startBroker(t)
		createTopics(t, b.Addr(), 2, "orders", "payments", "verdicts")
		p := newProducer(t, b.Addr(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		// One causal session for the whole client, so each payment claims its
		// order; a record given headers carries those instead.
		var session causal.Session
		send := func(topic string, partition int32, key, value string, headers []kgo.RecordHeader) int64 {
			r := &kgo.Record{Topic: topic, Partition: partition, Key: []byte(key), Value: []byte(value), Headers: headers}
			if headers != nil {
				off := sendRecord(t, p, r, nil)
				session.Produced(causal.Channel{Topic: topic, Partition: partition}, off)
				return off
			}
			return sendRecord(t, p, r, &session)
		}
		send("orders", 0, "a", "order a", nil)
		send("payments", 0, "a", "a-p0", nil)

		cfg := testConfigFor(t, client, b.Addr(), "shop-corrupt")
		cfg.HTTPAddr = "127.0.0.1:0"
		cfg.AdminToken = "s3cret"
		w, err := runtime.NewStreamThread(cfg, shopTopology(), zaptest.NewLogger(t), nil)
		require.NoError(t, err)
		srv := runtime.NewServer(cfg.HTTPAddr, w, zaptest.NewLogger(t))
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		require.NoError(t, w.Start(ctx))
		require.NoError(t, srv.Start(ctx))

		// The good payment is processed first: it claims its order, and a task
		// that fails stops delivering what it still holds, so the corrupt record
		// must not arrive before the order has been read.
		readCommitted(t, b.Addr(), "verdicts", 1, 30*time.Second)
		bad := send("payments", 0, "a", "a-p1", []kgo.RecordHeader{{Key: causal.HeaderKey, Value: []byte{0xff, 0x01}}})
		send("payments", 0, "a", "a-p2", nil)
		t.Cleanup(func() {
			stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			assert.NoError(t, srv.Stop(stopCtx))
			assert.NoError(t, w.Stop(stopCtx))
		})

		var failed runtime.TaskStatus
		require.Eventually(t, func() bool {
			ts, ok := taskState(getStatus(t, srv.Addr()), "ledger/0")
			failed = ts
			return ok && ts.State == runtime.StateFailed
		}, 30*time.Second, 50*time.Millisecond)
		assert.Contains(t, failed.LastError, fmt.Sprintf("corrupt clock header on payments/0 at offset %d", bad))

		// The other partition's task keeps processing.
		send("orders", 1, "b", "order b", nil)
		send("payments", 1, "b", "b-p0", nil)
		verdicts := readCommitted(t, b.Addr(), "verdicts", 2, 30*time.Second)
		var got []string
		for _, v := range verdicts {
			got = append(got, string(v.Value))
		}
		assert.ElementsMatch(t, []string{"a-p0 known=true n=1", "b-p0 known=true n=1"}, got)
		other, _ := taskState(getStatus(t, srv.Addr()), "ledger/1")
		assert.Equal(t, runtime.StateRunning, other.State)
		resp, err := http.Get("http://" + srv.Addr() + "/readyz")
		require.NoError(t, err)
		why, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "a FAILED task makes the worker unready")
		assert.Regexp(t, `not ready: 1 task FAILED: ledger/0 \(.*corrupt clock header on payments/0 at offset`, string(why))
		st := getStatus(t, srv.Addr())
		assert.True(t, st.Degraded)
		assert.False(t, st.Ready)

		// What the task did before the bad record reached the changelog: its
		// store change for the good payment is there.
		require.Eventually(t, func() bool {
			for _, m := range readCommitted(t, b.Addr(), runtime.StoreChangelogTopic("shop-corrupt", "paid"), 1<<30, 2*time.Second) {
				if string(m.Key) == "a" && string(m.Value) == "1" {
					return true
				}
			}
			return false
		}, 20*time.Second, 200*time.Millisecond, "the failed task's store change before the bad record is not in the changelog")

		// Nothing past the bad record is committed for its partition.
		require.Eventually(t, func() bool {
			return committedOffset(t, b.Addr(), "shop-corrupt", "payments", 0) == bad
		}, 10*time.Second, 100*time.Millisecond)

		// A restart retries the record, and fails on it again.
		resp, err = http.Post("http://"+srv.Addr()+"/tasks/ledger/0/restart", "", nil)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "a restart without the admin token")
		resp, err = adminPost(t, srv.Addr(), "/tasks/ledger/0/restart", "s3cret")
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusAccepted, resp.StatusCode, string(body))
		require.Eventually(t, func() bool {
			ts, _ := taskState(getStatus(t, srv.Addr()), "ledger/0")
			return ts.State == runtime.StateFailed && strings.Contains(ts.LastError, fmt.Sprintf("at offset %d", bad))
		}, 30*time.Second, 50*time.Millisecond, "status after restart: %+v", getStatus(t, srv.Addr()))
		assert.Equal(t, bad, committedOffset(t, b.Addr(), "shop-corrupt", "payments", 0))

		resp, err = adminPost(t, srv.Addr(), "/tasks/nope/9/restart", "s3cret")
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusNotFound, resp.StatusCode)

		// Skipping moves the task past the corrupt record: it goes to the
		// dead-letter topic, and the payment after it is processed, once.
		resp, err = adminPost(t, srv.Addr(), "/tasks/ledger/0/skip", "wrong")
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
		resp, err = adminPost(t, srv.Addr(), "/tasks/ledger/0/skip", "s3cret")
		require.NoError(t, err)
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusAccepted, resp.StatusCode, string(body))
		assert.Contains(t, string(body), fmt.Sprintf("past payments/0@%d", bad))
		dead := readCommitted(t, b.Addr(), "shop-corrupt-dead-letter", 1, 30*time.Second)
		require.Len(t, dead, 1)
		assert.Equal(t, "a-p1", string(dead[0].Value))
		assert.Contains(t, dead[0].Headers, kgo.RecordHeader{Key: framework.HeaderDLQStage, Value: []byte(framework.StageSkip)})
		verdicts = readCommitted(t, b.Addr(), "verdicts", 3, 30*time.Second)
		got = got[:0]
		for _, v := range verdicts {
			got = append(got, string(v.Value))
		}
		assert.ElementsMatch(t, []string{"a-p0 known=true n=1", "b-p0 known=true n=1", "a-p2 known=true n=2"}, got)
		require.Eventually(t, func() bool {
			return committedOffset(t, b.Addr(), "shop-corrupt", "payments", 0) == bad+2
		}, 10*time.Second, 100*time.Millisecond, "committed past the skipped record and the one after it")
		ts, _ := taskState(getStatus(t, srv.Addr()), "ledger/0")
		assert.Equal(t, runtime.StateRunning, ts.State)
		resp, err = adminPost(t, srv.Addr(), "/tasks/ledger/0/skip", "s3cret")
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, "a second skip changes nothing")

		metrics, err := http.Get("http://" + srv.Addr() + "/metrics")
		require.NoError(t, err)
		mb, _ := io.ReadAll(metrics.Body)
		metrics.Body.Close()
		assert.Contains(t, string(mb), `causeway_task_state{state="RUNNING",task="ledger/0"} 1`)
		assert.Contains(t, string(mb), "causeway_transaction_commits_total")
		// Lag and latency, per task and channel and per processor.
		assert.Regexp(t, `causeway_committed_lag_records\{channel="payments/1",task="ledger/1"\} \d`, string(mb))
		assert.Regexp(t, `causeway_delivered_lag_records\{channel="orders/1",task="ledger/1"\} \d`, string(mb))
		assert.Regexp(t, `causeway_end_to_end_latency_seconds_count\{processor="ledger"\} [1-9]`, string(mb))
	})
}

// committedOffset reads the consumer group's committed offset of one
// partition.
func committedOffset(t *testing.T, addr, group, topic string, partition int32) int64 {
	t.Helper()
	c, err := kgo.NewClient(kgo.SeedBrokers(addr))
	require.NoError(t, err)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := kadm.NewClient(c).FetchOffsets(kadm.RequireStable(ctx), group)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return -1001 // none, as librdkafka says it
	}
	require.NoError(t, err)
	if o, ok := got.Lookup(topic, partition); ok && o.Err == nil && o.At >= 0 {
		return o.At
	}
	return -1001
}

// adminPost posts to a worker's endpoint with the admin token.
func adminPost(t *testing.T, addr, path, token string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+path, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	return http.DefaultClient.Do(req)
}

// A skip always succeeds: a dead letter too large for the dead-letter
// topic is cut to fit, its headers saying what was cut and how large it
// was. Over the worker's bound (--max-record-bytes) its value is cut as it
// is made; over the topic's limit alone, Kafka's refusal has it written
// again without key and value. The failure before the skip names the
// record, not a punctuation.
func TestASkipOfARecordLargerThanTheDeadLetterTopicTakesSucceeds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		bound     int
		truncated string
		valueLen  int
	}{
		{"over the worker's bound", 2000, "value", -1},
		{"over the dead-letter topic's limit", 0, "key,value", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			eachClient(t, func(t *testing.T, client string) {
				b := startBroker(t)
				createTopics(t, b.Addr(), 1, "orders", "payments", "verdicts")
				const app = "shop-skip-large"
				createLimitedTopic(t, b.Addr(), app+"-dead-letter", 4, 3000, "")
				p := newProducer(t, b.Addr(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
				s := &causal.Session{}
				sendRecord(t, p, &kgo.Record{Topic: "orders", Key: []byte("a"), Value: []byte("order a")}, s)
				big := randomBytes(5000, 2)
				bad := sendRecord(t, p, &kgo.Record{Topic: "payments", Key: []byte("a"), Value: big,
					Headers: []kgo.RecordHeader{{Key: causal.HeaderKey, Value: []byte{0xff, 0x01}}}}, nil)

				cfg := testConfigFor(t, client, b.Addr(), app)
				cfg.MaxRecordBytes = tc.bound
				w := startWorker(t, cfg)
				waitForFailure(t, w, fmt.Sprintf("corrupt clock header on payments/0 at offset %d", bad))
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				skipped, err := w.SkipRecord(ctx, "ledger/0")
				require.NoError(t, err)
				assert.Equal(t, bad, skipped.Offset)
				sendRecord(t, p, &kgo.Record{Topic: "payments", Key: []byte("a"), Value: []byte("a-p1")}, s)

				verdicts := readCommitted(t, b.Addr(), "verdicts", 1, 30*time.Second)
				require.Len(t, verdicts, 1, "the task went on past the skipped record: %+v", w.Status())
				assert.Equal(t, "a-p1 known=true n=1", string(verdicts[0].Value))
				dead := readCommitted(t, b.Addr(), app+"-dead-letter", 1, 10*time.Second)
				require.Len(t, dead, 1)
				headers := map[string]string{}
				for _, h := range dead[0].Headers {
					headers[h.Key] = string(h.Value)
				}
				assert.Equal(t, tc.truncated, headers[framework.HeaderDLQTruncated])
				assert.Equal(t, "5001", headers[framework.HeaderDLQOriginalSize])
				assert.Equal(t, framework.StageSkip, headers[framework.HeaderDLQStage])
				if tc.valueLen >= 0 {
					assert.Len(t, dead[0].Value, tc.valueLen)
				} else {
					assert.Equal(t, big[:len(dead[0].Value)], dead[0].Value, "the value's start is kept")
					assert.Positive(t, len(dead[0].Value))
				}
				for _, ts := range w.Status().Tasks {
					assert.NotContains(t, ts.LastError, "punctuation")
				}
			})
		})
	}
}
