package connectworker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

// A source's records go to the topic their transforms route them to; with
// errors.tolerance=all a record the transforms refuse is left out, and its
// offset still counts, even when no record of its batch is written.
func TestSourceRecordsAreRoutedAndRefusedOnesLeftOut(t *testing.T) {
	t.Parallel()
	kafka := transporttest.New(t)
	w, err := New(Config{Bootstrap: kafka.Bootstrap(), Client: kafka.Client(), Listen: "127.0.0.1:0", Log: zaptest.NewLogger(t)})
	require.NoError(t, err)
	defer func() { _ = w.server.Stop(context.Background()) }()
	cfg := map[string]string{"errors.tolerance": "all", "topic.creation.default.partitions": "1",
		"transforms": "key,route", "transforms.key.type": "ValueToKey", "transforms.key.fields": "id",
		"transforms.route.type": "RegexRouter", "transforms.route.regex": "raw_(.*)", "transforms.route.replacement": "clean_$1"}
	chain, err := transform.Parse(cfg)
	require.NoError(t, err)
	var produced = new(taskCounters)
	r, err := w.newSourceRunner("src", cfg, chain, zaptest.NewLogger(t), &produced.produced)
	require.NoError(t, err)
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

// failingListener is a scripted task whose first commit callback fails:
// the task stops between the commit of a poll's records and the write of
// their transactions' ends.
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

// A source task that stops after its transactions' records are committed
// and before their ends are written leaves the ends in its offset record:
// the next task writes them, once, before anything else.
func TestEndsLeftByATaskThatStoppedAreWrittenByTheNext(t *testing.T) {
	t.Parallel()
	kafka := transporttest.New(t)
	w, err := New(Config{Bootstrap: kafka.Bootstrap(), Client: kafka.Client(), Listen: "127.0.0.1:0", Log: zaptest.NewLogger(t)})
	require.NoError(t, err)
	defer func() { _ = w.server.Stop(context.Background()) }()
	cfg := map[string]string{"topic.creation.default.partitions": "1"}
	chain, err := transform.Parse(cfg)
	require.NoError(t, err)
	runner := func() *sourceRunner {
		r, err := w.newSourceRunner("cdc", cfg, chain, zaptest.NewLogger(t), new(atomic.Int64))
		require.NoError(t, err)
		return r
	}
	first := &failingListener{scripted: scripted{batches: [][]connect.SourceRecord{{
		{Topic: "orders", Key: []byte(`1`), Value: []byte(`{"id":1}`), Transaction: "t1", Offset: []byte(`1`)},
		{Topic: "txn", Key: []byte(`"t1"`), Value: []byte(`{"status":"END"}`), Transaction: "t1", EndsTransaction: true},
	}}}}
	require.ErrorContains(t, runner().run(context.Background(), first), "the task died")
	assert.Len(t, kafka.Records(causal.Channel{Topic: "orders"}), 1, "the transaction's record is committed")
	assert.Empty(t, kafka.Records(causal.Channel{Topic: "txn"}), "its end is not written yet")

	next := &scripted{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runner().run(ctx, next) }()
	deadline := time.Now().Add(30 * time.Second)
	for len(kafka.Records(causal.Channel{Topic: "txn"})) == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	require.NoError(t, <-done)
	ends := kafka.Records(causal.Channel{Topic: "txn"})
	require.Len(t, ends, 1, "the end, once")
	end, ok := framework.Record(ends[0]).Header(connect.TxnEndHeader)
	assert.True(t, ok)
	assert.Equal(t, "t1", string(end))
	assert.Equal(t, [][]byte{[]byte(`1`)}, next.asked, "the next task starts after the committed offset")
}

// A poll of many small source transactions, whose ends together exceed
// the offsets topic's largest record, is written a run of whole
// transactions at a time: every record and every end once, each end
// after its transaction's records, and the task goes on (it failed on
// its offset record, too large, when one record kept every end).
func TestManySmallTransactionsInOnePollAreWritten(t *testing.T) {
	t.Parallel()
	kafka := transporttest.New(t)
	// Kafka's default largest record, on the offsets topic.
	require.NoError(t, kafka.CreateTopic("causeway-connect-offsets", 25, map[string]string{"max.message.bytes": "1048588", "cleanup.policy": "compact"}))
	w, err := New(Config{Bootstrap: kafka.Bootstrap(), Client: kafka.Client(), Listen: "127.0.0.1:0", Log: zaptest.NewLogger(t)})
	require.NoError(t, err)
	defer func() { _ = w.server.Stop(context.Background()) }()
	cfg := map[string]string{"topic.creation.default.partitions": "1"}
	chain, err := transform.Parse(cfg)
	require.NoError(t, err)
	r, err := w.newSourceRunner("cdc", cfg, chain, zaptest.NewLogger(t), new(atomic.Int64))
	require.NoError(t, err)
	const txns = 2000
	pad := strings.Repeat("x", 800) // an end's schema and counts, as Debezium's
	var poll []connect.SourceRecord
	for i := range txns {
		id := fmt.Sprintf("t%d", i)
		poll = append(poll,
			connect.SourceRecord{Topic: "orders", Key: []byte(strconv.Itoa(i)), Value: []byte(`{"id":` + strconv.Itoa(i) + `}`), Transaction: id, Offset: []byte(strconv.Itoa(i))},
			connect.SourceRecord{Topic: "txn", Key: []byte(`"` + id + `"`), Value: []byte(`{"status":"END","pad":"` + pad + `"}`), Transaction: id, EndsTransaction: true})
	}
	task := &scripted{batches: [][]connect.SourceRecord{poll}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.run(ctx, task) }()
	asked := func() int {
		task.mu.Lock()
		defer task.mu.Unlock()
		return len(task.asked)
	}
	deadline := time.Now().Add(60 * time.Second)
	// Every end written, and the task polled again after them.
	for (len(kafka.Records(causal.Channel{Topic: "txn"})) < txns || asked() < 2) && time.Now().Before(deadline) {
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
	require.Len(t, orders, txns)
	require.Len(t, ends, txns)
	for i := range txns {
		assert.Equal(t, strconv.Itoa(i), string(orders[i].Key))
		end, _ := framework.Record(ends[i]).Header(connect.TxnEndHeader)
		assert.Equal(t, fmt.Sprintf("t%d", i), string(end))
	}
	assert.Equal(t, [][]byte{nil, []byte(strconv.Itoa(txns - 1))}, task.asked, "the next poll starts after the last transaction")
}
