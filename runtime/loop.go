package runtime

import (
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/causeway-stream/causeway/runtime/internal/member"
	"github.com/causeway-stream/causeway/runtime/internal/transport"
)

// newLoop makes the thread's member loop over the pump's poll, and wires
// the pump to the thread's rounds.
func (w *StreamThread) newLoop(batch int) (*member.Loop, error) {
	l, err := member.New(func(timeout time.Duration, max int, events *[]transport.Event) int {
		return w.pump.poll(timeout, max, events)
	}, member.Options{Batch: batch, CommitInterval: w.cfg.CommitInterval, Now: func() time.Time { return w.now() }, Log: w.log})
	if err != nil {
		return nil, err
	}
	w.pump.wire(&l.Fate, w.metrics.Latency, w.log,
		pumpEnv{between: w.between, tick: w.tick, commitError: w.commits.onError})
	return l, nil
}

// run is the pump's goroutine: the only one that touches the clients and
// tasks. The member loop polls and hands the records to the pump; the
// thread's own rounds are between and tick.
func (w *StreamThread) run() {
	defer w.closeClientsWithin(w.cfg.ShutdownTimeout)
	err := w.loop.Run(&w.pump, w.stop)
	switch {
	case err == nil:
		w.shutdown()
	case errors.Is(err, member.ErrStoppedWaiting):
		// Stop was called while the pump waited on the cluster: the
		// thread stops as after a last commit that failed, its open work
		// left to the next owner, and without an error.
		w.log.Warn("stopped while waiting; the open work is left to the next owner", zap.Error(w.fate.Fatal()))
		w.publishStatus()
	default:
		w.board.stopped(err)
		// Unready (and unhealthy) from here on, while the clients close.
		w.publishStatus()
		w.log.Error("worker stopping on a fatal error", zap.Error(err))
	}
}

// between takes, when the loop looks around between polls, one request
// or result the thread's other goroutines sent: a restart or skip, a
// query, finished restores, global tables' records, or the global
// reader's end. Stop and restart requests are looked at when the
// consumer is idle and every so many events otherwise: a select per
// record costs more than the record's own bookkeeping.
func (w *StreamThread) between() {
	select {
	case req := <-w.requests:
		w.restarts.forget(req.id) // an operator's: the policy's count starts over
		req.reply <- w.serve(req)
	case req := <-w.desk.arrived:
		w.desk.take(req)
	case res := <-w.restores.results:
		w.restores.finish(res)
	case recs := <-w.globalReader.ready():
		w.pump.applyGlobals(w.globals, recs)
	case <-w.globalReader.stopped():
		w.fate.Stop(w.globalReader.failure())
	default:
	}
}

// tick is the thread's commit round: punctuations, restarts the policy
// says are due, idle advances, positions, standbys, then the commit and
// what waits on it.
func (w *StreamThread) tick() {
	now := w.now()
	for _, rt := range w.tasks.Tasks() {
		if rt.State() == StateRunning {
			if err := rt.Task().Punctuate(now); err != nil {
				w.pump.failTask(rt, err)
			}
		}
	}
	for _, id := range w.restarts.due(w.tasks.Tasks(), now) {
		if r := w.serve(taskRequest{id: id}); r.err != nil {
			w.log.Warn("restart", zap.String("task", id), zap.Error(r.err))
		}
	}
	w.pump.advanceIdle()
	w.local.refreshPositions(now)
	w.standby.tend(now)
	if err := w.commits.commit(); err != nil {
		w.commits.onError(err)
	} else {
		w.desk.answer()
	}
	w.pump.backpressure()
	w.publishStatus()
}

func (w *StreamThread) shutdown() {
	defer w.desk.refuse(ErrStopped)
	w.restores.cancelAll()
	w.standby.close()
	if w.fate.Aborting() {
		w.commits.abort()
	} else if err := w.commits.commit(); err != nil {
		w.log.Warn("last commit before shutdown failed; its work will be redone by the next owner", zap.Error(err))
		w.commits.abort()
	}
	w.local.savePositions(w.tasks.Tasks())
	closeTasks(w.tasks, w.metrics, w.tasks.Tasks())
	w.publishStatus()
	w.log.Info("worker stopped")
}
