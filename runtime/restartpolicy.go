package runtime

import (
	"time"

	"go.uber.org/zap"
)

// restartFailed restarts the FAILED tasks whose next attempt under the
// restart policy (Config.TaskRestartBackoff) is due, as an operator's
// restart would (serve), and notes the tasks that run, so that one that
// stays up long enough counts from the first attempt again.
func (w *StreamThread) restartFailed(now time.Time) {
	if !w.restarts.Enabled() {
		return
	}
	var due []string
	for _, rt := range w.tasks.Tasks() {
		switch rt.State() {
		case StateFailed:
			if w.restarts.Due(rt.ID(), now) {
				due = append(due, rt.ID())
			}
		case StateRunning:
			w.restarts.Running(rt.ID(), now)
		}
	}
	for _, id := range due {
		w.restarts.Restarted(id, now)
		st, _ := w.restarts.Status(id)
		w.metrics.TaskRestarts.WithLabelValues(id).Inc()
		w.log.Warn("restarting a failed task (--task-restart-backoff)", zap.String("task", id), zap.Int("attempt", st.Attempts))
		if r := w.serve(taskRequest{id: id}); r.err != nil {
			w.log.Warn("restart", zap.String("task", id), zap.Error(r.err))
		}
	}
}

// restartStatus is what the restart policy says of task id, for Status,
// and its next attempt for the metric; nil when nothing.
func (w *StreamThread) restartStatus(id string) *RestartStatus {
	st, ok := w.restarts.Status(id)
	next := 0.0
	var out *RestartStatus
	if ok {
		out = &RestartStatus{Attempts: st.Attempts}
		if !st.Next.IsZero() {
			out.NextAttempt, next = &st.Next, float64(st.Next.Unix())
		}
	}
	if w.restarts.Enabled() {
		w.metrics.NextRestart.WithLabelValues(id).Set(next)
	}
	return out
}
