package runtime

import (
	"time"

	"github.com/causeway-stream/causeway/runtime/internal/restore"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/task"
	"github.com/causeway-stream/causeway/internal/taskmgr"
	"github.com/causeway-stream/causeway/runtime/internal/transport"
)

// The worker's tasks live in a task manager (internal/taskmgr) that the
// in-memory test driver shares: which tasks exist, building them from
// committed state, failing and rebuilding them one by one, the channel
// routes, and the offsets a commit may send. This file connects it to
// Kafka, the logs and the metrics.

// TaskState is where a task is in its life.
type TaskState = taskmgr.State

// Task states, as /status reports them.
const (
	StateRestoring TaskState = taskmgr.Restoring
	StateRunning   TaskState = taskmgr.Running
	StateFailed    TaskState = taskmgr.Failed
)

// newTaskManager returns the worker's task manager over the given topics'
// partition counts, asking offsets where tasks resume and restoring their
// committed state from changelog.
func (w *StreamThread) newTaskManager(counts map[string]int32, offsets transport.OffsetSource, changelog transport.ChangelogSource) (*taskmgr.Manager, error) {
	w.restores.use(&restore.Restorer{App: w.cfg.ApplicationID, Topology: w.topo, Source: changelog, Log: w.log, Records: w.metrics.RestoreRecords, Ratio: w.metrics.RestoreProgress, Now: w.now,
		OnDisk: w.onDisk, Wipe: w.wipeStores, Report: w.restoreProgress})
	// The worker restores off the pump (restoring.go): Prepare and Finish,
	// no Config.Restore.
	return taskmgr.New(taskmgr.Config{
		Topology: w.topo, Partitions: counts, Offsets: offsets,
		Clock: w.pumpClock, DeadLetterTopic: w.deadLetter, GateOff: w.cfg.GateOff, CheckClaims: w.cfg.CheckClaims, ClaimEnd: w.claimEnd,
		AutoOffsetReset: w.cfg.AutoOffsetReset, AllowOffsetReset: w.cfg.AllowOffsetReset, Log: w.log,
		Observer: func(t *taskmgr.Task) task.Observer {
			return taskObserver{w: w, deliveries: w.metrics.Deliveries.WithLabelValues(t.ID()), nullKeys: new(bool)}
		},
		InputCounter: func(topic string) prometheus.Counter { return w.metrics.RecordsIn.WithLabelValues(topic) },
		OpenStores:   w.openStores,
		// Every commit of a task's stores keeps the positions known for
		// them, which hold for every later committed state too.
		EncodeCheckpoint: func(t *taskmgr.Task, _ task.Snapshot) []byte { return w.positions[t.ID()].Encode() },
		Globals:          w.globals,
	})
}

// closeTasks closes every task, forgets them and their metrics.
func (w *StreamThread) closeTasks() {
	for _, rt := range w.tasks.Tasks() {
		w.metrics.TaskState.DeletePartialMatch(map[string]string{"task": rt.ID()})
		w.metrics.Held.DeletePartialMatch(map[string]string{"task": rt.ID()})
		w.metrics.CommittedLag.DeletePartialMatch(map[string]string{"task": rt.ID()})
		w.metrics.DeliveredLag.DeletePartialMatch(map[string]string{"task": rt.ID()})
	}
	w.tasks.CloseAll()
}

// failTask fails one task; see taskmgr.Manager.Fail. A restoring task,
// whose stores its restore owns, is left to it: it reads nothing until it
// is built, and meets the error again then.
func (w *StreamThread) failTask(rt *taskmgr.Task, err error) {
	if rt.State() == StateRestoring {
		w.log.Warn("error for a restoring task; it meets it again once restored", zap.String("task", rt.ID()), zap.Error(err))
		return
	}
	if w.tasks.Fail(rt, err) {
		w.fate.mustAbort()
	}
}

// taskObserver turns one task's events into logs and metrics.
type taskObserver struct {
	w          *StreamThread
	deliveries prometheus.Counter // of this task
	// nullKeys is set once the task has logged a record without a key
	// skipped: the rest are counted, and logged only at debug level, as a
	// topic of such records would otherwise flood the log.
	nullKeys *bool
}

func (o taskObserver) Dropped(id string, ev framework.DropEvent) {
	o.w.metrics.Dropped.WithLabelValues(id, ev.Reason).Inc()
	log := o.w.log.Warn
	switch {
	case ev.Reason == framework.DropNullKey && *o.nullKeys:
		log = o.w.log.Debug
	case ev.Reason == framework.DropNullKey:
		*o.nullKeys = true
		ev.Detail += " (logged once per task; causeway_dropped_records_total counts them all)"
	}
	log("record dropped", zap.String("task", id), zap.String("reason", ev.Reason),
		zap.String("channel", transport.PartitionString(ev.Record.Topic, ev.Record.Partition)), zap.Int64("offset", ev.Record.Offset),
		zap.String("detail", ev.Detail))
}

// Delivered counts every delivery and times those that waited: a record
// delivered in the poll that brought it has waited 0 by the pump's clock,
// and observing it would cost more than the rest of its bookkeeping.
func (o taskObserver) Delivered(id string, waited time.Duration) {
	o.deliveries.Inc()
	if waited > 0 {
		o.w.metrics.GateWait.Observe(waited.Seconds())
	}
}
