package runtime

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
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
func asyncQuery(t *testing.T, w *Worker, q Query) <-chan queryReply {
	t.Helper()
	out := make(chan queryReply, 1)
	before := len(w.queries)
	go func() {
		a, err := w.Query(context.Background(), q)
		out <- queryReply{a: a, err: err}
	}()
	for deadline := time.Now().Add(5 * time.Second); len(w.queries) == before; time.Sleep(time.Millisecond) {
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
	w.drainAndCommit(t)
	get := func() Answer {
		t.Helper()
		answer := asyncQuery(t, w, Query{Store: "counts", Kind: QueryGet, Key: []byte(key)})
		w.takeQueries()
		r := <-answer
		require.NoError(t, r.err)
		require.True(t, r.a.Found)
		return r.a
	}

	fake.send(in0, key) // a third, in a transaction still open
	for w.poll() > 0 {
		w.handlePolled()
	}
	require.Equal(t, 3, countOf(t, w, "count/0", key))
	a := get()
	assert.Len(t, a.Value, 2, "the answer showed a write the open transaction holds")
	assert.Equal(t, []int32{0}, a.Partitions)
	fake.commitErr = errors.New("the broker went away")
	err := w.commit()
	require.Error(t, err)
	w.onCommitError(err) // aborts: the third count is taken back
	assert.Len(t, get().Value, 2)

	w.drainAndCommit(t) // the third record again, committed this time
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
	w.drainAndCommit(t)
	ask := func(q Query) (Answer, error) {
		answer := asyncQuery(t, w, q)
		w.answerQueries()
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

	w.tasks.Fail(w.taskObject(t, "count/1"), errors.New("boom"))
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
// record that reaches the store only through another processor is
// refused.
func TestCausalQueriesReadYourWrites(t *testing.T) {
	topo, counts := counting(t)
	fake := newFakeKafka(t)
	w := newFakeWorker(t, fake, topo, counts)
	key := keyOn(t, 0, 2)
	fake.send(in0, key)
	w.drainAndCommit(t)

	// The client writes again, and asks at once.
	off := fake.send(in0, key)
	clock, err := causal.NewClock(causal.Entry{Channel: in0, Offset: off})
	require.NoError(t, err)
	causalAnswer := asyncQuery(t, w, Query{Store: "counts", Kind: QueryGet, Key: []byte(key), After: clock, Wait: time.Minute})
	plainAnswer := asyncQuery(t, w, Query{Store: "counts", Kind: QueryGet, Key: []byte(key)})
	w.answerQueries()
	plain := <-plainAnswer
	require.NoError(t, plain.err)
	assert.Len(t, plain.a.Value, 1, "without its clock the client does not see its own write")
	select {
	case r := <-causalAnswer:
		t.Fatalf("answered before the task committed the client's write: %+v", r)
	default:
	}
	w.drainAndCommit(t)
	w.answerQueries()
	r := <-causalAnswer
	require.NoError(t, r.err)
	assert.Len(t, r.a.Value, 2, "with its clock the client reads its own write")

	never, err := causal.NewClock(causal.Entry{Channel: in0, Offset: 1000})
	require.NoError(t, err)
	late := asyncQuery(t, w, Query{Store: "counts", Kind: QueryGet, Key: []byte(key), After: never, Wait: time.Millisecond})
	time.Sleep(5 * time.Millisecond)
	w.answerQueries()
	assert.ErrorIs(t, (<-late).err, ErrNotCaughtUp)

	upstream, err := causal.NewClock(causal.Entry{Channel: causal.Channel{Topic: "lines"}, Offset: 3})
	require.NoError(t, err)
	refused := asyncQuery(t, w, Query{Store: "counts", Kind: QueryGet, Key: []byte(key), After: upstream})
	w.answerQueries()
	assert.ErrorIs(t, (<-refused).err, ErrClockNotCheckable)
}
