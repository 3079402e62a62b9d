package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/dsl"
	"github.com/causeway-stream/causeway/framework/query"
	"github.com/causeway-stream/causeway/framework/serde"
	"github.com/causeway-stream/causeway/operators"
	"github.com/causeway-stream/causeway/runtime"
)

// A worker on a broker answers typed queries over HTTP from its stores:
// a count by key, every count in key order, and a key in no store.
func TestQueriesOverHTTP(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	createTopics(t, b.Addr(), 2, "words", "counts")
	text := operators.Codec[string, string]{Key: serde.String(), Value: serde.String()}
	db := dsl.NewBuilder("counter")
	dsl.From(db, "words", text).GroupByKey().Count("word-counts").ToStream().To("counts")
	topo, err := db.Build()
	require.NoError(t, err)

	want := produceWords(t, b.Addr(), 60, 7)
	topic := "words"

	w := startTopology(t, testConfig(t, b.Addr(), "counter"), topo, nil)
	srv := runtime.NewServer("127.0.0.1:0", w, zap.NewNop())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, srv.Start(ctx))
	t.Cleanup(func() { assert.NoError(t, srv.Stop(context.Background())) })
	readCommitted(t, b.Addr(), "counts", 60, time.Minute) // every word counted and committed
	// /status says each input channel is read to its end: no lag.
	for caughtUp := false; !caughtUp; time.Sleep(50 * time.Millisecond) {
		require.NoError(t, ctx.Err(), "the status never showed the inputs caught up: %+v", w.Status().Tasks)
		caughtUp = true
		for _, ts := range w.Status().Tasks {
			for _, c := range ts.Channels {
				caughtUp = caughtUp && c.Lag != nil && *c.Lag == 0 && c.Committed > 0
			}
		}
	}

	c := query.NewClient("http://" + srv.Addr())
	for word, n := range want {
		got, found, err := query.Get(ctx, c, "word-counts", word, serde.String(), serde.Int64())
		require.NoError(t, err)
		assert.True(t, found, word)
		assert.Equal(t, n, got, word)
	}
	_, found, err := query.Get(ctx, c, "word-counts", "never-written", serde.String(), serde.Int64())
	require.NoError(t, err)
	assert.False(t, found)

	all, complete, err := query.Range(ctx, c, "word-counts", nil, nil, 0, serde.String(), serde.Int64())
	require.NoError(t, err)
	assert.True(t, complete, "one worker holds every partition")
	got := map[string]int64{}
	for i, e := range all {
		got[e.Key] = e.Value
		if i > 0 {
			assert.Less(t, all[i-1].Key, e.Key, "in key order")
		}
	}
	assert.Equal(t, want, got)

	// A client writes a word and asks for it at once, with its session's
	// clock: the answer waits for the worker to commit it.
	var session causal.Session
	p2, err := kafka.NewProducer(&kafka.ConfigMap{"bootstrap.servers": b.Addr(), "enable.metrics.push": false, "partitioner": "murmur2_random"})
	require.NoError(t, err)
	defer p2.Close()
	dr := make(chan kafka.Event, 1)
	require.NoError(t, p2.Produce(&kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: kafka.PartitionAny},
		Key: []byte("fresh"), Value: []byte("fresh")}, dr))
	m := (<-dr).(*kafka.Message)
	require.NoError(t, m.TopicPartition.Error)
	session.Produced(causal.Channel{Topic: topic, Partition: m.TopicPartition.Partition}, int64(m.TopicPartition.Offset))
	n, found, err := query.Get(ctx, c, "word-counts", "fresh", serde.String(), serde.Int64(), query.After(session.Clock(), 30*time.Second))
	require.NoError(t, err)
	assert.True(t, found, "the client read its own write")
	assert.Equal(t, int64(1), n)

	_, _, err = query.Get(ctx, c, "no-such-store", "w1", serde.String(), serde.Int64())
	var qe *query.Error
	require.True(t, errors.As(err, &qe), "%v", err)
	assert.Equal(t, 404, qe.Status)
	assert.False(t, qe.Retryable)
}

// Two workers share an application's tasks; a query for any key, asked
// of either, is answered by the one holding it: the other forwards it,
// having read from the members topic which worker runs which task.
func TestQueriesFindTheWorkerHoldingTheKey(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	createTopics(t, b.Addr(), 4, "words", "counts")
	text := operators.Codec[string, string]{Key: serde.String(), Value: serde.String()}
	db := dsl.NewBuilder("counter")
	dsl.From(db, "words", text).GroupByKey().Count("word-counts").ToStream().To("counts")
	topo, err := db.Build()
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var workers []*runtime.Worker
	var clients []*query.Client
	for i := range 2 {
		cfg := testConfig(t, b.Addr(), "counter")
		cfg.InstanceID = fmt.Sprint("worker-", i)
		w := startTopology(t, cfg, topo, nil)
		srv := runtime.NewServer("127.0.0.1:0", w, zap.NewNop())
		require.NoError(t, srv.Start(ctx))
		t.Cleanup(func() { assert.NoError(t, srv.Stop(context.Background())) })
		workers = append(workers, w)
		clients = append(clients, query.NewClient("http://"+srv.Addr()))
	}
	// Both hold tasks, four in all.
	for {
		n, both := 0, true
		for _, w := range workers {
			st := w.Status()
			n += len(st.Tasks)
			both = both && len(st.Tasks) > 0 && st.Ready
		}
		if both && n == 4 {
			break
		}
		require.NoError(t, ctx.Err(), "the workers never shared the tasks")
		time.Sleep(100 * time.Millisecond)
	}

	want := produceWords(t, b.Addr(), 80, 11)
	readCommitted(t, b.Addr(), "counts", 80, time.Minute)

	forwarded := 0
	for i, c := range clients {
		for word, n := range want {
			var got int64
			for {
				v, found, err := query.Get(ctx, c, "word-counts", word, serde.String(), serde.Int64())
				var qe *query.Error
				if errors.As(err, &qe) && qe.Retryable { // the members topic not read yet
					require.NoError(t, ctx.Err(), "%s never found through worker %d: %v", word, i, err)
					time.Sleep(100 * time.Millisecond)
					continue
				}
				require.NoError(t, err)
				require.True(t, found, "%s through worker %d", word, i)
				got = v
				break
			}
			assert.Equal(t, n, got, "%s through worker %d", word, i)
			if _, local := taskOf(workers[i], word); !local {
				forwarded++
			}
		}
	}
	assert.Positive(t, forwarded, "some queries had to be forwarded")
}

// taskOf says which task of the counter holds word, and whether w runs it.
func taskOf(w *runtime.Worker, word string) (string, bool) {
	id := fmt.Sprint("words/", framework.PartitionFor([]byte(word), 4))
	for _, ts := range w.Status().Tasks {
		if ts.ID == id {
			return id, true
		}
	}
	return id, false
}

// produceWords writes n words, of distinct kinds, to "words", placed by
// Kafka's default partitioner (murmur2) as queries find keys, and returns
// how often each was written.
func produceWords(t *testing.T, addr string, n, distinct int) map[string]int64 {
	t.Helper()
	p, err := kafka.NewProducer(&kafka.ConfigMap{"bootstrap.servers": addr, "enable.metrics.push": false, "go.delivery.reports": false,
		"partitioner": "murmur2_random"})
	require.NoError(t, err)
	defer p.Close()
	topic := "words"
	want := map[string]int64{}
	for i := range n {
		w := fmt.Sprint("w", i%distinct)
		want[w]++
		require.NoError(t, p.Produce(&kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: kafka.PartitionAny},
			Key: []byte(w), Value: []byte(w)}, nil))
	}
	require.Zero(t, p.Flush(10_000))
	return want
}
