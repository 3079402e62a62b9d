package runtime

import (
	"time"

	"go.uber.org/zap"
)

// run is the pump's goroutine: the only one that touches the clients and
// tasks.
func (w *StreamThread) run() {
	defer w.closeClientsWithin(w.cfg.ShutdownTimeout)
	w.clockAt(w.now())
	nextCommit := w.pump.time.Add(w.cfg.CommitInterval)
	// Stop and restart requests are looked at when the consumer is idle and
	// every so many events otherwise: a select per record costs more than the
	// record's own bookkeeping.
	const eventsPerCheck = 64
	sinceCheck := 0
	for {
		if sinceCheck == 0 {
			select {
			case <-w.stop:
				w.shutdown()
				return
			case req := <-w.requests:
				w.restarts.Forget(req.id) // an operator's: the policy's count starts over
				req.reply <- w.serve(req)
			case req := <-w.desk.arrived:
				w.desk.take(req)
			case res := <-w.restores.results:
				w.finishRestores(res)
			case recs := <-w.globalBatches():
				w.applyGlobals(recs)
			case <-w.globalReader.stopped():
				w.fate.stop(w.globalReader.failure())
			default:
			}
		}
		n := w.poll()
		w.clockAt(w.now())
		w.handlePolled()
		if sinceCheck += n; n == 0 || sinceCheck >= eventsPerCheck {
			sinceCheck = 0
		}
		if w.fate.fatal == nil && w.commitDue(nextCommit, n) {
			w.tick()
			nextCommit = w.now().Add(w.cfg.CommitInterval)
		}
		if w.fate.onlyStopped(w.stop) {
			// Stop was called while the pump waited on the cluster: the
			// thread stops as after a last commit that failed, its open
			// work left to the next owner, and without an error.
			w.log.Warn("stopped while waiting; the open work is left to the next owner", zap.Error(w.fate.fatal))
			w.publishStatus()
			return
		}
		if w.fate.fatal != nil {
			w.mu.Lock()
			w.err = w.fate.fatal
			w.mu.Unlock()
			// Unready (and unhealthy) from here on, while the clients close.
			w.publishStatus()
			w.log.Error("worker stopping on a fatal error", zap.Error(w.fate.fatal))
			return
		}
	}
}

// commitDue reports whether the pump commits now, the last poll having
// handed it polled events: once the commit interval is up (next), unless
// that poll filled the pump's batch and the commit is less than a tenth of
// the interval overdue. A full batch says the consumer has more records
// ready, already fetched; handling them first puts them in the
// transaction about to close, where committing in the middle of them
// would leave them to wait a whole interval for the next. Past the tenth,
// the commit goes ahead however much is ready, so that a backlog delays
// no commit by more than that.
func (w *StreamThread) commitDue(next time.Time, polled int) bool {
	over := w.pump.time.Sub(next)
	if over < 0 {
		return false
	}
	return polled < w.pump.batch || over >= w.cfg.CommitInterval/10
}

func (w *StreamThread) tick() {
	now := w.now()
	for _, rt := range w.tasks.Tasks() {
		if rt.State() == StateRunning {
			if err := rt.Task().Punctuate(now); err != nil {
				w.failTask(rt, err)
			}
		}
	}
	w.restartFailed(now)
	w.advanceIdle()
	w.local.refreshPositions(now)
	w.standby.tend(now)
	if err := w.commit(); err != nil {
		w.onCommitError(err)
	} else {
		w.desk.answer()
	}
	w.backpressure()
	w.publishStatus()
}

func (w *StreamThread) shutdown() {
	defer w.desk.refuse(ErrStopped)
	w.cancelRestores()
	w.standby.close()
	if w.fate.abort {
		w.abort()
	} else if err := w.commit(); err != nil {
		w.log.Warn("last commit before shutdown failed; its work will be redone by the next owner", zap.Error(err))
		w.abort()
	}
	w.local.savePositions(w.tasks.Tasks())
	w.closeTasks(w.tasks.Tasks())
	w.publishStatus()
	w.log.Info("worker stopped")
}

// clockAt sets the pump's time and the tasks' clock to now, read where the
// pump polls: the tasks' clock trails the wall clock by at most the
// handling of one poll batch.
func (w *StreamThread) clockAt(now time.Time) {
	w.pump.tick(now)
	if w.tasks != nil {
		w.tasks.SetNow(now)
	}
}
