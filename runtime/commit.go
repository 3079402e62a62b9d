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
	"github.com/causeway-stream/causeway/runtime/internal/member"
	"github.com/causeway-stream/causeway/runtime/internal/transport"
	"github.com/causeway-stream/causeway/runtime/internal/txn"
)

// committer closes the thread's transactions, as Kafka Streams' task
// manager and record collector do together: it commits every task's work
// through the task manager's one commit path, aborts, rebuilds what an
// abort took back, and counts the transactions that failed in a row. Only
// the pump touches it.
//
//causeway:owned
type committer struct {
	env committerEnv
	// failed counts transactions failed in a row, for backoff and
	// readiness; lastErr is the last one's error.
	failed  int
	lastErr error
}

// committerEnv is what the committer uses of its thread, given once the
// thread is connected (committer.connect).
type committerEnv struct {
	appID, instanceID string
	tasks             *taskmgr.Manager
	producer          *txn.Producer
	// consumer gives the group's metadata the offsets commit with.
	consumer transport.Consumer
	fate     *member.Fate
	local    *localState
	log      *zap.Logger
	metrics  *Metrics
	now      func() time.Time
	// stop ends a backoff early.
	stop <-chan struct{}
	// sendOutputs produces a task's remaining outputs (the pump's).
	sendOutputs func(t *taskmgr.Task) (bool, error)
	failTask    func(t *taskmgr.Task, err error)
	// rebuild rebuilds the tasks an abort took work back from.
	rebuild func(ts []*taskmgr.Task)
}

// connect gives the committer its thread's parts.
func (c *committer) connect(env committerEnv) { c.env = env }

// commit closes the open transaction with every task's remaining outputs,
// store changes, checkpoint and offsets, through the task manager's one
// commit path (taskmgr.Manager.Commit) over the worker's Kafka
// transaction. A task that failed while processing contributes nothing,
// and its committed offsets stay where they were; if it had already
// streamed outputs, the transaction is aborted instead and the healthy
// tasks redo their work from committed state.
func (c *committer) commit() error {
	e := &c.env
	if e.consumer == nil || len(e.tasks.Tasks()) == 0 {
		return nil
	}
	if e.fate.Aborting() {
		c.abortForFailedTask()
		return nil
	}
	tx := &kafkaTransaction{c: c}
	committed, err := e.tasks.Commit(tx)
	if errors.Is(err, errTaskFailedInTransaction) {
		c.abortForFailedTask()
		return nil
	}
	if err != nil || !committed {
		return err
	}
	c.failed = 0
	c.releaseOutputs()
	e.metrics.CommitSeconds.Observe(e.now().Sub(tx.closing).Seconds())
	return nil
}

// abortForFailedTask aborts the transaction a task failed in after its
// outputs went into it.
func (c *committer) abortForFailedTask() {
	c.env.log.Warn("a task failed after its outputs were sent: aborting the transaction; the tasks with work in it redo that work")
	c.abortAndRebuild()
}

// abortAndRebuild aborts the open transaction and rebuilds, from committed
// state, exactly the tasks that had effects in it; the others keep their
// state, and what they hold. A failed task among them lets its state go
// and stays failed at its committed offsets: only a restart runs it again,
// so a record that fails every time cannot abort and rebuild forever.
func (c *committer) abortAndRebuild() {
	rebuild := c.env.tasks.Aborted()
	c.abort()
	if c.env.fate.Fatal() == nil {
		c.env.rebuild(rebuild)
	}
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
	c *committer
	// closing is when the commit began, for the commit-time metric.
	closing time.Time
}

var _ taskmgr.Transaction = (*kafkaTransaction)(nil)

// Begin opens a transaction, unless none is open and nothing moved.
func (tx *kafkaTransaction) Begin(dirty bool) (bool, error) {
	if !dirty && !tx.c.env.producer.Open() {
		return false, nil
	}
	tx.closing = tx.c.env.now()
	return true, tx.c.env.producer.Begin()
}

// SendOutputs produces the task's remaining outputs (sendOutputs).
func (tx *kafkaTransaction) SendOutputs(t *taskmgr.Task) (bool, error) {
	return tx.c.env.sendOutputs(t)
}

// WriteState produces the task's store changes and checkpoint
// (writeChangelog). The task's stores keep the changelog positions known
// for them beside the state this commit makes: they hold for every later
// committed state too.
func (tx *kafkaTransaction) WriteState(t *taskmgr.Task, snap task.Snapshot) ([]byte, bool, error) {
	if sound, err := tx.c.writeChangelog(t, snap); !sound || err != nil {
		return nil, sound, err
	}
	return tx.c.env.local.position(t.ID()).Encode(), true, nil
}

// Commit sends the offsets with the group's metadata (KIP-447) and commits,
// unless a task failed meanwhile with outputs in the transaction.
func (tx *kafkaTransaction) Commit(offsets map[causal.Channel]int64) error {
	e := &tx.c.env
	if e.fate.Aborting() {
		return errTaskFailedInTransaction
	}
	md, err := e.consumer.GroupMetadata()
	if err != nil {
		return fmt.Errorf("group metadata: %w", err)
	}
	return e.producer.Commit(offsets, md)
}

// releaseOutputs lets every task write its next outputs over the memory
// of those before, once the producer holds on to none of them (see
// task.Task.ReleaseOutputs); otherwise the next commit tries again.
func (c *committer) releaseOutputs() {
	if !c.env.producer.Released() {
		return
	}
	for _, rt := range c.env.tasks.Tasks() {
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
func (c *committer) writeChangelog(t *taskmgr.Task, snap task.Snapshot) (bool, error) {
	e := &c.env
	for name, changes := range snap.Changes {
		cl := restore.StoreChangelogTopic(e.appID, name)
		for _, ch := range changes {
			err := e.producer.SendCopy(changelogMessage(cl, t.Partition(), ch.Key, ch.Value))
			if err != nil {
				return c.refusedState(t, fmt.Sprintf("store %q", name), len(ch.Key)+len(ch.Value), err)
			}
		}
	}
	topic := restore.CheckpointTopic(e.appID, t.Processor())
	cp := snap.Checkpoint().Encode()
	if err := e.producer.SendCopy(changelogMessage(topic, t.Partition(), restore.CheckpointRecordKey, cp)); err != nil {
		return c.refusedState(t, "the checkpoint", len(cp), err)
	}
	return true, nil
}

// refusedState settles err, met writing part of t's state (what, of size
// bytes): a refusal for good fails t and the transaction; any other error
// is the transaction's.
func (c *committer) refusedState(t *taskmgr.Task, what string, size int, err error) (bool, error) {
	if transport.Classify(err) != transport.ClassRecord {
		return false, err
	}
	c.env.failTask(t, &StateRefusedError{Task: t.ID(), What: what, Size: size, Err: err})
	c.env.fate.MustAbort()
	return false, nil
}

// onError aborts and rebuilds the tasks that had effects in the
// transaction from committed state, or stops the worker when the error is
// fatal (a fenced producer).
func (c *committer) onError(err error) {
	e := &c.env
	if e.producer.Fatal(err) {
		e.fate.Stop(fmt.Errorf("producer fenced or failed: %w; when fenced, either another process runs with this worker's instance id %q "+
			"(the same --instance-id, or a copy of its state dir), or the broker lost this producer's state "+
			"(the embedded broker does when it restarts: see docs/operations.md, The embedded broker); restart this worker", err, e.instanceID))
		return
	}
	c.failed++
	c.lastErr = err
	e.producer.Failed()
	e.log.Warn("transaction failed; aborting and rebuilding the tasks with work in it from committed state",
		zap.Error(err), zap.Stringer("class", transport.Classify(err)), zap.Int("consecutive_failures", c.failed))
	// Back off on repeated failures so a persistent fault does not spin.
	if c.failed > 1 {
		select {
		case <-time.After(min(time.Duration(1<<min(c.failed, 6))*50*time.Millisecond, 5*time.Second)):
		case <-e.stop:
		}
	}
	c.abortAndRebuild()
}

// abort aborts the open transaction, if any.
func (c *committer) abort() {
	e := &c.env
	e.fate.Aborted()
	for _, rt := range e.tasks.Tasks() {
		rt.StreamedAborted()
	}
	if err := e.producer.Abort(); err != nil {
		e.fate.Stop(err)
	}
}

// changelogMessage is a changelog record for partition p.
func changelogMessage(topic string, p int32, key, value []byte) transport.Message {
	return transport.Message{Topic: topic, Partition: p, Key: key, Value: value}
}
