package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/dsl"
	"github.com/causeway-stream/causeway/framework/query"
	"github.com/causeway-stream/causeway/framework/serde"
	"github.com/causeway-stream/causeway/runtime"
)

// A worker on a broker answers typed queries over HTTP from its stores:
// a count by key, every count in key order, and a key in no store.
func TestQueriesOverHTTP(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	createTopics(t, b.Addr(), 2, "words", "counts")
	topo := wordCounter(t)

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
	fresh := &kgo.Record{Topic: topic, Key: []byte("fresh"), Value: []byte("fresh")}
	sendRecord(t, newProducer(t, b.Addr()), fresh, &session)
	n, found, err := query.Get(ctx, c, "word-counts", "fresh", serde.String(), serde.Int64(), query.After(session.Clock(), 30*time.Second))
	require.NoError(t, err)
	assert.True(t, found, "the client read its own write")
	assert.Equal(t, int64(1), n)

	// A clock naming a record not committed yet (here in a client's
	// transaction left open): the query waits its bound, then gets 503,
	// to retry.
	txn := newProducer(t, b.Addr(), kgo.TransactionalID("open-words"))
	require.NoError(t, txn.BeginTransaction())
	var open causal.Session
	sendRecord(t, txn, &kgo.Record{Topic: topic, Key: []byte("open"), Value: []byte("open")}, &open)
	began := time.Now()
	_, _, err = query.Get(ctx, c, "word-counts", "open", serde.String(), serde.Int64(), query.After(open.Clock(), 300*time.Millisecond))
	waited := time.Since(began)
	var qe *query.Error
	require.True(t, errors.As(err, &qe), "%v", err)
	assert.Equal(t, 503, qe.Status)
	assert.True(t, qe.Retryable)
	assert.GreaterOrEqual(t, waited, 300*time.Millisecond, "it waited its bound")
	assert.Less(t, waited, 10*time.Second, "and not much longer")
	require.NoError(t, txn.EndTransaction(ctx, kgo.TryAbort))

	// A clock naming an offset no record has: refused at once, as a claim
	// entering the topology is, with 400: retrying cannot help.
	never, err := causal.NewClock(causal.Entry{Channel: causal.Channel{Topic: topic, Partition: fresh.Partition}, Offset: 1_000_000})
	require.NoError(t, err)
	began = time.Now()
	_, _, err = query.Get(ctx, c, "word-counts", "fresh", serde.String(), serde.Int64(), query.After(never, time.Minute))
	require.True(t, errors.As(err, &qe), "%v", err)
	assert.Equal(t, 400, qe.Status)
	assert.False(t, qe.Retryable)
	assert.Contains(t, qe.Error(), "the query's clock claims a record that does not exist")
	assert.Less(t, time.Since(began), 10*time.Second, "without waiting its minute")

	_, _, err = query.Get(ctx, c, "no-such-store", "w1", serde.String(), serde.Int64())
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
	topo := wordCounter(t)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var workers []*runtime.StreamThread
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

// wordCounter counts the words of "words" in store "word-counts", and
// writes the counts to "counts".
func wordCounter(t *testing.T) *framework.Topology {
	t.Helper()
	text := serde.Codec[string, string]{Key: serde.String(), Value: serde.String()}
	db := dsl.NewBuilder("counter")
	dsl.From(db, "words", text).GroupByKey().Count("word-counts").ToStream().To("counts")
	topo, err := db.Build()
	require.NoError(t, err)
	return topo
}

// taskOf says which task of the counter holds word, and whether w runs it.
func taskOf(w *runtime.StreamThread, word string) (string, bool) {
	id := fmt.Sprint("aggregate-word-counts/", framework.PartitionFor([]byte(word), 4))
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
	p := newProducer(t, addr)
	want := map[string]int64{}
	for i := range n {
		w := fmt.Sprint("w", i%distinct)
		want[w]++
		p.Produce(context.Background(), &kgo.Record{Topic: "words", Key: []byte(w), Value: []byte(w)},
			func(_ *kgo.Record, err error) { assert.NoError(t, err) })
	}
	require.NoError(t, p.Flush(context.Background()))
	return want
}

// On a broker: a client writes a line and asks at once, with the line's
// clock, for a word's count, which a counter keeps after a repartition,
// while the counter's fetches of the repartition topic fail. The query
// follows the line through the splitter's commit and the repartition topic
// and answers with the client's word counted; the same query without the
// clock answers without it.
func TestCausalQueriesReadThroughARepartition(t *testing.T) {
	t.Parallel()
	eachClient(t, func(t *testing.T, client string) {
		b := startBroker(t)
		createTopics(t, b.Addr(), 2, "lines")
		text := serde.Codec[string, string]{Key: serde.String(), Value: serde.String()}
		db := dsl.NewBuilder("wc")
		words := dsl.FlatMapValues(dsl.From(db, "lines", text), func(_, line string) ([]string, error) { return strings.Fields(line), nil })
		dsl.GroupBy(words, func(_, w string) (string, error) { return w, nil }).Count("word-counts")
		topo, err := db.Build()
		require.NoError(t, err)
		w := startTopology(t, testConfigFor(t, client, b.Addr(), "upstream"), topo, nil)

		var repartition string
		for _, pi := range topo.ForApplication("upstream").Processors() {
			for _, s := range pi.Stores {
				if s.Name == "word-counts" {
					repartition = pi.Inputs[0]
				}
			}
		}
		require.NotEqual(t, "lines", repartition, "the count reads a repartition topic")

		p := newProducer(t, b.Addr())
		write := func(line string) causal.Clock {
			t.Helper()
			var s causal.Session
			sendRecord(t, p, &kgo.Record{Topic: "lines", Key: []byte(line), Value: []byte(line)}, &s)
			return s.Clock()
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		count := func(q runtime.Query) (int64, error) {
			a, err := w.Query(ctx, q)
			if err != nil || !a.Found {
				return 0, err
			}
			return serde.Int64().Deserialize(a.Value)
		}
		get := runtime.Query{Store: "word-counts", Kind: runtime.QueryGet, Key: []byte("causal")}

		// The first line, read back once counted.
		first := get
		first.After, first.Wait = write("causal reads"), 30*time.Second
		n, err := count(first)
		for errors.Is(err, runtime.ErrNotAvailable) { // the counter still restores
			require.NoError(t, ctx.Err())
			time.Sleep(50 * time.Millisecond)
			n, err = count(first)
		}
		require.NoError(t, err)
		require.EqualValues(t, 1, n)

		// The counter falls behind; the client writes again and asks at once.
		lag := b.Cluster().Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Topic: repartition, Partitions: []int32{0, 1},
			Err: kerr.NotLeaderForPartition, Count: -1})
		second := get
		second.After, second.Wait = write("causal again"), 30*time.Second
		answered := make(chan error, 1)
		var seen int64
		go func() {
			var err error
			seen, err = count(second)
			answered <- err
		}()
		plain, err := count(get)
		require.NoError(t, err)
		assert.EqualValues(t, 1, plain, "without its clock the client does not see its own write")
		select {
		case err := <-answered:
			t.Fatalf("the causal query answered while the counter could not read the word (%d, %v)", seen, err)
		case <-time.After(time.Second):
		}
		lag.Remove()
		require.NoError(t, <-answered)
		assert.EqualValues(t, 2, seen, "with its clock the client reads its own write")
	})
}

// A process of two stream threads answers for all its tasks as one: the
// status lists every task, each thread runs some, gets find the thread
// holding the key, and a range reads every partition. (Without the
// routing, a get goes to the first thread only and half the keys are
// "held elsewhere".)
func TestTwoThreadsAnswerForTheWholeProcess(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	createTopics(t, b.Addr(), 4, "words", "counts")
	topo := wordCounter(t)
	want := produceWords(t, b.Addr(), 80, 9)

	cfg := testConfig(t, b.Addr(), "threaded")
	cfg.Threads = 2
	in, err := runtime.NewInstance(cfg, topo, zap.NewNop(), nil)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, in.Start(ctx))
	t.Cleanup(func() { assert.NoError(t, in.Stop(context.Background())) })
	srv := runtime.NewServer("127.0.0.1:0", in, zap.NewNop())
	require.NoError(t, srv.Start(ctx))
	t.Cleanup(func() { assert.NoError(t, srv.Stop(context.Background())) })
	readCommitted(t, b.Addr(), "counts", 80, time.Minute)

	for {
		busy := 0
		for _, th := range in.Threads() {
			if len(th.Status().Tasks) > 0 {
				busy++
			}
		}
		if busy == 2 && len(in.Status().Tasks) == 4 && in.Ready() {
			break
		}
		require.NoError(t, ctx.Err(), "the threads never shared the four tasks: %+v", in.Status())
		time.Sleep(50 * time.Millisecond)
	}
	c := query.NewClient("http://" + srv.Addr())
	// A task moved between the threads may still restore: its answers
	// say to ask again.
	retry := func(err error) bool {
		var qe *query.Error
		if errors.As(err, &qe) && qe.Retryable && ctx.Err() == nil {
			time.Sleep(50 * time.Millisecond)
			return true
		}
		return false
	}
	for word, n := range want {
		got, found, err := query.Get(ctx, c, "word-counts", word, serde.String(), serde.Int64())
		for retry(err) {
			got, found, err = query.Get(ctx, c, "word-counts", word, serde.String(), serde.Int64())
		}
		require.NoError(t, err, word)
		require.True(t, found, word)
		assert.Equal(t, n, got, word)
	}
	var all []query.Entry[string, int64]
	var complete bool
	for {
		all, complete, err = query.Range[string, int64](ctx, c, "word-counts", nil, nil, 0, serde.String(), serde.Int64())
		if retry(err) {
			continue
		}
		if err == nil && !complete && ctx.Err() == nil { // a partition restoring is left out, and said so
			time.Sleep(50 * time.Millisecond)
			continue
		}
		break
	}
	require.NoError(t, err)
	assert.True(t, complete, "the process holds every partition")
	assert.Len(t, all, len(want))
}
