package runtime

import (
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/causeway-stream/causeway/framework/task"
	"github.com/causeway-stream/causeway/internal/taskmgr"
)

// commit closes the open transaction with every task's remaining outputs,
// store changes, checkpoint and offsets. A task that failed while
// processing contributes nothing, and its committed offsets stay where they
// were; if it had already streamed outputs, the transaction is aborted
// instead and the healthy tasks redo their work from committed state.
func (w *Worker) commit() error {
	if len(w.tasks.Tasks()) == 0 || w.consumer == nil {
		return nil
	}
	if w.mustAbort {
		w.log.Warn("a task failed after its outputs were sent: aborting the transaction; the tasks with work in it redo that work")
		w.abortAndRebuild()
		return nil
	}
	work, moved := w.tasks.Pending()
	if !moved && !w.producer.open {
		return nil
	}
	closing := w.now()
	if err := w.producer.begin(); err != nil {
		return err
	}
	fresh := make(map[*taskmgr.Task]task.Snapshot, len(work))
	for _, p := range work {
		sound, err := w.sendOutputs(p.Task)
		if err != nil {
			return err
		}
		if !sound {
			continue // failed on an output Kafka refused: its share stays out
		}
		if err := w.writeChangelog(p); err != nil {
			return err
		}
		fresh[p.Task] = p.Snap
	}
	if w.mustAbort {
		w.log.Warn("a task failed after its outputs were sent: aborting the transaction; the tasks with work in it redo that work")
		w.abortAndRebuild()
		return nil
	}
	md, err := w.consumer.GroupMetadata()
	if err != nil {
		return fmt.Errorf("group metadata: %w", err)
	}
	if err := w.producer.commit(w.groupOffsets(fresh), md); err != nil {
		return err
	}
	w.failedCommits = 0
	w.tasks.Committed(fresh)
	w.releaseOutputs()
	w.metrics.CommitSeconds.Observe(w.now().Sub(closing).Seconds())
	return nil
}

// releaseOutputs lets every task write its next outputs over the memory
// of those before, once the producer holds on to none of them (see
// task.Task.ReleaseOutputs); otherwise the next commit tries again.
func (w *Worker) releaseOutputs() {
	if !w.producer.client.Released() {
		return
	}
	for _, rt := range w.tasks.Tasks() {
		if rt.Task() != nil {
			rt.Task().ReleaseOutputs()
		}
	}
}

// writeChangelog sends one task's store changes to its stores' changelogs
// and its checkpoint to its checkpoint topic, in the open transaction.
func (w *Worker) writeChangelog(p taskmgr.Pending) error {
	for name, changes := range p.Snap.Changes {
		cl := storeChangelogTopic(w.cfg.ApplicationID, name)
		for _, c := range changes {
			if err := w.producer.produce(changelogMessage(cl, p.Task.Partition(), c.Key, c.Value)); err != nil {
				return err
			}
		}
	}
	topic := checkpointTopic(w.cfg.ApplicationID, p.Task.Processor())
	return w.producer.produce(changelogMessage(topic, p.Task.Partition(), checkpointRecordKey, p.Snap.Checkpoint().Encode()))
}

// onCommitError aborts and rebuilds the tasks that had effects in the
// transaction from committed state, or stops the worker when the error is
// fatal (a fenced producer).
func (w *Worker) onCommitError(err error) {
	if w.producer.fatal(err) {
		w.fatalErr = fmt.Errorf("producer fenced or failed: %w (another worker with instance id %q may have taken over)", err, w.instanceID)
		return
	}
	w.failedCommits++
	w.lastCommitErr = err
	w.producer.refusals.transactionFailed(w.producer.client)
	w.log.Warn("transaction failed; aborting and rebuilding the tasks with work in it from committed state",
		zap.Error(err), zap.Stringer("class", classify(err)), zap.Int("consecutive_failures", w.failedCommits))
	// Back off on repeated failures so a persistent fault does not spin.
	if w.failedCommits > 1 {
		select {
		case <-time.After(min(time.Duration(1<<min(w.failedCommits, 6))*50*time.Millisecond, 5*time.Second)):
		case <-w.stop:
		}
	}
	w.abortAndRebuild()
}

// abort aborts the open transaction, if any.
func (w *Worker) abort() {
	w.mustAbort = false
	for _, rt := range w.tasks.Tasks() {
		rt.StreamedAborted()
	}
	if err := w.producer.abort(); err != nil {
		w.fatalErr = err
	}
}
