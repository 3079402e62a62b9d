package taskmgr

import (
	"fmt"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework/task"
)

// The rules of a commit and an abort: what each task contributes, which
// offsets the group may commit, and which tasks an abort rebuilds.

// Transaction is where a commit writes, in the order Commit calls it: the
// worker's Kafka transaction, or the test driver's in-memory log.
type Transaction interface {
	// Begin opens the transaction if there is something to commit: dirty
	// says whether any task's snapshot moves its offsets or changes its
	// stores. It reports whether the commit goes on.
	Begin(dirty bool) (bool, error)
	// SendOutputs sends what t's task has emitted and not sent yet. It
	// reports whether t is still sound: false when it failed on an output,
	// and its share of the commit then stays out.
	SendOutputs(t *Task) (sound bool, err error)
	// WriteState writes t's store changes and its checkpoint (snap). It
	// returns what t's stores keep beside their committed state once the
	// transaction commits (see store.Set.Commit); nil for nothing. It
	// reports whether t is still sound: false when a change or the
	// checkpoint can never be written (it failed the task), and its share
	// of the commit then stays out.
	WriteState(t *Task, snap task.Snapshot) (local []byte, sound bool, err error)
	// Commit commits the transaction with the offsets the group may
	// commit.
	Commit(offsets map[causal.Channel]int64) error
}

// Commit closes a transaction, the one commit path of the worker and the
// test driver: every task's snapshot (Pending), then per task its remaining
// outputs, then its store changes and checkpoint, then the commit with the
// group offsets the snapshots allow (GroupOffsets); once tx has committed,
// the tasks learn it (Committed). It reports whether a transaction was
// committed. On an error nothing is marked committed: the caller aborts,
// and rebuilds the tasks with effects in the transaction (Aborted).
func (m *Manager) Commit(tx Transaction) (bool, error) {
	work, dirty := m.Pending()
	if ok, err := tx.Begin(dirty); !ok || err != nil {
		return false, err
	}
	fresh := make(map[*Task]task.Snapshot, len(work))
	local := make(map[*Task][]byte, len(work))
	for _, p := range work {
		sound, err := tx.SendOutputs(p.Task)
		if err != nil {
			return false, err
		}
		if !sound {
			continue // failed on an output: its share stays out
		}
		kept, sound, err := tx.WriteState(p.Task, p.Snap)
		if err != nil {
			return false, err
		}
		if !sound {
			continue // a change that can never be written: its share stays out
		}
		fresh[p.Task], local[p.Task] = p.Snap, kept
	}
	if err := tx.Commit(m.GroupOffsets(fresh)); err != nil {
		return false, err
	}
	m.Committed(fresh, local)
	return true, nil
}

// Pending is one task's share of a commit.
type Pending struct {
	Task *Task
	Snap task.Snapshot
}

// Pending takes the snapshot of every built task for a commit. A task
// whose snapshot is not well defined (it failed part-way through a record)
// contributes nothing, and its outputs are dropped with it; a failed task
// still commits what came before its failure when its snapshot allows. A
// task whose snapshot moves its offsets or changes its stores is marked
// inTxn. dirty reports whether any did.
func (m *Manager) Pending() (work []Pending, dirty bool) {
	for _, t := range m.tasks {
		if t.task == nil || t.state == Restoring {
			continue
		}
		snap, err := t.task.Snapshot()
		if err != nil {
			t.task.TakeOutputs()
			continue
		}
		moved := len(snap.Changes) > 0
		for _, e := range snap.Offsets {
			if t.committed[e.Channel.Topic] != e.Offset {
				moved = true
			}
		}
		if moved {
			dirty = true
			t.beganTxn()
		}
		work = append(work, Pending{Task: t, Snap: snap})
	}
	return work, dirty
}

// GroupOffsets is, per channel of the tasks, the smallest next offset of
// any task reading it: a channel shared by several processors resumes
// where the furthest-behind one must, and the others drop the replay.
// fresh holds the snapshots of the tasks committing now; the others count
// with what they last committed.
func (m *Manager) GroupOffsets(fresh map[*Task]task.Snapshot) map[causal.Channel]int64 {
	low := map[causal.Channel]int64{}
	lower := func(ch causal.Channel, next int64) {
		if cur, ok := low[ch]; !ok || next < cur {
			low[ch] = next
		}
	}
	for _, t := range m.tasks {
		if snap, ok := fresh[t]; ok {
			for _, e := range snap.Offsets {
				lower(e.Channel, e.Offset)
			}
			continue
		}
		for in, next := range t.committed {
			lower(causal.Channel{Topic: in, Partition: t.partition}, next)
		}
	}
	return low
}

// Committed records that the transaction holding fresh committed. Those
// tasks resume from the offsets they committed, and their stores commit
// the writes the transaction holds. Other tasks' pending writes stay
// pending: either no transaction has taken them yet, or the task broke
// part-way through a record (it snapshots no more, and the writes are
// discarded when it is rebuilt). No task has effects in an open
// transaction any more. A task's stores keep local[t] beside their
// committed state. A task whose stores cannot commit fails, and is
// restored from the changelog when it runs again.
func (m *Manager) Committed(fresh map[*Task]task.Snapshot, local map[*Task][]byte) {
	for _, t := range m.tasks {
		t.txnEnded()
		snap, ok := fresh[t]
		if !ok {
			continue
		}
		for _, e := range snap.Offsets {
			t.committedAt(e.Channel.Topic, e.Offset)
		}
		if t.observer != nil {
			t.observer.committed(t.id)
		}
		if t.stores == nil {
			continue
		}
		if err := t.stores.Commit(local[t]); err != nil {
			m.closeStores(t)
			m.Fail(t, fmt.Errorf("commit stores: %w", err))
			continue
		}
		cp := snap.Checkpoint()
		t.matched(&Restored{Checkpoint: &cp})
	}
}

// Aborted records that the open transaction was aborted and returns the
// tasks to rebuild: those that had effects in it, whose pending store
// writes it discards. Other tasks keep theirs for the next transaction. A
// failed task among them lets its task go and stays failed at its
// committed offsets: only a restart runs it again, so a record that fails
// every time cannot abort and rebuild forever.
func (m *Manager) Aborted() []*Task {
	var rebuild []*Task
	for _, t := range m.tasks {
		had := t.inTxn
		t.txnEnded()
		if !had {
			continue
		}
		if t.stores != nil {
			if err := t.stores.Abort(); err != nil {
				m.closeStores(t)
			}
		}
		if t.state == Failed {
			m.CloseTask(t)
			continue
		}
		rebuild = append(rebuild, t)
	}
	return rebuild
}

// Request checks an operator's request to restart the task id, or to move
// it past the record it failed on (skip), and returns the task, and for a
// skip what to skip. Only a failed task is served: ErrNoTask, ErrNotFailed
// and ErrNoRecord say why not. Nothing changes until the caller, having
// committed the other tasks' work, calls Skip (for a skip) and rebuilds
// the task.
func (m *Manager) Request(id string, skip bool) (*Task, task.Skip, error) {
	t, ok := m.Find(id)
	if !ok {
		return nil, task.Skip{}, fmt.Errorf("%w: %q", ErrNoTask, id)
	}
	if t.state != Failed {
		return nil, task.Skip{}, fmt.Errorf("%w: %s is %s", ErrNotFailed, id, t.state)
	}
	if !skip {
		return t, task.Skip{}, nil
	}
	rec, ok := FailedRecord(t.err)
	if !ok {
		return nil, task.Skip{}, fmt.Errorf("%w: %s failed with: %v", ErrNoRecord, id, t.err)
	}
	return t, task.Skip{Record: rec, Reason: "skipped by an operator after: " + t.err.Error()}, nil
}
