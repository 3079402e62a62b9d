package runtime

import (
	"time"

	"go.uber.org/zap"

	"github.com/causeway-stream/causeway/framework/taskmgr"
	"github.com/causeway-stream/causeway/runtime/internal/restarts"
)

// restartPolicy is the restart policy (Config.TaskRestartBackoff) as a
// thread applies it: which FAILED tasks are due for their next attempt,
// and what the policy says of each task for Status and the metrics. Only
// the pump touches it.
type restartPolicy struct {
	tracker *restarts.Tracker
	metrics *Metrics
	log     *zap.Logger
}

// due returns the FAILED tasks among ts whose next attempt is due, noting
// each as restarted, and notes the tasks that run, so that one that stays
// up long enough counts from the first attempt again. The thread restarts
// those returned as an operator's restart would (serve).
func (r restartPolicy) due(ts []*taskmgr.Task, now time.Time) []string {
	if !r.tracker.Enabled() {
		return nil
	}
	var due []string
	for _, rt := range ts {
		switch rt.State() {
		case StateFailed:
			if r.tracker.Due(rt.ID(), now) {
				due = append(due, rt.ID())
			}
		case StateRunning:
			r.tracker.Running(rt.ID(), now)
		}
	}
	for _, id := range due {
		r.tracker.Restarted(id, now)
		st, _ := r.tracker.Status(id)
		r.metrics.TaskRestarts.WithLabelValues(id).Inc()
		r.log.Warn("restarting a failed task (--task-restart-backoff)", zap.String("task", id), zap.Int("attempt", st.Attempts))
	}
	return due
}

// forget starts the policy's count for task id over, after an operator's
// restart.
func (r restartPolicy) forget(id string) { r.tracker.Forget(id) }

// status is what the policy says of task id, for Status, and its next
// attempt for the metric; nil when nothing.
func (r restartPolicy) status(id string) *RestartStatus {
	st, ok := r.tracker.Status(id)
	next := 0.0
	var out *RestartStatus
	if ok {
		out = &RestartStatus{Attempts: st.Attempts}
		if !st.Next.IsZero() {
			out.NextAttempt, next = &st.Next, float64(st.Next.Unix())
		}
	}
	if r.tracker.Enabled() {
		r.metrics.NextRestart.WithLabelValues(id).Set(next)
	}
	return out
}
