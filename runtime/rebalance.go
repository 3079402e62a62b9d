package runtime

import (
	"fmt"
	"slices"

	"go.uber.org/zap"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/internal/taskmgr"
)

// rebalancer is the worker's rebalanceHandler. The consumer calls it while
// the pump is inside Poll.
type rebalancer struct{ w *StreamThread }

func (r rebalancer) Assigned(chs []causal.Channel) error {
	w := r.w
	w.handlePolled()
	w.log.Info("partitions assigned", zap.Int("partitions", len(chs)))
	if err := w.assign(chs); err != nil {
		w.fate.stop(err)
		return err
	}
	return nil
}

func (r rebalancer) Revoked(chs []causal.Channel, lost bool) { r.w.revoke(chs, lost) }

// revoke gives up the assignment: a last commit unless it was lost, then
// the tasks close.
func (w *StreamThread) revoke(chs []causal.Channel, lost bool) {
	w.handlePolled()
	w.cancelRestores()
	w.log.Info("partitions revoked", zap.Int("partitions", len(chs)), zap.Bool("lost", lost))
	if !lost && !w.fate.abort {
		if err := w.commit(); err != nil {
			w.log.Warn("commit on revocation failed; the next owner redoes the work", zap.Error(err))
			w.abort()
		} else {
			w.answerQueries() // those this last commit caught up
		}
	} else {
		w.abort()
	}
	if !lost {
		w.savePositions()
	}
	w.closeTasks()
	// The queries still waiting learn at once that their task moved
	// (ErrNotLocal: retryable, and forwarded over HTTP).
	w.answerQueries()
	w.pump.forgetRoutes()
	w.pump.setAssigned(nil)
}

// assign builds the tasks of the assigned partitions from committed state
// and starts fetching where they resume. Tasks whose stores must be read
// back first restore off the pump; their partitions that no running task
// reads stay paused until they are built.
func (w *StreamThread) assign(parts []causal.Channel) error {
	created := w.tasks.Create(parts)
	w.publishStatus()
	cold, err := w.tasks.Prepare(created)
	if err != nil {
		return err
	}
	cold = w.openCold(cold)
	w.pump.forgetRoutes()
	start := w.tasks.Starts(w.tasks.Tasks())
	w.tasks.Started(start)
	assigned := make([]causal.Channel, 0, len(parts))
	starts := make(map[causal.Channel]int64, len(parts))
	for _, ch := range parts {
		off, ok := start[ch]
		if !ok {
			w.log.Warn("partition assigned without a complete task; inputs may not be co-partitioned", zap.Stringer("channel", ch))
			continue
		}
		assigned = append(assigned, ch)
		starts[ch] = off
	}
	w.pump.setAssigned(assigned)
	// The clients keep a partition's pause across Assign. Partitions that
	// only restoring tasks read are paused before it, so that not one
	// fetch of them competes with the restore; what else this worker had
	// paused is resumed, and backpressure decides again.
	idle := map[causal.Channel]bool{}
	for ch, r := range w.tasks.Routes() {
		idle[ch] = !slices.ContainsFunc(r.Readers(), func(t *taskmgr.Task) bool { return t.State() == StateRunning })
	}
	var pause, resume []causal.Channel
	for _, ch := range assigned {
		if idle[ch] {
			pause = append(pause, ch)
		}
	}
	for ch := range w.pump.paused {
		if !idle[ch] {
			resume = append(resume, ch)
		}
	}
	if len(pause) > 0 {
		// Before Assign a partition may not be known yet: paused again
		// below.
		_ = w.consumer.Pause(pause)
	}
	if err := w.consumer.Assign(starts); err != nil {
		return fmt.Errorf("assign: %w", err)
	}
	if len(resume) > 0 {
		if err := w.consumer.Resume(resume); err != nil {
			w.log.Warn("resume after assign", zap.Error(err))
		}
	}
	w.pump.forgetPaused()
	w.backpressure() // pause what only restoring or failed tasks read
	w.restoreLater(cold)
	w.publishStatus()
	return nil
}
