package connectworker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/connect"
	"github.com/causeway-stream/causeway/connect/transform"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/internal/testport"
	"github.com/causeway-stream/causeway/runtime/internal/transport"
	"github.com/causeway-stream/causeway/runtime/internal/transport/transporttest"
)

// scripted is a source task that returns its batches in turn, then
// nothing, and remembers the offsets it was asked from.
type scripted struct {
	mu      sync.Mutex
	batches [][]connect.SourceRecord
	asked   [][]byte
}

func (s *scripted) Poll(ctx context.Context, offset []byte) ([]connect.SourceRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asked = append(s.asked, offset)
	if len(s.batches) == 0 {
		s.mu.Unlock()
		<-ctx.Done()
		s.mu.Lock()
		return nil, nil
	}
	b := s.batches[0]
	s.batches = s.batches[1:]
	return b, nil
}

func (s *scripted) Close() error { return nil }

// polls is how many times the task was polled.
func (s *scripted) polls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.asked)
}

// A source's records go to the topic their transforms route them to; with
// errors.tolerance=all a record the transforms refuse is left out, and its
// offset still counts, even when no record of its batch is written.
func TestSourceRecordsAreRoutedAndRefusedOnesLeftOut(t *testing.T) {
	t.Parallel()
	kafka := transporttest.New(t)
	cfg := map[string]string{"errors.tolerance": "all", "topic.creation.default.partitions": "1",
		"transforms": "key,route", "transforms.key.type": "ValueToKey", "transforms.key.fields": "id",
		"transforms.route.type": "RegexRouter", "transforms.route.regex": "raw_(.*)", "transforms.route.replacement": "clean_$1"}
	var produced = new(taskCounters)
	r := sourceRunners(t, kafka, "src", cfg, &produced.produced)()
	task := &scripted{batches: [][]connect.SourceRecord{
		{
			{Topic: "raw_a", Value: []byte(`{"id": 1}`), Offset: []byte(`1`)},
			{Topic: "raw_a", Value: []byte(`[1]`), Offset: []byte(`2`)}, // not an object: refused
			{Topic: "other", Value: []byte(`{"id": 3}`), Offset: []byte(`3`)},
		},
		{{Topic: "raw_a", Value: []byte(`"x"`), Offset: []byte(`4`)}}, // refused alone
	}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.run(ctx, task) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		task.mu.Lock()
		n := len(task.asked)
		task.mu.Unlock()
		if n >= 3 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	require.NoError(t, <-done)
	assert.Equal(t, [][]byte{nil, []byte(`3`), []byte(`4`)}, task.asked[:3], "each poll starts after the last offset, a refused record's too")
	assert.EqualValues(t, 2, produced.produced.Load())

	got := map[string]string{}
	for _, topic := range []string{"clean_a", "other", "raw_a"} {
		for _, m := range kafka.Records(causal.Channel{Topic: topic}) {
			got[m.Topic] = string(m.Key)
		}
	}
	var key map[string]any
	require.NoError(t, json.Unmarshal([]byte(got["clean_a"]), &key))
	assert.Equal(t, map[string]string{"clean_a": `{"id":1}`, "other": `{"id":3}`}, got, "routed, keyed, and nothing left in raw_a")
}

// sourceRunners makes source runners of the connector name, configured
// with cfg, on a connect worker over kafka.
func sourceRunners(t *testing.T, kafka *transporttest.Cluster, name string, cfg map[string]string, produced *atomic.Int64) func() *sourceRunner {
	t.Helper()
	w, err := New(Config{Bootstrap: kafka.Bootstrap(), Client: kafka.Client(), Listen: "127.0.0.1:0", Log: zaptest.NewLogger(t)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.server.Stop(context.Background()) })
	chain, err := transform.Parse(cfg)
	require.NoError(t, err)
	return func() *sourceRunner {
		r, err := w.newSourceRunner(name, cfg, chain, zaptest.NewLogger(t), produced)
		require.NoError(t, err)
		return r
	}
}

// failingListener is a scripted task whose first commit callback fails:
// the task stops right after a poll's commit.
type failingListener struct {
	scripted
	failed bool
}

func (f *failingListener) Committed(context.Context, []byte) error {
	if !f.failed {
		f.failed = true
		return errors.New("the task died")
	}
	return nil
}

// runUntil runs a source runner on task until done says so (or 30 s
// pass), then stops it.
func runUntil(t *testing.T, r *sourceRunner, task connect.SourceTask, done func() bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- r.run(ctx, task) }()
	deadline := time.Now().Add(30 * time.Second)
	for !done() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	require.NoError(t, <-stopped)
}

// A source task that stops right after a poll's commit has written its
// transactions' records, their ends and its offset in that commit: the
// next task writes nothing of it again, and polls from after it.
func TestATaskThatStopsAfterItsCommitLeavesNothingToWrite(t *testing.T) {
	t.Parallel()
	kafka := transporttest.New(t)
	runner := sourceRunners(t, kafka, "cdc", map[string]string{"topic.creation.default.partitions": "1"}, new(atomic.Int64))
	first := &failingListener{scripted: scripted{batches: [][]connect.SourceRecord{{
		{Topic: "orders", Key: []byte(`1`), Value: []byte(`{"id":1}`), Transaction: "t1", Offset: []byte(`1`)},
		{Topic: "txn", Key: []byte(`"t1"`), Value: []byte(`{"status":"END"}`), Transaction: "t1", EndsTransaction: true},
	}}}}
	require.ErrorContains(t, runner().run(context.Background(), first), "the task died")
	assert.Len(t, kafka.Records(causal.Channel{Topic: "orders"}), 1, "the transaction's record is committed")
	assert.Len(t, kafka.Records(causal.Channel{Topic: "txn"}), 1, "and its end with it")

	next := &scripted{}
	runUntil(t, runner(), next, func() bool { return next.polls() > 0 })
	assert.Len(t, kafka.Records(causal.Channel{Topic: "orders"}), 1)
	assert.Len(t, kafka.Records(causal.Channel{Topic: "txn"}), 1, "the end, once")
	assert.Equal(t, [][]byte{[]byte(`1`)}, next.asked, "the next task starts after the committed offset")
}

// An offset record that keeps ends, as a worker of an earlier version
// left it when its task died between a poll's two transactions, makes
// the next task write them, once, before anything else.
func TestEndsLeftInAnOffsetRecordAreWrittenByTheNextTask(t *testing.T) {
	t.Parallel()
	kafka := transporttest.New(t)
	require.NoError(t, kafka.CreateTopic("causeway-connect-offsets", 25, map[string]string{"cleanup.policy": "compact"}))
	require.NoError(t, kafka.CreateTopic("orders", 1, nil))
	_, err := kafka.Produce(transport.Message{Topic: "orders", Key: []byte(`1`), Value: []byte(`{"id":1}`)})
	require.NoError(t, err)
	left, err := json.Marshal(committedOffset{Offset: []byte(`1`), Topics: []string{"orders"}, Pending: []pendingEnd{{
		Topic: "txn", Key: []byte(`"t1"`), Value: []byte(`{"status":"END"}`),
		Headers: []framework.Header{{Key: connect.TxnEndHeader, Value: []byte("t1")}}}}})
	require.NoError(t, err)
	_, err = kafka.Produce(transport.Message{Topic: "causeway-connect-offsets", Partition: offsetsPartition("cdc", 25), Key: []byte("cdc"), Value: left})
	require.NoError(t, err)

	runner := sourceRunners(t, kafka, "cdc", map[string]string{"topic.creation.default.partitions": "1"}, new(atomic.Int64))
	next := &scripted{}
	runUntil(t, runner(), next, func() bool { return next.polls() > 0 })
	again := &scripted{}
	runUntil(t, runner(), again, func() bool { return again.polls() > 0 })
	ends := kafka.Records(causal.Channel{Topic: "txn"})
	require.Len(t, ends, 1, "the end, once")
	end, ok := framework.Record(ends[0]).Header(connect.TxnEndHeader)
	assert.True(t, ok)
	assert.Equal(t, "t1", string(end))
	assert.Equal(t, [][]byte{[]byte(`1`)}, next.asked, "the next task starts after the committed offset")
}

// A poll of many small source transactions, whose ends together exceed
// the offsets topic's largest record, is written whole: every record and
// every end once, each end after its transaction's records, and the task
// goes on (it failed on its offset record, too large, when one record
// kept every end, and again with ends of a few bytes each, when the
// budget counted their bytes and not what an end takes in the offset
// record's JSON; ends are no longer kept there).
func TestManySmallTransactionsInOnePollAreWritten(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		txns int
		pad  string
	}{
		{"ends with a schema", 2000, strings.Repeat("x", 800)}, // an end's schema and counts, as Debezium's
		{"ends of a few bytes", 8000, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			kafka := transporttest.New(t)
			// Kafka's default largest record, on the offsets topic.
			require.NoError(t, kafka.CreateTopic("causeway-connect-offsets", 25, map[string]string{"max.message.bytes": "1048588", "cleanup.policy": "compact"}))
			r := sourceRunners(t, kafka, "cdc", map[string]string{"topic.creation.default.partitions": "1"}, new(atomic.Int64))()
			var poll []connect.SourceRecord
			for i := range tc.txns {
				id := fmt.Sprintf("t%d", i)
				poll = append(poll,
					connect.SourceRecord{Topic: "orders", Key: []byte(strconv.Itoa(i)), Value: []byte(`{"id":` + strconv.Itoa(i) + `}`), Transaction: id, Offset: []byte(strconv.Itoa(i))},
					connect.SourceRecord{Topic: "txn", Key: []byte(`"` + id + `"`), Value: []byte(`{"pad":"` + tc.pad + `"}`), Transaction: id, EndsTransaction: true})
			}
			task := &scripted{batches: [][]connect.SourceRecord{poll}}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- r.run(ctx, task) }()
			deadline := time.Now().Add(60 * time.Second)
			// Every end written, and the task polled again after them.
			for (len(kafka.Records(causal.Channel{Topic: "txn"})) < tc.txns || task.polls() < 2) && time.Now().Before(deadline) {
				select {
				case err := <-done:
					require.NoError(t, err, "the task stopped")
					t.Fatal("the task stopped")
				case <-time.After(20 * time.Millisecond):
				}
			}
			cancel()
			require.NoError(t, <-done)
			orders, ends := kafka.Records(causal.Channel{Topic: "orders"}), kafka.Records(causal.Channel{Topic: "txn"})
			require.Len(t, orders, tc.txns)
			require.Len(t, ends, tc.txns)
			for i := range tc.txns {
				assert.Equal(t, strconv.Itoa(i), string(orders[i].Key))
				end, _ := framework.Record(ends[i]).Header(connect.TxnEndHeader)
				assert.Equal(t, fmt.Sprintf("t%d", i), string(end))
			}
			assert.Equal(t, [][]byte{nil, []byte(strconv.Itoa(tc.txns - 1))}, task.asked, "the next poll starts after the last transaction")
		})
	}
}

// streamingTask is a scripted task that reads on from where it stopped
// (connect.Streaming), or says it does not; it notes, at each poll, how
// many records of the topic "rows" were committed, and hears of commits.
type streamingTask struct {
	scripted
	streaming bool
	kafka     *transporttest.Cluster
	// busy catches a Poll and a Committed at the same time.
	busy      sync.Mutex
	overlap   atomic.Bool
	seen      []int
	committed [][]byte
}

func (s *streamingTask) Streaming() bool { return s.streaming }

func (s *streamingTask) Poll(ctx context.Context, offset []byte) ([]connect.SourceRecord, error) {
	if !s.busy.TryLock() {
		s.overlap.Store(true)
		return nil, errors.New("polled during a commit callback")
	}
	n := len(s.kafka.Records(causal.Channel{Topic: "rows"}))
	s.mu.Lock()
	s.seen = append(s.seen, n)
	last := len(s.batches) == 0
	s.mu.Unlock()
	s.busy.Unlock()
	if last { // nothing more to read: return after a while, as a stream does
		time.Sleep(10 * time.Millisecond)
		return nil, nil
	}
	return s.scripted.Poll(ctx, offset)
}

// told is the offsets the task heard were committed.
func (s *streamingTask) told() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.committed)
}

func (s *streamingTask) Committed(_ context.Context, offset []byte) error {
	if !s.busy.TryLock() {
		s.overlap.Store(true)
		return errors.New("told of a commit during a poll")
	}
	defer s.busy.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.committed = append(s.committed, offset)
	return nil
}

// A streaming source is polled again while the batch it returned is
// being written (here, while its commit is retried), and hears of each
// commit from the polling goroutine, between two polls, never during
// one; a source that is not streaming is polled only once its batch is
// committed.
func TestAStreamingSourceIsReadAheadOfItsWrites(t *testing.T) {
	t.Parallel()
	for _, streaming := range []bool{true, false} {
		t.Run(fmt.Sprintf("streaming=%v", streaming), func(t *testing.T) {
			t.Parallel()
			kafka := transporttest.New(t)
			r := sourceRunners(t, kafka, "cdc", map[string]string{"topic.creation.default.partitions": "1"}, new(atomic.Int64))()
			require.NoError(t, kafka.CreateTopic("rows", 1, nil))
			task := &streamingTask{streaming: streaming, kafka: kafka, scripted: scripted{batches: [][]connect.SourceRecord{
				{{Topic: "rows", Value: []byte(`1`), Offset: []byte(`1`)}},
				{{Topic: "rows", Value: []byte(`2`), Offset: []byte(`2`)}},
			}}}
			kafka.FailCommits(2) // the first batch's commit is retried for a while
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- r.run(ctx, task) }()
			deadline := time.Now().Add(30 * time.Second)
			toldLast := func() bool {
				told := task.told()
				return len(told) > 0 && string(told[len(told)-1]) == "2"
			}
			for !toldLast() && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			cancel()
			require.NoError(t, <-done)
			assert.False(t, task.overlap.Load(), "a poll and a commit callback at the same time")
			require.GreaterOrEqual(t, len(task.seen), 2)
			if streaming {
				assert.Equal(t, 0, task.seen[1], "the second poll comes before the first batch is committed")
			} else {
				assert.Equal(t, 1, task.seen[1], "the second poll comes after the first batch is committed")
			}
			// The reader may have taken both commits at once, and been
			// told the second alone.
			told := task.told()
			require.NotEmpty(t, told)
			assert.Equal(t, []byte(`2`), told[len(told)-1], "told of the last commit")
			assert.True(t, slices.IsSortedFunc(told, bytes.Compare), "told in order: %q", told)
			assert.Len(t, kafka.Records(causal.Channel{Topic: "rows"}), 2, "both batches written, once")
		})
	}
}

// A source task checks that it can reach the cluster as it starts, as
// the worker does: where nothing listens it gives up after the worker's
// ConnectTimeout with ErrKafkaUnreachable, naming the address, and polls
// nothing.
func TestASourceTaskThatCannotReachItsClusterPollsNothing(t *testing.T) {
	t.Parallel()
	kafka := transporttest.New(t)
	held, err := testport.Hold(0)
	require.NoError(t, err)
	t.Cleanup(held.Release)
	nowhere := fmt.Sprintf("127.0.0.1:%d", held.Port)
	w, err := New(Config{Bootstrap: nowhere, Client: kafka.Client(), Listen: "127.0.0.1:0", ConnectTimeout: time.Second, Log: zaptest.NewLogger(t)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.server.Stop(context.Background()) })
	r, err := w.newSourceRunner("cdc", map[string]string{}, nil, zaptest.NewLogger(t), new(atomic.Int64))
	require.NoError(t, err)
	task := &scripted{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = r.run(ctx, task)
	require.ErrorIs(t, err, ErrKafkaUnreachable)
	assert.ErrorContains(t, err, "cannot reach Kafka at "+nowhere)
	assert.Zero(t, task.polls())
}

// A poll whose Kafka transaction fails after its records were flushed
// (the commit refused until the attempts run out) leaves nothing a reader
// takes: the transaction is aborted, records and end alike, and the task
// fails. The next task writes the poll again, and each record is read
// once.
func TestAPollWhoseCommitFailsAfterTheFlushLeavesNothingToRead(t *testing.T) {
	t.Parallel()
	kafka := transporttest.New(t)
	runner := sourceRunners(t, kafka, "cdc", map[string]string{"topic.creation.default.partitions": "1"}, new(atomic.Int64))
	poll := func() *scripted {
		return &scripted{batches: [][]connect.SourceRecord{{
			{Topic: "orders", Key: []byte(`1`), Value: []byte(`{"id":1}`), Transaction: "t1", Offset: []byte(`1`)},
			{Topic: "txn", Key: []byte(`"t1"`), Value: []byte(`{"status":"END"}`), Transaction: "t1", EndsTransaction: true},
		}}}
	}
	first := runner()
	kafka.FailCommits(5) // as many as the producer tries
	require.Error(t, first.run(context.Background(), poll()))
	orders := causal.Channel{Topic: "orders"}
	assert.Empty(t, kafka.Records(orders), "aborted: nothing of the poll is read")
	assert.Empty(t, kafka.Records(causal.Channel{Topic: "txn"}))
	assert.Equal(t, int64(2), kafka.End(orders), "the flushed record stayed, aborted, with its marker")

	again := poll()
	runUntil(t, runner(), again, func() bool { return again.polls() > 1 })
	got := kafka.Records(orders)
	require.Len(t, got, 1, "written once, by the next task")
	assert.Equal(t, int64(2), got[0].Offset)
	assert.Len(t, kafka.Records(causal.Channel{Topic: "txn"}), 1)
}
