package taskmgr

import (
	"iter"
	"maps"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework/store"
	"github.com/causeway-stream/causeway/framework/task"
)

// ID names the task: "processor/partition".
func (t *Task) ID() string { return t.id }

// Processor is the name of the task's processor.
func (t *Task) Processor() string { return t.processor }

// Partition is the partition index of the task's inputs.
func (t *Task) Partition() int32 { return t.partition }

// Inputs are the processor's input topics; the caller must not change them.
func (t *Task) Inputs() []string { return t.inputs }

// Task is the task itself; nil for a failed task whose state was let go.
func (t *Task) Task() *task.Task { return t.task }

// State is where the task is in its life.
func (t *Task) State() State { return t.state }

// Err is the failure of a failed task.
func (t *Task) Err() error { return t.err }

// Streamed counts the outputs produced into the open transaction.
func (t *Task) Streamed() int { return t.streamed }

// Sending notes that outputs of the task (or dead letters in their
// place) go into the open transaction, which then holds effects of the
// task: an abort rebuilds it.
func (t *Task) Sending() { t.inTxn = true }

// CountStreamed counts an output of the task produced into the open
// transaction.
func (t *Task) CountStreamed() { t.streamed++ }

// StreamedAborted forgets the outputs streamed into a transaction that was
// aborted.
func (t *Task) StreamedAborted() { t.streamed = 0 }

// Touch puts the task on the caller's list of tasks to stream outputs
// from: it reports whether the task was not on it yet.
func (t *Task) Touch() bool {
	if t.touched {
		return false
	}
	t.touched = true
	return true
}

// Untouch takes the task off the list of tasks to stream outputs from.
func (t *Task) Untouch() { t.touched = false }

// Committed is the next offset per input topic as last committed (or
// seeded); the caller must not change it.
func (t *Task) Committed() map[string]int64 { return t.committed }

// Blocked returns how long ch's head has waited at the gate, and for
// what, if it waits.
func (t *Task) Blocked(ch causal.Channel) (Blocked, bool) {
	b, ok := t.blocked[ch]
	return b, ok
}

// BlockedChannels lists the channels whose heads wait at the gate.
func (t *Task) BlockedChannels() iter.Seq2[causal.Channel, Blocked] { return maps.All(t.blocked) }

// SetBlocked records that ch's head waits at the gate as b says.
func (t *Task) SetBlocked(ch causal.Channel, b Blocked) { t.blocked[ch] = b }

// Unblock records that ch's head no longer waits.
func (t *Task) Unblock(ch causal.Channel) { delete(t.blocked, ch) }

// Skips lists the records an operator moved the task past.
func (t *Task) Skips() []task.Skip { return t.skips }

// AddSkip moves the task past a record (see Manager.Request): every later
// build dead-letters it instead of processing it.
func (t *Task) AddSkip(s task.Skip) { t.skips = append(t.skips, s) }

// Stores holds the task's stores at their committed state; nil until the
// first build, and after a failure that leaves it in doubt.
func (t *Task) Stores() store.Set { return t.stores }

// ReplaceStores closes the task's stores, if any, and puts set in their
// place (a wiped copy); with no checkpoint to match it, a rebuild reads
// the task's state back in full.
func (t *Task) ReplaceStores(set store.Set) error {
	var err error
	if t.stores != nil {
		err = t.stores.Close()
	}
	t.stores, t.last = set, nil
	return err
}

// Last is the task's committed checkpoint, matching Stores: where a
// rebuild on the same stores resumes. Nil when Stores is.
func (t *Task) Last() *Restored { return t.last }

// The manager changes a task only through the methods below, named for
// what happened to it.

// beganTxn records that the task has effects in the open transaction.
func (t *Task) beganTxn() { t.inTxn = true }

// txnEnded records that the open transaction ended, committed or aborted:
// the task has no effects and no streamed outputs in one any more.
func (t *Task) txnEnded() { t.streamed, t.inTxn = 0, false }

// committedAt records that the task's input channel on topic is committed
// up to next.
func (t *Task) committedAt(topic string, next int64) { t.committed[topic] = next }

// matched records the checkpoint the task's stores hold.
func (t *Task) matched(r *Restored) { t.last = r }

// restoring makes the task wait for its state, with no failure.
func (t *Task) restoring() { t.state, t.err = Restoring, nil }

// opened gives the task its stores, empty or holding an older committed
// state.
func (t *Task) opened(set store.Set) { t.stores = set }

// storesClosed forgets the task's stores, closed, and the checkpoint they
// matched.
func (t *Task) storesClosed() { t.stores, t.last = nil, nil }

// building readies the task's bookkeeping for a build: no transaction,
// nothing streamed, no head waiting.
func (t *Task) building() {
	t.txnEnded()
	t.blocked = map[causal.Channel]Blocked{}
}

// running makes the task run tt.
func (t *Task) running(tt *task.Task) { t.task, t.state = tt, Running }

// failed makes the task fail with err.
func (t *Task) failed(err error) { t.state, t.err = Failed, err }

// closed lets the task's processor go.
func (t *Task) closed() { t.task = nil }
