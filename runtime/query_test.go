package runtime

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/runtime/internal/upstream"
)

// keyOn returns a key Kafka's partitioner puts on partition p of n.
func keyOn(t *testing.T, p, n int32) string {
	t.Helper()
	for i := range 1000 {
		if k := fmt.Sprint("k", i); framework.PartitionFor([]byte(k), n) == p {
			return k
		}
	}
	t.Fatalf("no key on partition %d", p)
	return ""
}

// asyncQuery asks w in the background and returns where its answer
// arrives, once the query waits for the pump to take it.
func asyncQuery(t *testing.T, w *StreamThread, q Query) <-chan queryReply {
	t.Helper()
	out := make(chan queryReply, 1)
	before := len(w.desk.arrived)
	go func() {
		a, err := w.Query(context.Background(), q)
		out <- queryReply{a: a, err: err}
	}()
	for deadline := time.Now().Add(5 * time.Second); len(w.desk.arrived) == before; time.Sleep(time.Millisecond) {
		require.True(t, time.Now().Before(deadline), "the query never reached the pump")
	}
	return out
}

// A query reads committed state only: while a transaction holds a write,
// the answer is the committed value, and a write the transaction then
// takes back is never seen.
func TestQueriesReadCommittedStateOnly(t *testing.T) {
	topo, counts := counting(t)
	fake := newFakeKafka(t)
	w := newFakeWorker(t, fake, topo, counts)
	key := keyOn(t, 0, 2)
	fake.send(in0, key)
	fake.send(in0, key)
	drainAndCommit(t, w)
	get := func() Answer {
		t.Helper()
		answer := asyncQuery(t, w, Query{Store: "counts", Kind: QueryGet, Key: []byte(key)})
		w.desk.takeArrived()
		r := <-answer
		require.NoError(t, r.err)
		require.True(t, r.a.Found)
		return r.a
	}

	fake.send(in0, key) // a third, in a transaction still open
	pollAll(w)
	require.Equal(t, 3, countOf(t, w, "count/0", key))
	a := get()
	assert.Len(t, a.Value, 2, "the answer showed a write the open transaction holds")
	assert.Equal(t, []int32{0}, a.Partitions)
	fake.commitErr = errors.New("the broker went away")
	err := w.commits.commit()
	require.Error(t, err)
	w.commits.onError(err) // aborts: the third count is taken back
	assert.Len(t, get().Value, 2)

	drainAndCommit(t, w) // the third record again, committed this time
	assert.Len(t, get().Value, 3)
}

// Queries name what they cannot answer: an unknown store, a key whose
// task is not here or cannot be read, and ranges over what is here.
func TestQueryAnswersAndRefusals(t *testing.T) {
	topo, counts := counting(t)
	fake := newFakeKafka(t)
	w := newFakeWorker(t, fake, topo, counts)
	k0, k1 := keyOn(t, 0, 2), keyOn(t, 1, 2)
	fake.send(in0, k0)
	fake.send(in1, k1)
	fake.send(in1, k1)
	drainAndCommit(t, w)
	ask := func(q Query) (Answer, error) {
		answer := asyncQuery(t, w, q)
		w.desk.answer()
		r := <-answer
		return r.a, r.err
	}

	a, err := ask(Query{Store: "counts", Kind: QueryRange})
	require.NoError(t, err)
	require.Len(t, a.Entries, 2)
	assert.True(t, a.Complete)
	got := map[string]int{}
	for _, e := range a.Entries {
		got[string(e.Key)] = len(e.Value)
	}
	assert.Equal(t, map[string]int{k0: 1, k1: 2}, got)

	_, err = ask(Query{Store: "nope", Kind: QueryGet, Key: []byte(k0)})
	assert.ErrorIs(t, err, ErrUnknownStore)

	w.tasks.Fail(taskObject(t, w, "count/1"), errors.New("boom"))
	_, err = ask(Query{Store: "counts", Kind: QueryGet, Key: []byte(k1)})
	assert.ErrorIs(t, err, ErrNotAvailable)
	a, err = ask(Query{Store: "counts", Kind: QueryRange})
	require.NoError(t, err)
	assert.False(t, a.Complete, "a range without one of the partitions says so")
	assert.Equal(t, []int32{0}, a.Partitions)

	w.tasks.CloseAll() // as after a rebalance that took every task away
	_, err = ask(Query{Store: "counts", Kind: QueryGet, Key: []byte(k0)})
	assert.ErrorIs(t, err, ErrNotLocal)
}

// A query with a client's clock waits until the key's task has committed
// what the clock names, so the client reads its own write; without the
// clock the same query answers at once, without it. A clock the task
// never catches up with fails after the query's wait, and one naming a
// record that cannot reach the store is ignored.
func TestCausalQueriesReadYourWrites(t *testing.T) {
	topo, counts := counting(t)
	fake := newFakeKafka(t)
	w := newFakeWorker(t, fake, topo, counts)
	key := keyOn(t, 0, 2)
	fake.send(in0, key)
	drainAndCommit(t, w)

	// The client writes again, and asks at once.
	off := fake.send(in0, key)
	clock, err := causal.NewClock(causal.Entry{Channel: in0, Offset: off})
	require.NoError(t, err)
	causalAnswer := asyncQuery(t, w, Query{Store: "counts", Kind: QueryGet, Key: []byte(key), After: clock, Wait: time.Minute})
	plainAnswer := asyncQuery(t, w, Query{Store: "counts", Kind: QueryGet, Key: []byte(key)})
	w.desk.answer()
	plain := <-plainAnswer
	require.NoError(t, plain.err)
	assert.Len(t, plain.a.Value, 1, "without its clock the client does not see its own write")
	select {
	case r := <-causalAnswer:
		t.Fatalf("answered before the task committed the client's write: %+v", r)
	default:
	}
	drainAndCommit(t, w)
	w.desk.answer()
	r := <-causalAnswer
	require.NoError(t, r.err)
	assert.Len(t, r.a.Value, 2, "with its clock the client reads its own write")

	never, err := causal.NewClock(causal.Entry{Channel: in0, Offset: 1000})
	require.NoError(t, err)
	late := asyncQuery(t, w, Query{Store: "counts", Kind: QueryGet, Key: []byte(key), After: never, Wait: time.Millisecond})
	time.Sleep(5 * time.Millisecond)
	w.desk.answer()
	assert.ErrorIs(t, (<-late).err, ErrNotCaughtUp)

	unrelated, err := causal.NewClock(causal.Entry{Channel: causal.Channel{Topic: "elsewhere"}, Offset: 3})
	require.NoError(t, err)
	ignored := asyncQuery(t, w, Query{Store: "counts", Kind: QueryGet, Key: []byte(key), After: unrelated, Wait: time.Minute})
	w.desk.takeArrived()
	select {
	case r := <-ignored:
		require.NoError(t, r.err)
		assert.Len(t, r.a.Value, 2)
	case <-time.After(5 * time.Second):
		t.Fatal("a claim on a topic that never reaches the store held the query")
	}
}

// fakeCluster answers a worker's questions about the group's offsets and
// the ends of partitions as the fake stood when it last looked (look):
// the fake itself belongs to the test's goroutine.
type fakeCluster struct {
	mu        sync.Mutex
	committed map[causal.Channel]int64
	ends      map[causal.Channel]int64
	asked     int
}

func (c *fakeCluster) look(f *fakeKafka) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.committed, c.ends = maps.Clone(f.groupOffs), maps.Clone(f.high)
}

func (c *fakeCluster) GroupCommitted(_ context.Context, chs []causal.Channel) (map[causal.Channel]int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.asked++
	out := map[causal.Channel]int64{}
	for _, ch := range chs {
		if off, ok := c.committed[ch]; ok {
			out[ch] = off
		}
	}
	return out, nil
}

func (c *fakeCluster) Ends(_ context.Context, chs []causal.Channel) (map[causal.Channel]int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[causal.Channel]int64{}
	for _, ch := range chs {
		if _, twice := out[ch]; twice {
			return nil, fmt.Errorf("%s asked twice", ch) // as librdkafka's admin client refuses it
		}
		out[ch] = c.ends[ch]
	}
	return out, nil
}

// splitAndCount: "split" forwards each line to "words" (keyed as it came),
// where "count" counts it.
func splitAndCount(t *testing.T) (*framework.Topology, map[string]int32) {
	t.Helper()
	topo, err := framework.NewBuilder("wc").
		Processor("split", func() framework.Processor {
			return framework.ProcessorFunc(func(ctx framework.Context, rec framework.Record) error {
				return ctx.Forward(framework.Record{Key: rec.Key, Value: rec.Value})
			})
		}, framework.From("lines"), framework.To("words")).
		Processor("count", countInto, framework.From("words"), framework.Stores(framework.KeyValueStore("counts"))).
		Build()
	require.NoError(t, err)
	return topo, map[string]int32{"lines": 2, "words": 2}
}

// A client writes a line and asks for its word's count with its session's
// clock, which names the line, two processors before the counts. The
// query waits until the splitter has committed the line, then until the
// counter has committed everything the splitter had written by then, and
// sees the client's write; the same query without the clock does not.
func TestCausalQueriesFollowTheirClockUpstream(t *testing.T) {
	topo, counts := splitAndCount(t)
	fake := newFakeKafka(t)
	w := newFakeWorker(t, fake, topo, counts)
	cluster := &fakeCluster{}
	w.desk.follow(upstream.NewView(cluster, map[string]int32{"lines": 2, "words": 2}, nil, w.desk.sleep))
	lines0 := causal.Channel{Topic: "lines", Partition: 0}
	words0 := causal.Channel{Topic: "words", Partition: 0}
	key := keyOn(t, 0, 2)
	fake.send(lines0, key)
	drainAndCommit(t, w) // split
	drainAndCommit(t, w) // count
	require.Equal(t, "x", string(readCount(t, w, key)))

	fake.lag(words0) // the counter falls behind
	off := fake.send(lines0, key)
	// A line on the other partition too, which the splitter commits in the
	// same transaction: both claims lead to the same topic.
	other := fake.send(causal.Channel{Topic: "lines", Partition: 1}, keyOn(t, 1, 2))
	cluster.look(fake)
	clock, err := causal.NewClock(causal.Entry{Channel: lines0, Offset: off}, causal.Entry{Channel: causal.Channel{Topic: "lines", Partition: 1}, Offset: other})
	require.NoError(t, err)
	causalAnswer := make(chan queryReply, 1)
	go func() {
		a, err := w.Query(context.Background(), Query{Store: "counts", Kind: QueryGet, Key: []byte(key), After: clock, Wait: time.Minute})
		causalAnswer <- queryReply{a: a, err: err}
	}()
	// It asks the group's offsets again and again, and goes no further.
	for deadline, asked := time.Now().Add(5*time.Second), 0; asked < 2 && len(w.desk.arrived) == 0; time.Sleep(time.Millisecond) {
		require.True(t, time.Now().Before(deadline), "the query neither asked the group's offsets nor reached the pump")
		cluster.mu.Lock()
		asked = cluster.asked
		cluster.mu.Unlock()
	}
	require.Empty(t, w.desk.arrived, "the query reached the store before the splitter committed the line")

	drainAndCommit(t, w) // split takes the line; its word waits for the counter
	cluster.look(fake)
	for deadline := time.Now().Add(5 * time.Second); len(w.desk.arrived) == 0; time.Sleep(time.Millisecond) {
		require.True(t, time.Now().Before(deadline), "the query never followed the splitter's commit")
	}
	plainAnswer := asyncQuery(t, w, Query{Store: "counts", Kind: QueryGet, Key: []byte(key)})
	w.desk.answer()
	plain := <-plainAnswer
	require.NoError(t, plain.err)
	assert.Equal(t, "x", string(plain.a.Value), "without its clock the client does not see its own write")
	select {
	case r := <-causalAnswer:
		t.Fatalf("answered before the counter committed the client's word: %+v", r)
	default:
	}

	fake.catchUp(words0)
	drainAndCommit(t, w)
	w.desk.answer()
	r := <-causalAnswer
	require.NoError(t, r.err)
	assert.Equal(t, "xx", string(r.a.Value), "with its clock the client reads its own write")

	// A line the splitter never commits: the query gives up at its bound.
	fake.lag(lines0)
	stuck := fake.send(lines0, key)
	cluster.look(fake)
	never, err := causal.NewClock(causal.Entry{Channel: lines0, Offset: stuck})
	require.NoError(t, err)
	_, err = w.Query(context.Background(), Query{Store: "counts", Kind: QueryGet, Key: []byte(key), After: never, Wait: 30 * time.Millisecond})
	assert.ErrorIs(t, err, ErrNotCaughtUp)

	// A line that does not exist, past the partition's end: refused at
	// once, as such claims are where records enter, not after the wait.
	beyond, err := causal.NewClock(causal.Entry{Channel: lines0, Offset: 1000})
	require.NoError(t, err)
	start := time.Now()
	_, err = w.Query(context.Background(), Query{Store: "counts", Kind: QueryGet, Key: []byte(key), After: beyond, Wait: time.Minute})
	assert.ErrorIs(t, err, ErrClockBeyondEnd)
	assert.ErrorContains(t, err, fmt.Sprintf("it claims lines/0 up to offset 1000, and lines/0 ends at offset %d", stuck))
	assert.Less(t, time.Since(start), 30*time.Second, "refused without waiting the minute")
}

// readCount reads key's committed count from the counts store.
func readCount(t *testing.T, w *StreamThread, key string) []byte {
	t.Helper()
	rt, err := w.desk.reader().Task("count", framework.PartitionFor([]byte(key), 2))
	require.NoError(t, err)
	kv, ok := rt.Task().CommittedStore("counts")
	require.True(t, ok)
	v, _, err := kv.Get([]byte(key))
	require.NoError(t, err)
	return v
}

// A task that moves away while a query waits for it: the query learns so
// at once, with an error that says to ask again elsewhere, and is never
// answered from a store the worker no longer holds; once the task is back
// it answers from its committed state.
func TestAQueryWhoseTaskMovesSaysSo(t *testing.T) {
	topo, counts := counting(t)
	fake := newFakeKafka(t)
	w := newFakeWorker(t, fake, topo, counts)
	key := keyOn(t, 0, 2)
	fake.send(in0, key)
	drainAndCommit(t, w)

	fake.lag(in0)
	off := fake.send(in0, key)
	clock, err := causal.NewClock(causal.Entry{Channel: in0, Offset: off})
	require.NoError(t, err)
	waiting := asyncQuery(t, w, Query{Store: "counts", Kind: QueryGet, Key: []byte(key), After: clock, Wait: time.Minute})
	w.desk.answer()
	require.Len(t, w.desk.pending, 1, "the query waits for the client's write")

	assigned := w.pump.assigned
	w.revoke(assigned, false)
	select {
	case r := <-waiting:
		require.ErrorIs(t, r.err, ErrNotLocal, "answered %+v", r.a)
	case <-time.After(5 * time.Second):
		t.Fatal("the query still waited after its task moved away")
	}
	plain := asyncQuery(t, w, Query{Store: "counts", Kind: QueryGet, Key: []byte(key)})
	w.desk.answer()
	assert.ErrorIs(t, (<-plain).err, ErrNotLocal)

	require.NoError(t, rebalancer{w}.Assigned(assigned))
	back := asyncQuery(t, w, Query{Store: "counts", Kind: QueryGet, Key: []byte(key)})
	w.desk.answer()
	r := <-back
	if !errors.Is(r.err, ErrNotAvailable) { // still restoring is fine; an empty answer is not
		require.NoError(t, r.err)
		assert.Len(t, r.a.Value, 1, "the committed count, from the task back on this worker")
	}
}
