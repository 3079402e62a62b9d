package runtime

import (
	"errors"
	"fmt"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"go.uber.org/zap"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework/task"
)

// pendingCommit is one task's share of a transaction.
type pendingCommit struct {
	rt   *runningTask
	snap task.Snapshot
}

// commit closes the open transaction with every task's remaining outputs,
// store changes, checkpoint and offsets. A task that failed while
// processing contributes nothing, and its committed offsets stay where they
// were; if it had already streamed outputs, the transaction is aborted
// instead and the healthy tasks redo their work from committed state.
func (w *Worker) commit() error {
	if len(w.tasks.tasks) == 0 || w.consumer == nil {
		return nil
	}
	if w.mustAbort {
		w.log.Warn("a task failed after its outputs were sent: aborting the transaction; the tasks with work in it redo that work")
		w.abortAndRebuild()
		return nil
	}
	var work []pendingCommit
	dirty := w.producer.open
	for _, rt := range w.tasks.tasks {
		if rt.t == nil || rt.state == StateRestoring {
			continue
		}
		// A failed task still commits what came before its failure when its
		// snapshot says that is well defined (a record refused at receipt).
		snap, err := rt.t.Snapshot()
		if err != nil {
			rt.t.TakeOutputs()
			continue
		}
		moved := len(snap.Changes) > 0
		for _, e := range snap.Offsets {
			if rt.committed[e.Channel.Topic] != e.Offset {
				moved = true
			}
		}
		if moved {
			dirty, rt.inTxn = true, true
		}
		work = append(work, pendingCommit{rt: rt, snap: snap})
	}
	if !dirty {
		return nil
	}
	closing := w.now()
	if err := w.producer.begin(); err != nil {
		return err
	}
	cl := changelogTopic(w.cfg.ApplicationID)
	fresh := make(map[*runningTask][]causal.Entry, len(work))
	for _, p := range work {
		sound, err := w.sendOutputs(p.rt)
		if err != nil {
			return err
		}
		if !sound {
			continue // failed on an output Kafka refused: its share stays out
		}
		if err := w.writeChangelog(cl, p); err != nil {
			return err
		}
		fresh[p.rt] = p.snap.Offsets
	}
	if w.mustAbort {
		w.log.Warn("a task failed after its outputs were sent: aborting the transaction; the tasks with work in it redo that work")
		w.abortAndRebuild()
		return nil
	}
	md, err := w.consumer.GetConsumerGroupMetadata()
	if err != nil {
		return fmt.Errorf("group metadata: %w", err)
	}
	if err := w.producer.commit(w.tasks.groupOffsets(fresh), md); err != nil {
		return err
	}
	w.failedCommits = 0
	for _, p := range work {
		for _, e := range p.snap.Offsets {
			p.rt.committed[e.Channel.Topic] = e.Offset
		}
	}
	for _, rt := range w.tasks.tasks {
		rt.streamed, rt.inTxn = 0, false
	}
	w.metrics.CommitSeconds.Observe(w.now().Sub(closing).Seconds())
	return nil
}

// writeChangelog sends one task's store changes and checkpoint to the
// changelog, in the open transaction.
func (w *Worker) writeChangelog(cl string, p pendingCommit) error {
	for name, changes := range p.snap.Changes {
		for _, c := range changes {
			msg := changelogMessage(&cl, p.rt.partition, storeKey(p.rt.processor, p.rt.partition, name, c.Key), c.Value)
			if err := w.producer.produce(msg); err != nil {
				return err
			}
		}
	}
	next := map[string]int64{}
	for _, e := range p.snap.Offsets {
		next[e.Channel.Topic] = e.Offset
	}
	cp := taskCheckpoint{next: next, stream: p.snap.StreamTime, gate: p.snap.Checkpoint}
	return w.producer.produce(changelogMessage(&cl, p.rt.partition, checkpointKey(p.rt.processor, p.rt.partition), cp.encode()))
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

// abortAndRebuild aborts the open transaction and rebuilds, from committed
// state, exactly the tasks that had effects in it; the others keep their
// state, and what they hold. A failed task among them lets its state go
// and stays failed at its committed offsets: only a restart runs it again,
// so a record that fails every time cannot abort and rebuild forever.
func (w *Worker) abortAndRebuild() {
	var rebuild []*runningTask
	for _, rt := range w.tasks.tasks {
		if !rt.inTxn {
			continue
		}
		rt.inTxn = false
		if rt.state == StateFailed {
			w.tasks.closeTask(rt)
			continue
		}
		rebuild = append(rebuild, rt)
	}
	w.abort()
	if w.fatalErr == nil {
		w.rebuild(rebuild)
	}
}

// abort aborts the open transaction, if any.
func (w *Worker) abort() {
	w.mustAbort = false
	for _, rt := range w.tasks.tasks {
		rt.streamed = 0
	}
	if err := w.producer.abort(); err != nil {
		w.fatalErr = err
	}
}

// rebuild throws the given tasks away and builds them again from what was
// committed, then rewinds their channels; other tasks keep their state and
// skip what they have already received. Never patch in memory.
func (w *Worker) rebuild(rts []*runningTask) {
	if len(rts) == 0 {
		return
	}
	ids := make([]string, len(rts))
	for i, rt := range rts {
		ids[i] = rt.id
	}
	w.log.Info("rebuilding tasks from committed state", zap.Strings("tasks", ids))
	if err := w.tasks.build(rts); err != nil {
		if !errors.Is(err, ErrStopped) {
			w.fatalErr = err
		}
		return
	}
	w.pump.last = nil
	for ch, off := range w.tasks.rewind(rts) {
		topic := ch.Topic
		if err := w.consumer.Seek(kafka.TopicPartition{Topic: &topic, Partition: ch.Partition, Offset: kafka.Offset(off)}, 0); err != nil {
			w.fatalErr = fmt.Errorf("rewind %s to offset %d for rebuilt tasks: %w", ch, off, err)
			return
		}
	}
	w.publishStatus()
}

// restart commits what the tasks have done, then rebuilds the failed task
// id from its committed state, and only it; the consumer rewinds its
// channels. A task that is not failed is left as it is (ErrNotFailed), so
// repeated requests rebuild nothing twice.
func (w *Worker) restart(id string) error {
	rt, ok := w.tasks.find(id)
	if !ok {
		return fmt.Errorf("%w: %q", ErrNoTask, id)
	}
	if rt.state != StateFailed {
		return fmt.Errorf("%w: %s is %s", ErrNotFailed, id, rt.state)
	}
	if err := w.commit(); err != nil {
		w.onCommitError(err)
		return err
	}
	w.log.Info("restarting task from its committed state", zap.String("task", id))
	w.rebuild([]*runningTask{rt})
	return w.fatalErr
}
