package runtime

import (
	"slices"

	"go.uber.org/zap"

	"github.com/causeway-stream/causeway/framework/taskmgr"
)

// A task's life after it is built: failing alone, being rebuilt alone
// (after an abort, a restart, or a skip), and the rewinding that goes with
// it.

// rebuild throws the given tasks away and builds them again from what was
// committed, then rewinds their channels; other tasks keep their state and
// skip what they have already received. Never patch in memory. A task
// whose stores hold their committed state is built at once; one whose
// stores were let go is restored off the pump first (restoring.go).
func (w *StreamThread) rebuild(rts []*taskmgr.Task) {
	if len(rts) == 0 {
		return
	}
	ids := make([]string, len(rts))
	for i, rt := range rts {
		ids[i] = rt.ID()
	}
	w.log.Info("rebuilding tasks from committed state", zap.Strings("tasks", ids))
	cold, err := w.tasks.Prepare(rts)
	w.pump.forgetRoutes()
	if err != nil {
		w.fate.Stop(err)
		return
	}
	cold, abort := w.local.openCold(cold)
	if abort {
		w.fate.MustAbort()
	}
	var built []*taskmgr.Task
	for _, rt := range rts {
		if !slices.Contains(cold, rt) {
			built = append(built, rt)
		}
	}
	w.pump.seek(w.tasks.Rewind(built), "rebuilt tasks")
	if w.fate.Fatal() != nil {
		return
	}
	w.restores.later(cold)
	w.publishStatus()
}

// serve carries out an operator's request on one task: restart it, or
// move it past the record it failed on. Either way the other tasks' work
// so far is committed first, and then the task, and only it, is rebuilt
// from its committed state while the consumer rewinds its channels. A task
// that is not failed is left as it is (ErrNotFailed), so a repeated
// request rebuilds nothing twice.
func (w *StreamThread) serve(req taskRequest) taskReply {
	rt, skip, err := w.tasks.Request(req.id, req.skip)
	if err != nil {
		return taskReply{err: err}
	}
	if err := w.commits.commit(); err != nil {
		w.commits.onError(err)
		return taskReply{err: err}
	}
	if req.skip {
		rt.AddSkip(skip)
		w.log.Warn("moving task past the record it failed on; the record goes to the dead-letter topic",
			zap.String("task", req.id), zap.Stringer("channel", skip.Record.Channel), zap.Int64("offset", skip.Record.Offset),
			zap.String("dead_letter_topic", w.deadLetter))
	} else {
		w.log.Info("restarting task from its committed state", zap.String("task", req.id))
	}
	w.rebuild([]*taskmgr.Task{rt})
	return taskReply{skipped: skip.Record, err: w.fate.Fatal()}
}
