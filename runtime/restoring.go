package runtime

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/causeway-stream/causeway/runtime/internal/restore"

	"github.com/causeway-stream/causeway/framework/taskmgr"
	"github.com/causeway-stream/causeway/runtime/internal/member"
)

// Restores run off the pump, one at a time, so that a task restoring a
// large state does not stop the worker's other tasks. A task whose stores
// must be read back (assigned cold, or rebuilt after its stores were let
// go) is prepared by the task manager and handed to a restore; while it
// restores it receives nothing (its partitions that no running task reads
// are paused) and holds the group's offsets of its channels where they
// are. When the restore is over, the pump builds the task and rewinds its
// channels, as for a restart: the other tasks on a shared channel skip
// what they already have.

// restores is the restore under way and the tasks waiting for the next.
// Only the pump touches it; a restore's goroutine touches only the tasks
// it was given, and hands its result back on results.
//
//causeway:owned
type restores struct {
	restorer *restore.Restorer
	// queue holds prepared tasks waiting for the next restore.
	queue []*taskmgr.Task
	// results brings back the tasks of the restore under way as they are
	// restored, then its final result; nil when none runs. Closing cancel
	// ends it early.
	results chan restore.Result
	cancel  chan struct{}
	wg      sync.WaitGroup
	// start runs a restore; tests run it in place.
	start func(func())
	env   restoreEnv
}

// restoreEnv is what the restores use of their thread, given once it is
// connected (restores.connect).
type restoreEnv struct {
	tasks *taskmgr.Manager
	local *localState
	fate  *member.Fate
	// resume rewinds the channels of the tasks a restore built, resumes
	// what only they read, and publishes the thread's status.
	resume func(built []*taskmgr.Task)
}

// connect makes r restore with restorer, in the thread env tells of.
func (r *restores) connect(restorer *restore.Restorer, env restoreEnv) {
	r.restorer, r.env = restorer, env
}

// later queues prepared tasks for a restore, which starts at once unless
// one is under way.
func (r *restores) later(ts []*taskmgr.Task) {
	if len(ts) == 0 {
		return
	}
	r.queue = append(r.queue, ts...)
	r.next()
}

// startNext starts a restore of the queued tasks, if there are some and
// none is under way, and reports whether it did.
func (r *restores) startNext() bool {
	if r.results != nil || len(r.queue) == 0 {
		return false
	}
	ts := r.queue
	// Room for every result, so that the restore never waits for the pump.
	results, cancel := make(chan restore.Result, len(ts)+1), make(chan struct{})
	r.queue, r.cancel, r.results = nil, cancel, results
	r.wg.Add(1)
	r.start(func() {
		defer r.wg.Done()
		rest, err := r.restorer.Restore(cancel, ts, func(res restore.Result) { results <- res })
		results <- restore.Result{Tasks: rest, Err: err, Final: true}
	})
	return true
}

// ready returns a result the restore under way has brought back, if any.
func (r *restores) ready() (restore.Result, bool) {
	if r.results == nil {
		return restore.Result{}, false
	}
	select {
	case res := <-r.results:
		return res, true
	default:
		return restore.Result{}, false
	}
}

// ended forgets the restore under way, whose final result was taken.
func (r *restores) ended() { r.cancel, r.results = nil, nil }

// cancelAll ends the restore under way, waits for it, and forgets the
// queued tasks: their stores close with them.
func (r *restores) cancelAll() {
	if r.results != nil {
		close(r.cancel)
		r.wg.Wait()
		r.ended()
	}
	r.queue = nil
}

// next starts a restore of the queued tasks, if there are some and none
// is under way.
func (r *restores) next() {
	if r.startNext() {
		r.collect() // a restore run in place is over already
	}
}

// collect takes what the restore under way has brought back so far.
func (r *restores) collect() {
	if res, ok := r.ready(); ok {
		r.finish(res)
	}
}

// finish takes res and whatever else the restore under way has
// brought back already, builds those tasks together (one look at the
// group's offsets for all of them) and rewinds their channels. After the
// final result of a restore, it starts the next. A restore that failed
// stops the worker, as reading committed state does anywhere else.
func (r *restores) finish(res restore.Result) {
	got := []restore.Result{res}
	for !res.Final {
		next, ok := r.ready()
		if !ok {
			break
		}
		res = next
		got = append(got, res)
	}
	var restored restore.Result
	for _, g := range got {
		if g.Err == nil {
			restored = restored.Merge(g)
		}
	}
	r.build(restored)
	if res.Err != nil { // only a final result carries one
		for _, t := range res.Tasks {
			r.env.tasks.DropStores(t)
		}
		if !errors.Is(res.Err, ErrStopped) {
			r.env.fate.Stop(fmt.Errorf("restore: %w", res.Err))
		}
	}
	if res.Final {
		r.ended()
		r.next()
	}
}

// build builds the tasks res brought back and rewinds their channels.
func (r *restores) build(res restore.Result) {
	if len(res.Tasks) == 0 {
		return
	}
	for id, pos := range res.Positions {
		r.env.local.restored(id, pos)
	}
	if err := r.env.tasks.Finish(res.Tasks, res.Restored); err != nil {
		r.env.fate.Stop(err)
		return
	}
	var built []*taskmgr.Task
	for _, t := range res.Tasks {
		if t.State() == StateRunning {
			built = append(built, t)
		}
	}
	r.env.resume(built)
}

// stopOf ends the restores under way when one of the tasks gone is among
// them, and returns the tasks kept whose restore ended with it, to be
// prepared again.
func (r *restores) stopOf(gone []*taskmgr.Task) []*taskmgr.Task {
	if !slices.ContainsFunc(gone, func(t *taskmgr.Task) bool { return t.State() == StateRestoring }) {
		return nil
	}
	r.cancelAll()
	var again []*taskmgr.Task
	for _, t := range r.env.tasks.Tasks() {
		if t.State() == StateRestoring && !slices.Contains(gone, t) {
			again = append(again, t)
		}
	}
	return again
}
