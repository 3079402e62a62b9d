package runtime

import (
	"fmt"
	"slices"

	"go.uber.org/zap"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework/taskmgr"
)

// A rebalance reaches the worker as partitions taken away (Revoked) and
// partitions added (Assigned). With an eager protocol the group takes
// everything away first and hands the new assignment out whole; with a
// cooperative one (KIP-429) it takes away only what moves, and adds only
// what is new. The worker treats both the same way: it closes the tasks
// that read a partition taken away, and opens the tasks that the added
// partitions complete. The tasks it keeps go on as they were, with their
// gates, stores and positions.

// rebalancer is the worker's rebalanceHandler. The consumer calls it while
// the pump is inside Poll.
type rebalancer struct{ w *StreamThread }

func (r rebalancer) Assigned(chs []causal.Channel) error {
	w := r.w
	w.loop.Handle(&w.pump)
	w.log.Info("partitions assigned", zap.Int("partitions", len(chs)), zap.Int("kept", len(w.pump.assigned)))
	if err := w.assign(chs); err != nil {
		w.fate.Stop(err)
		return err
	}
	return nil
}

func (r rebalancer) Revoked(chs []causal.Channel, lost bool) { r.w.revoke(chs, lost) }

// revoke gives up the partitions chs: a last commit unless they were
// lost, then the tasks that read them close. The other tasks keep
// running; if the commit cannot be made, those with work in the aborted
// transaction are rebuilt from what was committed.
func (w *StreamThread) revoke(chs []causal.Channel, lost bool) {
	w.loop.Handle(&w.pump)
	gone := w.tasks.Reading(chs)
	w.log.Info("partitions revoked", zap.Int("partitions", len(chs)), zap.Int("tasks", len(gone)),
		zap.Int("kept", len(w.tasks.Tasks())-len(gone)), zap.Bool("lost", lost))
	restarted := w.restores.stopOf(gone)
	committed := false
	if !lost && !w.fate.Aborting() {
		if err := w.commits.commit(); err != nil {
			w.log.Warn("commit on revocation failed; the next owner redoes the work", zap.Error(err))
		} else {
			committed = true
			w.desk.answer() // those this last commit caught up
		}
	}
	if committed {
		w.local.savePositions(gone)
	}
	closeTasks(w.tasks, w.metrics, gone)
	if !committed {
		w.commits.abortAndRebuild() // the tasks kept, with work in the transaction
	}
	w.rebuild(restarted)
	w.standby.refollow() // the tasks gone may be this thread's to copy now
	// The queries still waiting learn at once that their task moved
	// (ErrNotLocal: retryable, and forwarded over HTTP).
	w.desk.answer()
	w.pump.forgetRoutes()
	w.pump.setAssigned(slices.DeleteFunc(slices.Clone(w.pump.assigned), func(ch causal.Channel) bool { return slices.Contains(chs, ch) }))
	// The clients keep a partition's pause after it goes: resumed, so
	// that it is not paused when it comes back.
	var resume []causal.Channel
	for _, ch := range chs {
		if w.pump.paused[ch] {
			resume = append(resume, ch)
			w.pump.setPaused(ch, false)
		}
	}
	if len(resume) > 0 && !lost {
		if err := w.consumer.Resume(resume); err != nil {
			w.log.Warn("resume of revoked partitions", zap.Error(err))
		}
	}
	w.publishStatus()
}

// assign builds the tasks that the added partitions complete from
// committed state and starts fetching where they resume. Tasks whose
// stores must be read back first restore off the pump; their partitions
// that no running task reads stay paused until they are built.
func (w *StreamThread) assign(parts []causal.Channel) error {
	created := w.tasks.Create(append(slices.Clone(w.pump.assigned), parts...))
	w.standby.release(created)
	w.publishStatus()
	cold, err := w.tasks.Prepare(created)
	if err != nil {
		return err
	}
	cold, abort := w.local.openCold(cold)
	if abort {
		w.fate.MustAbort()
	}
	w.pump.forgetRoutes()
	start := w.tasks.Starts(created)
	w.tasks.Started(start)
	added := make([]causal.Channel, 0, len(parts))
	starts := make(map[causal.Channel]int64, len(parts))
	for _, ch := range parts {
		off, ok := start[ch]
		if !ok {
			w.log.Warn("partition assigned without a complete task; inputs may not be co-partitioned", zap.Stringer("channel", ch))
			continue
		}
		added = append(added, ch)
		starts[ch] = off
	}
	w.pump.setAssigned(append(w.pump.assigned, added...))
	// Partitions that only restoring tasks read are paused before Assign,
	// so that not one fetch of them competes with the restore.
	idle := map[causal.Channel]bool{}
	for ch, r := range w.tasks.Routes() {
		idle[ch] = !slices.ContainsFunc(r.Readers(), func(t *taskmgr.Task) bool { return t.State() == StateRunning })
	}
	var pause []causal.Channel
	for _, ch := range added {
		if idle[ch] {
			pause = append(pause, ch)
		}
	}
	if len(pause) > 0 {
		// Before Assign a partition may not be known yet: backpressure
		// pauses it again below.
		_ = w.consumer.Pause(pause)
	}
	if err := w.consumer.Assign(starts); err != nil {
		return fmt.Errorf("assign: %w", err)
	}
	w.pump.backpressure() // pause what only restoring or failed tasks read
	w.restores.later(cold)
	w.publishStatus()
	return nil
}
