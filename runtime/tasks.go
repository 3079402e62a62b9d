package runtime

import (
	"github.com/causeway-stream/causeway/runtime/internal/restore"

	"github.com/causeway-stream/causeway/framework/taskmgr"
	"github.com/causeway-stream/causeway/runtime/internal/transport"
)

// The worker's tasks live in a task manager (framework/taskmgr) that the
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
	// The worker restores off the pump (restoring.go): Prepare and Finish,
	// no Config.Restore.
	m, err := taskmgr.New(taskmgr.Config{
		Topology: w.topo, Partitions: counts, Offsets: w.claims.over(offsets, w.stop, w.log),
		DeadLetterTopic: w.deadLetter, GateOff: w.cfg.GateOff, CheckClaims: w.cfg.CheckClaims,
		MaxRecordBytes:  w.cfg.MaxRecordBytes,
		AutoOffsetReset: w.cfg.AutoOffsetReset, AllowOffsetReset: w.cfg.AllowOffsetReset, Log: w.log,
		Metrics: &taskmgr.Metrics{RecordsIn: w.metrics.RecordsIn, Deliveries: w.metrics.Deliveries, GateWait: w.metrics.GateWait, Dropped: w.metrics.Dropped},
		Globals: w.globals,
	})
	if err != nil {
		return nil, err
	}
	restorer := &restore.Restorer{App: w.cfg.ApplicationID, Topology: w.topo, Source: changelog, Log: w.log, Records: w.metrics.RestoreRecords, Ratio: w.metrics.RestoreProgress, Now: w.now,
		OnDisk: w.local.onDisk, Wipe: w.local.wipe, Report: w.board.restoreProgress}
	w.restores.connect(restorer, restoreEnv{tasks: m, local: w.local, fate: w.fate, resume: func(built []*taskmgr.Task) {
		w.pump.forgetRoutes()
		w.pump.seek(m.Rewind(built), "restored tasks")
		w.pump.backpressure() // resume what only they read
		w.publishStatus()
	}})
	w.commits.connect(committerEnv{appID: w.cfg.ApplicationID, instanceID: w.instanceID, tasks: m, producer: w.producer,
		consumer: w.consumer, fate: w.fate, local: w.local, log: w.log, metrics: w.metrics, now: w.now, stop: w.stop,
		sendOutputs: w.pump.sendOutputs, failTask: w.pump.failTask, rebuild: func(ts []*taskmgr.Task) {
			w.rebuild(ts)
			w.desk.answer() // the stores hold their committed state again
		}})
	w.desk.connect(m)
	w.local.connect(w.consumer, m)
	// The copies of other workers' tasks are made by the same manager,
	// detached, and rounds restore them with the same restorer.
	w.standby.connect(standbyEnv{log: w.log, metrics: w.metrics, consumer: w.consumer, tasks: m, restorer: restorer,
		openStores: w.local.openStores, stateProcessors: w.groups.stateProcessorsOf, changed: w.publishStatus,
		probeEvery: w.cfg.ProbingRebalanceInterval})
	return m, nil
}

// closeTasks closes the given tasks of m and forgets them and their
// series in metrics.
func closeTasks(m *taskmgr.Manager, metrics *Metrics, ts []*taskmgr.Task) {
	for _, rt := range ts {
		metrics.TaskState.DeletePartialMatch(map[string]string{"task": rt.ID()})
		metrics.Held.DeletePartialMatch(map[string]string{"task": rt.ID()})
		metrics.CommittedLag.DeletePartialMatch(map[string]string{"task": rt.ID()})
		metrics.DeliveredLag.DeletePartialMatch(map[string]string{"task": rt.ID()})
	}
	m.Close(ts)
}
