package runtime

import (
	"errors"
	"fmt"
	"time"

	"github.com/causeway-stream/causeway/runtime/internal/restore"

	"go.uber.org/zap"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework/task"
	"github.com/causeway-stream/causeway/framework/taskmgr"
	"github.com/causeway-stream/causeway/runtime/internal/transport"
)

// commit closes the open transaction with every task's remaining outputs,
// store changes, checkpoint and offsets, through the task manager's one
// commit path (taskmgr.Manager.Commit) over the worker's Kafka
// transaction. A task that failed while processing contributes nothing,
// and its committed offsets stay where they were; if it had already
// streamed outputs, the transaction is aborted instead and the healthy
// tasks redo their work from committed state.
func (w *StreamThread) commit() error {
	if len(w.tasks.Tasks()) == 0 || w.consumer == nil {
		return nil
	}
	if w.fate.Aborting() {
		w.abortForFailedTask()
		return nil
	}
	tx := &kafkaTransaction{w: w}
	committed, err := w.tasks.Commit(tx)
	if errors.Is(err, errTaskFailedInTransaction) {
		w.abortForFailedTask()
		return nil
	}
	if err != nil || !committed {
		return err
	}
	w.failedCommits = 0
	w.releaseOutputs()
	w.metrics.CommitSeconds.Observe(w.now().Sub(tx.closing).Seconds())
	return nil
}

// abortForFailedTask aborts the transaction a task failed in after its
// outputs went into it.
func (w *StreamThread) abortForFailedTask() {
	w.log.Warn("a task failed after its outputs were sent: aborting the transaction; the tasks with work in it redo that work")
	w.abortAndRebuild()
}

// errTaskFailedInTransaction: a task failed while the commit sent its
// outputs, after outputs of it had gone into the transaction, which must
// then be aborted.
var errTaskFailedInTransaction = errors.New("a task failed after its outputs were sent")

// kafkaTransaction is the worker's Kafka transaction as the task manager's
// commit writes to it.
//
//causeway:owned
type kafkaTransaction struct {
	w *StreamThread
	// closing is when the commit began, for the commit-time metric.
	closing time.Time
}

var _ taskmgr.Transaction = (*kafkaTransaction)(nil)

// Begin opens a transaction, unless none is open and nothing moved.
func (tx *kafkaTransaction) Begin(dirty bool) (bool, error) {
	if !dirty && !tx.w.producer.Open() {
		return false, nil
	}
	tx.closing = tx.w.now()
	return true, tx.w.producer.Begin()
}

// SendOutputs produces the task's remaining outputs (sendOutputs).
func (tx *kafkaTransaction) SendOutputs(t *taskmgr.Task) (bool, error) {
	return tx.w.pump.sendOutputs(t)
}

// WriteState produces the task's store changes and checkpoint
// (writeChangelog). The task's stores keep the changelog positions known
// for them beside the state this commit makes: they hold for every later
// committed state too.
func (tx *kafkaTransaction) WriteState(t *taskmgr.Task, snap task.Snapshot) ([]byte, bool, error) {
	if sound, err := tx.w.writeChangelog(t, snap); !sound || err != nil {
		return nil, sound, err
	}
	return tx.w.local.position(t.ID()).Encode(), true, nil
}

// Commit sends the offsets with the group's metadata (KIP-447) and commits,
// unless a task failed meanwhile with outputs in the transaction.
func (tx *kafkaTransaction) Commit(offsets map[causal.Channel]int64) error {
	if tx.w.fate.Aborting() {
		return errTaskFailedInTransaction
	}
	md, err := tx.w.consumer.GroupMetadata()
	if err != nil {
		return fmt.Errorf("group metadata: %w", err)
	}
	return tx.w.producer.Commit(offsets, md)
}

// releaseOutputs lets every task write its next outputs over the memory
// of those before, once the producer holds on to none of them (see
// task.Task.ReleaseOutputs); otherwise the next commit tries again.
func (w *StreamThread) releaseOutputs() {
	if !w.producer.Released() {
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
//
// A change Kafka refuses for good (too large for its topic, or invalid),
// at once or in a transaction before (refusals), can never be written:
// the task fails naming its store, and the transaction, which may hold
// some of the task's changes or outputs, aborts; the other tasks redo
// their work and the failed one stays failed. It reports whether t is
// still sound; the error is the transaction's.
func (w *StreamThread) writeChangelog(t *taskmgr.Task, snap task.Snapshot) (bool, error) {
	for name, changes := range snap.Changes {
		cl := restore.StoreChangelogTopic(w.cfg.ApplicationID, name)
		for _, c := range changes {
			err := w.producer.SendCopy(changelogMessage(cl, t.Partition(), c.Key, c.Value))
			if err != nil {
				return w.refusedState(t, fmt.Sprintf("store %q", name), len(c.Key)+len(c.Value), err)
			}
		}
	}
	topic := restore.CheckpointTopic(w.cfg.ApplicationID, t.Processor())
	cp := snap.Checkpoint().Encode()
	if err := w.producer.SendCopy(changelogMessage(topic, t.Partition(), restore.CheckpointRecordKey, cp)); err != nil {
		return w.refusedState(t, "the checkpoint", len(cp), err)
	}
	return true, nil
}

// refusedState settles err, met writing part of t's state (what, of size
// bytes): a refusal for good fails t and the transaction; any other error
// is the transaction's.
func (w *StreamThread) refusedState(t *taskmgr.Task, what string, size int, err error) (bool, error) {
	if transport.Classify(err) != transport.ClassRecord {
		return false, err
	}
	w.failTask(t, &StateRefusedError{Task: t.ID(), What: what, Size: size, Err: err})
	w.fate.MustAbort()
	return false, nil
}

// onCommitError aborts and rebuilds the tasks that had effects in the
// transaction from committed state, or stops the worker when the error is
// fatal (a fenced producer).
func (w *StreamThread) onCommitError(err error) {
	if w.producer.Fatal(err) {
		w.fate.Stop(fmt.Errorf("producer fenced or failed: %w; when fenced, either another process runs with this worker's instance id %q "+
			"(the same --instance-id, or a copy of its state dir), or the broker lost this producer's state "+
			"(the embedded broker does when it restarts: see docs/operations.md, The embedded broker); restart this worker", err, w.instanceID))
		return
	}
	w.failedCommits++
	w.lastCommitErr = err
	w.producer.Failed()
	w.log.Warn("transaction failed; aborting and rebuilding the tasks with work in it from committed state",
		zap.Error(err), zap.Stringer("class", transport.Classify(err)), zap.Int("consecutive_failures", w.failedCommits))
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
func (w *StreamThread) abort() {
	w.fate.Aborted()
	for _, rt := range w.tasks.Tasks() {
		rt.StreamedAborted()
	}
	if err := w.producer.Abort(); err != nil {
		w.fate.Stop(err)
	}
}

// changelogMessage is a changelog record for partition p.
func changelogMessage(topic string, p int32, key, value []byte) transport.Message {
	return transport.Message{Topic: topic, Partition: p, Key: key, Value: value}
}
