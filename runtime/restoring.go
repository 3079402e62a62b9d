package runtime

import (
	"errors"
	"fmt"
	"maps"
	"sync"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"go.uber.org/zap"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/internal/taskmgr"
)

// Restores run off the pump, one at a time, so that a task restoring a
// large state does not stop the worker's other tasks. A task whose stores
// must be read back (assigned cold, or rebuilt after its stores were let
// go) is prepared by the task manager and handed to a restore; while it
// restores it receives nothing (its partitions that no running task reads
// are paused) and holds the group's offsets of its channels where they
// are. When the restore is over, the pump builds the task and rewinds its
// channels, as for a restart: the other tasks on a shared channel skip
// what they already have.

// restores is the restore under way and the tasks waiting for the next.
// Only the pump touches it; a restore's goroutine touches only the tasks
// it was given, and hands its result back on results.
type restores struct {
	restorer *restorer
	// queue holds prepared tasks waiting for the next restore.
	queue []*taskmgr.Task
	// running is the tasks of the restore under way, nil when none is;
	// closing cancel ends it early.
	running []*taskmgr.Task
	cancel  chan struct{}
	// results brings back the tasks of the restore under way as they are
	// restored, then its final result; nil when none runs.
	results chan restoreResult
	wg      sync.WaitGroup
	// start runs a restore; tests run it in place.
	start func(func())
}

// restoreLater queues prepared tasks for a restore, which starts at once
// unless one is under way.
func (w *Worker) restoreLater(ts []*taskmgr.Task) {
	if len(ts) == 0 {
		return
	}
	w.restores.queue = append(w.restores.queue, ts...)
	w.nextRestore()
}

// nextRestore starts a restore of the queued tasks, if there are some and
// none is under way.
func (w *Worker) nextRestore() {
	r := &w.restores
	if r.running != nil || len(r.queue) == 0 {
		return
	}
	ts := r.queue
	// Room for every result, so that the restore never waits for the pump.
	results, cancel := make(chan restoreResult, len(ts)+1), make(chan struct{})
	r.queue, r.running, r.cancel, r.results = nil, ts, cancel, results
	r.wg.Add(1)
	r.start(func() {
		defer r.wg.Done()
		rest, err := r.restorer.restore(cancel, ts, func(res restoreResult) { results <- res })
		results <- restoreResult{tasks: rest, err: err, final: true}
	})
	w.collectRestores() // a restore run in place is over already
}

// collectRestores takes what the restore under way has brought back so
// far.
func (w *Worker) collectRestores() {
	for w.restores.running != nil {
		select {
		case res := <-w.restores.results:
			w.finishRestore(res)
		default:
			return
		}
	}
}

// finishRestore builds the tasks a restore brought back and rewinds their
// channels; after the final result of a restore, it starts the next. A
// restore that failed stops the worker, as reading committed state does
// anywhere else.
func (w *Worker) finishRestore(res restoreResult) {
	// Tasks brought back together are built together: one look at the
	// group's offsets for all of them, not one each.
	for more := true; more && !res.final && res.err == nil; {
		select {
		case next := <-w.restores.results:
			if next.err != nil {
				w.finishRestore(res)
				res = next
				more = false
				continue
			}
			res = res.merge(next)
		default:
			more = false
		}
	}
	r := &w.restores
	if res.final {
		r.running, r.cancel, r.results = nil, nil, nil
		defer w.nextRestore()
	}
	if len(res.tasks) == 0 {
		return
	}
	if res.err != nil {
		for _, t := range res.tasks {
			w.tasks.DropStores(t)
		}
		if !errors.Is(res.err, ErrStopped) {
			w.fatalErr = fmt.Errorf("restore: %w", res.err)
		}
		return
	}
	for id, pos := range res.positions {
		w.positions[id] = pos
	}
	if err := w.tasks.Finish(res.tasks, res.restored); err != nil {
		w.fatalErr = err
		return
	}
	var built []*taskmgr.Task
	for _, t := range res.tasks {
		if t.State == StateRunning {
			built = append(built, t)
		}
	}
	w.pump.last = nil
	w.seek(w.tasks.Rewind(built), "restored tasks")
	w.backpressure() // resume what only they read
	w.publishStatus()
}

// cancelRestores ends the restore under way, waits for it, and forgets the
// queued tasks: their stores close with them.
func (w *Worker) cancelRestores() {
	r := &w.restores
	if r.running != nil {
		close(r.cancel)
		r.wg.Wait()
		r.running, r.cancel, r.results = nil, nil, nil
	}
	r.queue = nil
}

// seek moves the consumer to where each channel must be read again from.
func (w *Worker) seek(at map[causal.Channel]int64, why string) {
	for ch, off := range at {
		topic := ch.Topic
		if err := w.consumer.Seek(kafka.TopicPartition{Topic: &topic, Partition: ch.Partition, Offset: kafka.Offset(off)}, 0); err != nil {
			w.fatalErr = fmt.Errorf("rewind %s to offset %d for %s: %w", ch, off, why, err)
			return
		}
	}
	if len(at) > 0 {
		w.log.Debug("rewound channels", zap.Int("channels", len(at)), zap.String("for", why))
	}
}

// merge is a and b, brought back together; b is the later.
func (a restoreResult) merge(b restoreResult) restoreResult {
	a.tasks = append(a.tasks, b.tasks...)
	if a.restored == nil {
		a.restored = map[string]*taskmgr.Restored{}
	}
	if a.positions == nil {
		a.positions = map[string]storePositions{}
	}
	maps.Copy(a.restored, b.restored)
	maps.Copy(a.positions, b.positions)
	a.final = b.final
	return a
}
