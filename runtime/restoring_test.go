package runtime

import (
	"testing"
	"time"

	"github.com/causeway-stream/causeway/runtime/internal/restore"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework/taskmgr"
)

// A task whose restore takes long does not hold the others up: count/1
// restores, runs and commits while count/0 still reads its changelog.
// Meanwhile count/0 receives nothing and the group's offset of its
// partition stays where it was; once restored it reads the partition
// again from its checkpoint, and counts on from its restored state.
func TestARestoringTaskDoesNotStopTheOthers(t *testing.T) {
	topo, parts := counting(t)
	fake := newFakeKafka(t)
	first := newFakeWorker(t, fake, topo, parts)
	fake.send(in0, "a")
	fake.send(in1, "b")
	drainAndCommit(t, first)
	closeTasks(first.tasks, first.metrics, first.tasks.Tasks())

	// A new worker, with no local state: both tasks restore, and the read
	// of count/0's changelog is held.
	release := make(chan struct{})
	fake.holdRestore = map[causal.Channel]chan struct{}{{Topic: restore.StoreChangelogTopic("fake", "counts"), Partition: 0}: release}
	w := newFakeWorker(t, fake, topo, parts)
	count0, count1 := taskObject(t, w, "count/0"), taskObject(t, w, "count/1")
	waitRunning(t, w, count1)
	assert.Equal(t, StateRestoring, count0.State(), "count/0 was built before its restore was over")
	w.publishStatus()
	assert.False(t, w.Ready(), "ready while a task restores")

	fake.send(in1, "b")
	fake.send(in0, "a") // arrives while count/0 restores
	drainAndCommit(t, w)
	assert.Equal(t, 2, countOf(t, w, "count/1", "b"), "count/1 did not run while count/0 restored")
	assert.Equal(t, int64(2), fake.groupOffs[in1])
	assert.Equal(t, int64(1), fake.groupOffs[in0], "the group committed past what the restoring task had not read")

	close(release)
	waitRunning(t, w, count0)
	drainAndCommit(t, w)
	assert.Equal(t, 2, countOf(t, w, "count/0", "a"), "count/0 lost the record sent while it restored, or its restored count")
	assert.Equal(t, int64(2), fake.groupOffs[in0])
	w.publishStatus()
	assert.True(t, w.Ready())
}

// waitRunning takes what the worker's restore brings back until task rt
// runs.
func waitRunning(t *testing.T, w *StreamThread, rt *taskmgr.Task) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); rt.State() != StateRunning; time.Sleep(time.Millisecond) {
		require.True(t, time.Now().Before(deadline), "%s did not come out of its restore", rt.ID())
		w.restores.collect()
		require.NoError(t, w.fate.Fatal())
	}
}

// A query with a clock waits while its key's task restores, and answers
// once it runs and has committed what the clock names; the same query
// without a clock is told at once to ask again.
func TestACausalQueryWaitsForItsRestoringTask(t *testing.T) {
	topo, parts := counting(t)
	fake := newFakeKafka(t)
	first := newFakeWorker(t, fake, topo, parts)
	key := keyOn(t, 0, 2)
	fake.send(in0, key)
	drainAndCommit(t, first)
	closeTasks(first.tasks, first.metrics, first.tasks.Tasks())

	release := make(chan struct{})
	fake.holdRestore = map[causal.Channel]chan struct{}{{Topic: restore.StoreChangelogTopic("fake", "counts"), Partition: 0}: release}
	w := newFakeWorker(t, fake, topo, parts)
	count0 := taskObject(t, w, "count/0")
	waitRunning(t, w, taskObject(t, w, "count/1")) // the restore has read what it holds back
	require.Equal(t, StateRestoring, count0.State())
	off := fake.send(in0, key) // the client writes while the task restores
	clock, err := causal.NewClock(causal.Entry{Channel: in0, Offset: off})
	require.NoError(t, err)
	causalAnswer := asyncQuery(t, w, Query{Store: "counts", Kind: QueryGet, Key: []byte(key), After: clock, Wait: time.Minute})
	plainAnswer := asyncQuery(t, w, Query{Store: "counts", Kind: QueryGet, Key: []byte(key)})
	w.desk.answer()
	assert.ErrorIs(t, (<-plainAnswer).err, ErrNotAvailable, "a plain query is told to ask again")
	select {
	case r := <-causalAnswer:
		t.Fatalf("the causal query did not wait for the restore: %+v, %v", r.a, r.err)
	default:
	}

	close(release)
	waitRunning(t, w, count0)
	drainAndCommit(t, w)
	w.desk.answer()
	r := <-causalAnswer
	require.NoError(t, r.err)
	assert.Len(t, r.a.Value, 2, "the restored count and the client's write")
}
