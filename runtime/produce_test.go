package runtime_test

import (
	"context"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/runtime"
)

// waitForTask waits until the worker's task id is in state, and returns
// its status then.
func waitForTask(t *testing.T, w *runtime.StreamThread, id string, state runtime.TaskState, timeout time.Duration) runtime.TaskStatus {
	t.Helper()
	var got runtime.TaskStatus
	require.Eventually(t, func() bool {
		for _, ts := range w.Status().Tasks {
			if ts.ID == id {
				got = ts
			}
		}
		return got.State == state
	}, timeout, 50*time.Millisecond, "task %s never became %s", id, state)
	return got
}

// echoTopology forwards each record to out on its input partition; a
// record "big" becomes 200 kB.
func echoTopology(t *testing.T) *framework.Topology {
	t.Helper()
	topo, err := framework.NewBuilder("echo").Processor("echo", func() framework.Processor {
		return framework.ProcessorFunc(func(ctx framework.Context, rec framework.Record) error {
			v := rec.Value
			if string(v) == "big" {
				v = []byte(strings.Repeat("x", 200_000))
			}
			return ctx.Forward(framework.Record{Key: rec.Key, Value: v})
		})
	}, framework.From("in"), framework.To("out", framework.KeepPartition())).Build()
	require.NoError(t, err)
	return topo
}

// sendTo writes values to one partition of topic.
func sendTo(t *testing.T, addr, topic string, partition int32, values ...string) {
	t.Helper()
	p := newProducer(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for _, v := range values {
		sendRecord(t, p, &kgo.Record{Topic: topic, Partition: partition, Value: []byte(v)}, nil)
	}
}

// A record the broker refuses after it was sent (here every record for
// out/1) fails the transaction once; the next one is watched, learns which
// record it was, and from then on that record goes to its processor's
// production error policy: the task that emitted it fails, naming its
// input record, and the other task goes on committing. No endless aborts.
func TestBrokerRefusalFailsOnlyTheEmittingTask(t *testing.T) {
	t.Parallel()
	eachClient(t, func(t *testing.T, client string) {
		b := startBroker(t)
		createTopics(t, b.Addr(), 2, "in", "out")
		h := b.Cluster().Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "out", Partitions: []int32{1}, Err: kerr.InvalidRecord, Count: -1})
		defer h.Remove()
		sendTo(t, b.Addr(), "in", 0, "a", "b")
		sendTo(t, b.Addr(), "in", 1, "refused")
		m := runtime.NewMetrics()
		w := startTopology(t, testConfigFor(t, client, b.Addr(), "echo-refused"), echoTopology(t), m)
		failed := waitForTask(t, w, "echo/1", runtime.StateFailed, 60*time.Second)
		assert.Contains(t, failed.LastError, "output to out emitted for input in/1@0 was refused")
		sendTo(t, b.Addr(), "in", 0, "c")
		var got []string
		for _, m := range readCommitted(t, b.Addr(), "out", 3, 30*time.Second) {
			got = append(got, string(m.Value))
		}
		assert.Equal(t, []string{"a", "b", "c"}, got)
		aborts := testutil.ToFloat64(m.Aborts)
		assert.LessOrEqual(t, aborts, 3.0, "the transaction aborted %v times", aborts)
		// Commits go through again: the one reason the worker is not
		// ready is its FAILED task.
		require.Eventually(t, func() bool {
			st := w.Status()
			return st.FailedCommits == 0 && st.Degraded && strings.HasPrefix(st.Reason, "1 task FAILED: echo/1 (")
		}, 10*time.Second, 50*time.Millisecond, "commits go through again: %+v", w.Status())
	})
}

// With the real client: an output over librdkafka's message.max.bytes
// fails the task that emitted it, naming its input record, and only that
// task; the other partition's task goes on committing.
func TestMessageTooLargeFailsOnlyTheEmittingTask(t *testing.T) {
	t.Parallel()
	eachClient(t, func(t *testing.T, client string) {
		b := startBroker(t)
		createTopics(t, b.Addr(), 2, "in", "out")
		topo := echoTopology(t)
		send := func(partition int32, values ...string) { sendTo(t, b.Addr(), "in", partition, values...) }
		send(0, "a", "big", "b")
		send(1, "c", "d")

		cfg := testConfigFor(t, client, b.Addr(), "echo-large")
		cfg.Kafka["message.max.bytes"] = "100000"
		w := startTopology(t, cfg, topo, nil)
		failed := waitForTask(t, w, "echo/0", runtime.StateFailed, 30*time.Second)
		assert.Contains(t, failed.LastError, "output to out emitted for input in/0@1 was refused")
		assert.Regexp(t, `(?i)too.large`, failed.LastError)

		send(1, "e")
		var got []string
		for _, m := range readCommitted(t, b.Addr(), "out", 3, 30*time.Second) {
			if m.Partition == 1 {
				got = append(got, string(m.Value))
			}
		}
		assert.Equal(t, []string{"c", "d", "e"}, got, "the other task keeps committing")
		assert.LessOrEqual(t, committedOffset(t, b.Addr(), "echo-large", "in", 0), int64(1), "nothing past the refused record's input is committed")
		for _, ts := range w.Status().Tasks {
			if ts.ID == "echo/1" {
				assert.Equal(t, runtime.StateRunning, ts.State)
			}
		}
	})
}

// A store write larger than its changelog topic takes can never be
// committed: the task that made it fails, naming the store, and only it;
// the transaction does not abort again and again, and the other task
// goes on committing. Under the worker's own bound
// (--max-record-bytes) the write fails at once, naming the input
// record that made it, which an operator can skip; over the topic's
// limit alone, Kafka's refusal fails the task after a transaction or two.
func TestAStoreChangeTooLargeForItsChangelogFailsOnlyItsTask(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		bound int
		want  []string
	}{
		{"over the worker's bound", 3000, []string{`store "orders": a write of 5003 bytes`, "over the 3000", "orders/0@0"}},
		{"over the changelog topic's limit", 0, []string{`store "orders"`, "max.message.bytes"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			eachClient(t, func(t *testing.T, client string) {
				b := startBroker(t)
				createTopics(t, b.Addr(), 2, "orders", "payments", "verdicts")
				const app = "shop-large-state"
				createLimitedTopic(t, b.Addr(), app+"-orders-changelog", 2, 4000, "compact")
				p := newProducer(t, b.Addr(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
				big := randomBytes(5000, 1)
				sendRecord(t, p, &kgo.Record{Topic: "orders", Partition: 0, Key: []byte("big"), Value: big}, nil)

				m := runtime.NewMetrics()
				cfg := testConfigFor(t, client, b.Addr(), app)
				cfg.MaxRecordBytes = tc.bound
				w := startWorkerWith(t, cfg, m)
				failed := waitForTask(t, w, "ledger/0", runtime.StateFailed, 30*time.Second)
				for _, want := range tc.want {
					assert.Contains(t, failed.LastError, want)
				}

				s := &causal.Session{}
				sendRecord(t, p, &kgo.Record{Topic: "orders", Partition: 1, Key: []byte("a"), Value: []byte("order a")}, s)
				sendRecord(t, p, &kgo.Record{Topic: "payments", Partition: 1, Key: []byte("a"), Value: []byte("a-p0")}, s)
				verdicts := readCommitted(t, b.Addr(), "verdicts", 1, 30*time.Second)
				require.Len(t, verdicts, 1, "the other task keeps committing")
				assert.Equal(t, "a-p0 known=true n=1", string(verdicts[0].Value))
				aborts := testutil.ToFloat64(m.Aborts)
				assert.LessOrEqual(t, aborts, 4.0, "a refused change aborts a few transactions at most")
				time.Sleep(2 * time.Second)
				assert.Equal(t, aborts, testutil.ToFloat64(m.Aborts), "and then none")
			})
		})
	}
}

// createLimitedTopic makes topic with partitions, records of at most
// maxBytes (max.message.bytes) and the cleanup policy (none: the
// broker's).
func createLimitedTopic(t *testing.T, addr, topic string, partitions int32, maxBytes int, cleanup string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	require.NoError(t, err)
	defer cl.Close()
	configs := map[string]*string{"max.message.bytes": kadm.StringPtr(strconv.Itoa(maxBytes))}
	if cleanup != "" {
		configs["cleanup.policy"] = kadm.StringPtr(cleanup)
	}
	_, err = kadm.NewClient(cl).CreateTopic(context.Background(), partitions, -1, configs, topic)
	require.NoError(t, err)
}

// randomBytes returns n bytes drawn from seed: random, so that a client
// that compresses cannot squeeze them under a size limit.
func randomBytes(n int, seed byte) []byte {
	b := make([]byte, n)
	_, _ = rand.NewChaCha8([32]byte{seed}).Read(b)
	return b
}
