package runtime

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/causeway-stream/causeway/runtime/internal/restore"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/taskmgr"
)

// Local state that cannot be trusted is wiped, and the task restored from
// its changelogs in full: the counts come out as the changelog has them,
// whatever the local copy held.
func TestUntrustedLocalStateIsWipedAndRestored(t *testing.T) {
	counts := causal.Channel{Topic: restore.StoreChangelogTopic("fake", "counts")}
	for _, tc := range []struct {
		name string
		// spoil damages the local state, or the changelog under it, after
		// a clean stop with k counted twice; want is k's count afterwards.
		spoil func(t *testing.T, fake *fakeKafka, dir string)
		want  int
	}{
		{"trusted", func(*testing.T, *fakeKafka, string) {}, 3},
		{"unreadable files", func(t *testing.T, _ *fakeKafka, dir string) {
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			for _, e := range entries {
				require.NoError(t, os.WriteFile(filepath.Join(dir, e.Name()), []byte("not pebble"), 0o644))
			}
		}, 3},
		{"changelog recreated behind it", func(_ *testing.T, fake *fakeKafka, _ string) {
			// The topic was deleted and made again, holding one count of k.
			fake.log[counts], fake.high[counts] = fake.log[counts][:1], 1
			fake.log[counts][0].Offset = 0
		}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topo, parts := counting(t)
			fake := newFakeKafka(t)
			state := t.TempDir()
			inState := func(c *Config) { c.StateDir = state }
			w := newFakeWorker(t, fake, topo, parts, inState)
			fake.send(in0, "k")
			drainAndCommit(t, w)
			fake.send(in0, "k")
			drainAndCommit(t, w)
			w.local.savePositions(w.tasks.Tasks())
			dir := w.local.taskDir(taskObject(t, w, "count/0"))
			closeTasks(w.tasks, w.metrics, w.tasks.Tasks())

			tc.spoil(t, fake, dir)
			again := newFakeWorker(t, fake, topo, parts, inState)
			fake.send(in0, "k")
			drainAndCommit(t, again)
			assert.Equal(t, tc.want, countOf(t, again, "count/0", "k"))
			restored := testutil.ToFloat64(again.metrics.RestoreRecords.WithLabelValues("count/0"))
			if tc.name == "trusted" {
				assert.Zero(t, restored, "a trusted local copy read the changelog back")
			}
		})
	}
}

// While the worker runs, it learns where its stores stand in their
// changelogs, and the stores' next commit records it: a restart after a
// crash (no clean close to save positions) replays only what came after.
func TestPositionsLearnedWhileRunningBoundTheReplayAfterACrash(t *testing.T) {
	for _, tc := range []struct {
		name        string
		look        bool
		wantRestore float64
	}{
		{"learned", true, 1},
		{"not learned", false, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topo, parts := counting(t)
			fake := newFakeKafka(t)
			state := t.TempDir()
			inState := func(c *Config) { c.StateDir = state }
			w := newFakeWorker(t, fake, topo, parts, inState)
			w.local.refresh.start = func(f func()) { f() }
			for range 2 {
				fake.send(in0, "k")
				drainAndCommit(t, w)
			}
			if tc.look {
				w.local.refreshPositions(w.now()) // looks
				w.local.refreshPositions(w.now()) // takes what it saw
			}
			fake.send(in0, "k")
			drainAndCommit(t, w)
			closeTasks(w.tasks, w.metrics, w.tasks.Tasks()) // a crash: no positions saved at the close

			again := newFakeWorker(t, fake, topo, parts, inState)
			assert.Equal(t, 3, countOf(t, again, "count/0", "k"))
			assert.Equal(t, tc.wantRestore, testutil.ToFloat64(again.metrics.RestoreRecords.WithLabelValues("count/0")))
		})
	}
}

// A restore under way shows in /status on its RESTORING task: records
// applied of the total, bytes, rate, and what the rate makes of the rest
// (the restorer's own test checks it reports them).
func TestRestoreProgressShowsInStatus(t *testing.T) {
	topo, parts := counting(t)
	w := newFakeWorker(t, newFakeKafka(t), topo, parts)
	task := taskObject(t, w, "count/0")
	progress := RestoreStatus{Records: 2500, Total: 10_000, Bytes: 40_000, PerSecond: 1250, Remaining: 6 * time.Second}
	w.board.restoreProgress(task.ID(), progress, false)

	// The task restores again from nothing: its stores let go, then
	// opened empty for a restore, as after a move.
	w.tasks.DropStores(task)
	_, err := w.tasks.Prepare([]*taskmgr.Task{task})
	require.NoError(t, err)
	require.Equal(t, StateRestoring, task.State())
	w.publishStatus()
	st, ok := statusOf(w.Status(), task.ID())
	require.True(t, ok)
	require.NotNil(t, st.Restore)
	assert.Equal(t, progress, *st.Restore)

	w.board.restoreProgress(task.ID(), RestoreStatus{}, true)
	st, _ = statusOf(w.Status(), task.ID())
	assert.Nil(t, st.Restore, "a finished restore still shows")
}

func statusOf(st Status, id string) (TaskStatus, bool) {
	for _, ts := range st.Tasks {
		if ts.ID == id {
			return ts, true
		}
	}
	return TaskStatus{}, false
}

func TestChangelogConfig(t *testing.T) {
	for _, tc := range []struct {
		spec framework.StoreSpec
		want map[string]string
	}{
		{framework.KeyValueStore("kv"), map[string]string{"cleanup.policy": "compact"}},
		{framework.WindowStore("w", 0), map[string]string{"cleanup.policy": "compact"}},
		{framework.WindowStore("w", time.Hour), map[string]string{"cleanup.policy": "compact,delete", "retention.ms": "90000000"}},
	} {
		assert.Equal(t, tc.want, changelogConfig(tc.spec), tc.spec.Name)
	}
}
