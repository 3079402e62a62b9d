package runtime

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/causeway-stream/causeway/runtime/internal/restore"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/task"
	"github.com/causeway-stream/causeway/runtime/internal/transport"
)

var (
	in0   = causal.Channel{Topic: "in", Partition: 0}
	in1   = causal.Channel{Topic: "in", Partition: 1}
	side0 = causal.Channel{Topic: "side", Partition: 0}
)

// twoReaders: processor a reads "in" and fails on "poison" while poisoned
// is set; processor b reads "in" and "side" (so its gate can hold "in"
// records that claim "side"). Both forward what they process.
func twoReaders(t *testing.T, poisoned *atomic.Bool, aOpts ...framework.ProcessorOpt) (*framework.Topology, map[string]int32) {
	t.Helper()
	forward := func(fail bool) func() framework.Processor {
		return func() framework.Processor {
			return framework.ProcessorFunc(func(ctx framework.Context, rec framework.Record) error {
				if fail && poisoned.Load() && string(rec.Value) == "poison" {
					return errors.New("poisoned")
				}
				return ctx.Forward(framework.Record{Key: rec.Key, Value: rec.Value})
			})
		}
	}
	topo, err := framework.NewBuilder("two").
		Processor("a", forward(true), append([]framework.ProcessorOpt{framework.From("in"), framework.To("out-a")}, aOpts...)...).
		Processor("b", forward(false), framework.From("in", "side"), framework.To("out-b")).
		DeadLetterTopic("dead").
		Build()
	require.NoError(t, err)
	return topo, map[string]int32{"in": 2, "side": 2, "out-a": 2, "out-b": 2, "dead": 1}
}

// poisonedWorker runs twoReaders, with a's options aOpts and a failing on
// "poison" for good, over "x", "poison" and "after" on in/0.
func poisonedWorker(t *testing.T, aOpts ...framework.ProcessorOpt) (*StreamThread, *fakeKafka) {
	t.Helper()
	var poisoned atomic.Bool
	poisoned.Store(true)
	topo, counts := twoReaders(t, &poisoned, aOpts...)
	fake := newFakeKafka(t)
	w := newFakeWorker(t, fake, topo, counts)
	fake.send(in0, "x")
	fake.send(in0, "poison")
	fake.send(in0, "after")
	drainAndCommit(t, w)
	return w, fake
}

// refuseBigOnOutA refuses a record "big" on out-a as too large, as
// librdkafka's own size check does.
func refuseBigOnOutA(m *transport.Message) error {
	if m.Topic == "out-a" && string(m.Value) == "big" {
		return &transport.ClientError{Class: transport.ClassRecord, Kind: transport.KindTooLarge, Err: errors.New("Broker: Message size too large")}
	}
	return nil
}

func values(ms []*transport.Message) []string {
	var out []string
	for _, m := range ms {
		out = append(out, string(m.Value))
	}
	return out
}

// Restarting a failed task rebuilds it and no other task: the others keep
// their task objects, and a task that shares the rewound partition skips
// what it already holds instead of failing on it.
func TestRestartRebuildsOnlyTheFailedTask(t *testing.T) {
	var poisoned atomic.Bool
	poisoned.Store(true)
	topo, counts := twoReaders(t, &poisoned)
	fake := newFakeKafka(t)
	w := newFakeWorker(t, fake, topo, counts)

	// side/0 lags: b/0 holds both in/0 records until side/0@0 arrives;
	// a/0 fails on the second.
	fake.lag(side0)
	fake.send(side0, "s")
	fake.send(in0, "x", causal.Entry{Channel: side0, Offset: 0})
	fake.send(in0, "poison", causal.Entry{Channel: side0, Offset: 0})
	fake.send(in1, "y")
	drainAndCommit(t, w)
	failed := taskObject(t, w, "a/0")
	require.Equal(t, StateFailed, failed.State())
	before := map[string]*task.Task{}
	for _, id := range []string{"b/0", "a/1", "b/1"} {
		before[id] = taskObject(t, w, id).Task()
		require.Equal(t, StateRunning, taskObject(t, w, id).State(), id)
	}
	held := taskObject(t, w, "b/0").Task().Status().Held
	require.Equal(t, 2, held, "b/0 holds both records of in/0")

	poisoned.Store(false)
	require.NoError(t, restart(w, "a/0"))
	assert.Equal(t, StateRunning, failed.State())
	for id, tk := range before {
		assert.Same(t, tk, taskObject(t, w, id).Task(), "%s was rebuilt by a restart of a/0", id)
	}
	require.NotEmpty(t, fake.seeks)
	assert.Equal(t, int64(0), fake.seeks[len(fake.seeks)-1].Offset, "in/0 rewinds to a/0's committed offset")
	assert.ErrorIs(t, restart(w, "a/0"), ErrNotFailed, "a second restart rebuilds nothing")
	assert.Equal(t, 1, len(fake.seeks), "a second restart rewinds nothing")

	fake.catchUp(side0)
	drainAndCommit(t, w)
	for _, id := range []string{"a/0", "b/0"} {
		assert.Equal(t, StateRunning, taskObject(t, w, id).State(), "%s: %v", id, taskObject(t, w, id).Err())
	}
	assert.ElementsMatch(t, []string{"x", "poison", "y"}, values(fake.outputs("out-a")))
	assert.ElementsMatch(t, []string{"x", "poison", "y", "s"}, values(fake.outputs("out-b")))
}

// A failed transaction rebuilds the tasks that had work in it and leaves
// the others as they are.
func TestAbortRebuildsOnlyTheTasksWithWorkInIt(t *testing.T) {
	var poisoned atomic.Bool
	topo, counts := twoReaders(t, &poisoned)
	fake := newFakeKafka(t)
	w := newFakeWorker(t, fake, topo, counts)

	fake.send(in0, "x")
	drainAndCommit(t, w)
	idle := map[string]*task.Task{"a/0": taskObject(t, w, "a/0").Task(), "b/0": taskObject(t, w, "b/0").Task()}
	busy := map[string]*task.Task{"a/1": taskObject(t, w, "a/1").Task(), "b/1": taskObject(t, w, "b/1").Task()}

	fake.send(in1, "y")
	fake.commitErr = errors.New("injected")
	drainAndCommit(t, w)
	require.Equal(t, 1, fake.aborts)
	for id, tk := range idle {
		assert.Same(t, tk, taskObject(t, w, id).Task(), "%s had no work in the aborted transaction but was rebuilt", id)
	}
	for id, tk := range busy {
		assert.NotSame(t, tk, taskObject(t, w, id).Task(), "%s had work in the aborted transaction and was not rebuilt", id)
	}
	drainAndCommit(t, w)
	assert.ElementsMatch(t, []string{"x", "y"}, values(fake.outputs("out-a")), "exactly once after the abort")
	assert.ElementsMatch(t, []string{"x", "y"}, values(fake.outputs("out-b")))
}

// An output Kafka refuses for good (here librdkafka's own size check)
// goes to the emitting processor's production error policy: the task that
// emitted it fails, or drops it, or dead-letters it, while every other
// task keeps committing; the transaction is aborted at most once.
func TestProductionErrorStaysWithItsTask(t *testing.T) {
	tests := []struct {
		give     framework.BadInputPolicy
		wantA0   TaskState
		wantOutA []string
		wantDead int
	}{
		{give: framework.FailTask, wantA0: StateFailed, wantOutA: []string{"y", "w"}},
		{give: framework.LogAndSkip, wantA0: StateRunning, wantOutA: []string{"x", "y", "z", "w"}},
		{give: framework.DeadLetter, wantA0: StateRunning, wantOutA: []string{"x", "y", "z", "w"}, wantDead: 1},
	}
	for _, tt := range tests {
		t.Run(tt.give.String(), func(t *testing.T) {
			var poisoned atomic.Bool
			topo, counts := twoReaders(t, &poisoned, framework.OnProductionError(tt.give))
			fake := newFakeKafka(t)
			fake.produceErr = refuseBigOnOutA
			w := newFakeWorker(t, fake, topo, counts)
			fake.send(in0, "x")
			fake.send(in0, "big")
			fake.send(in1, "y")
			drainAndCommit(t, w)
			fake.send(in0, "z")
			fake.send(in1, "w")
			for range 3 {
				drainAndCommit(t, w)
			}
			a0 := taskObject(t, w, "a/0")
			require.Equal(t, tt.wantA0, a0.State(), "a/0: %v", a0.Err())
			if tt.wantA0 == StateFailed {
				assert.ErrorContains(t, a0.Err(), "output to out-a emitted for input in/0@1 was refused")
				assert.Equal(t, 1, fake.aborts, "one abort for the outputs a/0 had sent, then no more")
			} else {
				assert.Zero(t, fake.aborts)
			}
			for _, id := range []string{"b/0", "a/1", "b/1"} {
				assert.Equal(t, StateRunning, taskObject(t, w, id).State(), id)
			}
			assert.ElementsMatch(t, tt.wantOutA, values(fake.outputs("out-a")))
			assert.ElementsMatch(t, []string{"x", "big", "y", "z", "w"}, values(fake.outputs("out-b")), "b is untouched by a's error")
			dead := fake.outputs("dead")
			require.Len(t, dead, tt.wantDead)
			if tt.wantDead > 0 {
				assert.Nil(t, dead[0].Value, "the value that was too large is left out")
				assert.Contains(t, dead[0].Headers, framework.Header{Key: framework.HeaderDLQStage, Value: []byte(framework.StageProduce)})
				assert.Contains(t, dead[0].Headers, framework.Header{Key: framework.HeaderDLQOffset, Value: []byte("1")})
			}
		})
	}
}

// Skipping moves a failed task past the record it failed on: the record
// goes to the dead-letter topic with the reason, in the same transaction
// as the offsets past it, and the task processes what follows exactly
// once, even when that transaction first aborts.
func TestSkipMovesAFailedTaskPastItsRecord(t *testing.T) {
	w, fake := poisonedWorker(t) // and never fixed
	a0 := taskObject(t, w, "a/0")
	require.Equal(t, StateFailed, a0.State())
	b0 := taskObject(t, w, "b/0").Task()

	_, err := skipRecord(w, "b/0")
	assert.ErrorIs(t, err, ErrNotFailed)
	rec, err := skipRecord(w, "a/0")
	require.NoError(t, err)
	assert.Equal(t, causal.Entry{Channel: in0, Offset: 1}, rec)
	assert.Same(t, b0, taskObject(t, w, "b/0").Task(), "skipping a/0 rebuilt b/0")

	// The first transaction after the skip aborts: the rebuilt task still
	// knows to skip.
	fake.commitErr = errors.New("injected")
	drainAndCommit(t, w)
	require.Equal(t, 1, fake.aborts)
	drainAndCommit(t, w)
	require.Equal(t, StateRunning, a0.State(), "a/0: %v", a0.Err())
	assert.Equal(t, []string{"x", "after"}, values(fake.outputs("out-a")))
	assert.Equal(t, []string{"x", "poison", "after"}, values(fake.outputs("out-b")))
	dead := fake.outputs("dead")
	require.Len(t, dead, 1, "one dead letter, committed once")
	assert.Equal(t, "poison", string(dead[0].Value))
	hs := map[string]string{}
	for _, h := range dead[0].Headers {
		hs[h.Key] = string(h.Value)
	}
	assert.Equal(t, framework.StageSkip, hs[framework.HeaderDLQStage])
	assert.Contains(t, hs[framework.HeaderDLQError], "process in/0@1: poisoned")
	assert.Equal(t, int64(3), fake.groupOffs[in0], "in/0 is committed past the skipped record")
}

// Transactions that keep failing make the worker unready, and /status
// says why; one commit that goes through makes it ready again.
func TestRepeatedCommitFailuresShowInStatus(t *testing.T) {
	var poisoned atomic.Bool
	topo, counts := twoReaders(t, &poisoned)
	fake := newFakeKafka(t)
	w := newFakeWorker(t, fake, topo, counts)
	fake.commitErr = errors.New("broker unreachable")
	fake.failCommits = unreadyAfterFailedCommits - 1
	for i := range unreadyAfterFailedCommits {
		fake.send(in0, "x"+strconv.Itoa(i))
		drainAndCommit(t, w)
		w.publishStatus()
		st := w.Status()
		assert.Equal(t, i+1 < unreadyAfterFailedCommits, st.Ready, "after %d failed commits", i+1)
		assert.Equal(t, i+1, st.FailedCommits)
		assert.Contains(t, st.LastCommitError, "broker unreachable")
	}
	assert.InDelta(t, unreadyAfterFailedCommits, testutil.ToFloat64(w.metrics.FailedCommits.WithLabelValues("0")), 0)
	drainAndCommit(t, w)
	w.publishStatus()
	st := w.Status()
	assert.True(t, st.Ready)
	assert.Zero(t, st.FailedCommits)
	assert.Empty(t, st.LastCommitError)
	assert.ElementsMatch(t, []string{"x0", "x1", "x2"}, values(fake.outputs("out-a")), "exactly once after the failures")
}

// Two stream threads share the process's metrics: the failed-in-a-row
// count is one series per thread, so a thread whose commits go through
// does not hide one whose commits fail.
func TestFailedCommitsAreCountedPerThread(t *testing.T) {
	var poisoned atomic.Bool
	topo, counts := twoReaders(t, &poisoned)
	failing, healthy := newFakeKafka(t), newFakeKafka(t)
	a := newFakeWorker(t, failing, topo, counts)
	b := newFakeWorker(t, healthy, topo, counts)
	// As an instance's threads 0 and 1 (newStreamThread).
	b.metrics = a.metrics
	a.failedGauge = a.metrics.FailedCommits.WithLabelValues("0")
	b.failedGauge = a.metrics.FailedCommits.WithLabelValues("1")
	failing.commitErr = errors.New("broker unreachable")
	failing.failCommits = unreadyAfterFailedCommits
	for i := range unreadyAfterFailedCommits {
		failing.send(in0, "x"+strconv.Itoa(i))
		drainAndCommit(t, a)
		a.publishStatus()
		healthy.send(in0, "y"+strconv.Itoa(i))
		drainAndCommit(t, b)
		b.publishStatus() // written after a's, every time
	}
	assert.InDelta(t, unreadyAfterFailedCommits, testutil.ToFloat64(a.metrics.FailedCommits.WithLabelValues("0")), 0)
	assert.InDelta(t, 0, testutil.ToFloat64(a.metrics.FailedCommits.WithLabelValues("1")), 0)
}

// An error a processor returns, under its DeadLetter policy, sends the
// record to the dead-letter topic with the stage that failed, in the same
// transaction as the offsets past it, and the task goes on.
func TestProcessingErrorUnderDeadLetterReachesTheDeadLetterTopic(t *testing.T) {
	w, fake := poisonedWorker(t, framework.OnProcessingError(framework.DeadLetter))
	require.Equal(t, StateRunning, taskObject(t, w, "a/0").State())
	assert.Equal(t, []string{"x", "after"}, values(fake.outputs("out-a")))
	dead := fake.outputs("dead")
	require.Len(t, dead, 1)
	assert.Equal(t, "poison", string(dead[0].Value))
	assert.Contains(t, dead[0].Headers, framework.Header{Key: framework.HeaderDLQStage, Value: []byte(framework.StageProcess)})
	assert.Contains(t, dead[0].Headers, framework.Header{Key: framework.HeaderDLQError, Value: []byte("poisoned")})
	assert.Equal(t, int64(3), fake.groupOffs[in0])
}

// A task that fails on a refused output while the commit sends it keeps
// the offsets it committed before, and so does the group: the records it
// did not finish are read again when it is restarted.
func TestTaskFailingDuringCommitKeepsItsCommittedOffsets(t *testing.T) {
	var poisoned atomic.Bool
	topo, counts := twoReaders(t, &poisoned)
	fake := newFakeKafka(t)
	fake.produceErr = refuseBigOnOutA
	w := newFakeWorker(t, fake, topo, counts)
	fake.send(in0, "big")
	fake.send(in0, "y")
	// Handle the records without streaming, so that the commit sends the
	// outputs.
	for w.loop.Poll() > 0 {
		w.loop.Handle(withoutStreaming{&w.pump})
	}
	require.NoError(t, w.commits.commit())
	a0 := taskObject(t, w, "a/0")
	require.Equal(t, StateFailed, a0.State())
	assert.Equal(t, int64(0), a0.Committed()["in"], "a/0 committed nothing")
	fake.send(in1, "z")
	drainAndCommit(t, w)
	assert.Equal(t, int64(0), fake.groupOffs[in0], "the group's offset of in/0 waits for a/0")
	assert.Equal(t, []string{"y", "z"}, values(fake.outputs("out-b"))[1:], "b/0 and b/1 went on")
}

// counting counts the records of "in" per key in store "counts".
// countInto counts each record's key in store "counts": the count is the
// value's length, in bytes.
func countInto() framework.Processor {
	return framework.ProcessorFunc(func(ctx framework.Context, rec framework.Record) error {
		s, err := ctx.KeyValueStore("counts")
		if err != nil {
			return err
		}
		v, _, err := s.Get(rec.Key)
		if err != nil {
			return err
		}
		return s.Put(rec.Key, bytes.Repeat([]byte{'x'}, len(v)+1))
	})
}

func counting(t *testing.T) (*framework.Topology, map[string]int32) {
	t.Helper()
	topo, err := framework.NewBuilder("count").
		Processor("count", countInto, framework.From("in"), framework.Stores(framework.KeyValueStore("counts"))).
		Build()
	require.NoError(t, err)
	return topo, map[string]int32{"in": 2}
}

func countOf(t *testing.T, w *StreamThread, id, key string) int {
	t.Helper()
	kv, ok := taskObject(t, w, id).Task().KeyValueStore("counts")
	require.True(t, ok)
	v, _, err := kv.Get([]byte(key))
	require.NoError(t, err)
	return len(v)
}

// An abort discards the store writes of the tasks with work in the
// transaction and rebuilds them on their stores as committed: nothing is
// read back from the changelog, and nothing is counted twice.
func TestAbortDiscardsStoreWritesWithoutReadingTheChangelog(t *testing.T) {
	topo, counts := counting(t)
	fake := newFakeKafka(t)
	w := newFakeWorker(t, fake, topo, counts)
	restored := func() float64 { return testutil.ToFloat64(w.metrics.RestoreRecords.WithLabelValues("count/0")) }

	fake.send(in0, "k")
	fake.send(in0, "k")
	drainAndCommit(t, w)
	require.Equal(t, 2, countOf(t, w, "count/0", "k"))
	before := taskObject(t, w, "count/0").Task()

	fake.send(in0, "k")
	fake.commitErr = errors.New("injected")
	drainAndCommit(t, w)
	require.Equal(t, 1, fake.aborts)
	require.NotSame(t, before, taskObject(t, w, "count/0").Task(), "the task with work in the aborted transaction was not rebuilt")
	assert.Equal(t, 2, countOf(t, w, "count/0", "k"), "the aborted write stayed in the store")
	assert.Zero(t, restored(), "the abort read the changelog back")

	drainAndCommit(t, w)
	assert.Equal(t, 3, countOf(t, w, "count/0", "k"), "exactly once after the abort")
	var last []byte
	for _, m := range fake.outputs(restore.StoreChangelogTopic("fake", "counts")) {
		if string(m.Key) == "k" {
			last = m.Value
		}
	}
	assert.Len(t, last, 3, "the changelog's last value of k")
}

// A fenced producer stops the worker with a message that names both
// likely causes: a second process with the same instance id, or a broker
// that lost the producer's state (a restarted embedded broker does), not
// only the first.
func TestAFencedProducerNamesItsLikelyCauses(t *testing.T) {
	var poisoned atomic.Bool
	topo, counts := twoReaders(t, &poisoned)
	fake := newFakeKafka(t)
	w := newFakeWorker(t, fake, topo, counts)
	fake.commitErr = &transport.ClientError{Class: transport.ClassFatal, Err: errors.New("PRODUCER_FENCED")}
	fake.send(causal.Channel{Topic: "in"}, "x")
	pollAll(w)
	w.commits.onError(w.commits.commit())
	require.Error(t, w.fate.Fatal())
	msg := w.fate.Fatal().Error()
	assert.Contains(t, msg, "PRODUCER_FENCED")
	assert.Contains(t, msg, "another process runs with this worker's instance id")
	assert.Contains(t, msg, "or the broker lost this producer's state")
}

// A rebuild whose read of the group's committed offsets times out (as
// librdkafka's does while a dead member's transaction holds them) reads
// them again until it can, instead of stopping the thread; a thread
// stopped meanwhile stops without an error.
func TestARebuildWaitsForCommittedOffsetsItCannotReadYet(t *testing.T) {
	for _, stopped := range []bool{false, true} {
		t.Run(fmt.Sprintf("stopped=%v", stopped), func(t *testing.T) {
			var poisoned atomic.Bool
			topo, counts := twoReaders(t, &poisoned)
			fake := newFakeKafka(t)
			w := newFakeWorker(t, fake, topo, counts)
			fake.send(in0, "x")
			drainAndCommit(t, w)

			fake.send(in1, "y")
			fake.commitErr = errors.New("injected")
			fake.committedTimeouts = 2
			if stopped {
				close(w.stop)
			}
			reads := fake.committedReads
			pollAll(w)
			if err := w.commits.commit(); err != nil {
				w.commits.onError(err) // aborts and rebuilds
			}
			require.Equal(t, 1, fake.aborts)
			if stopped {
				assert.Equal(t, 1, fake.committedReads-reads, "a stopped thread reads no more")
				assert.True(t, w.fate.OnlyStopped(w.stop), "fatal: %v", w.fate.Fatal())
				return
			}
			require.NoError(t, w.fate.Fatal())
			assert.Equal(t, 3, fake.committedReads-reads, "two timeouts, then the offsets")
			drainAndCommit(t, w)
			assert.ElementsMatch(t, []string{"x", "y"}, values(fake.outputs("out-a")), "exactly once after the rebuild")
			assert.ElementsMatch(t, []string{"x", "y"}, values(fake.outputs("out-b")))
		})
	}
}
