package runtime

import (
	"time"

	"github.com/causeway-stream/causeway/runtime/internal/statedir"
	"go.uber.org/zap"
)

// closeClientsWithin closes the clients and stores, then closes done; a
// close that takes longer than bound (librdkafka's consumer can wait
// forever for a group it was fenced from) is left behind, logged, so that
// the worker's Done and the process's exit are not held up by it.
func (w *StreamThread) closeClientsWithin(bound time.Duration) {
	defer close(w.done)
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		w.closeClients()
	}()
	t := time.NewTimer(bound)
	defer t.Stop()
	select {
	case <-closed:
	case <-t.C:
		w.log.Error("the Kafka clients did not close in time; leaving them to the process's exit", zap.Duration("waited", bound))
	}
}

func (w *StreamThread) closeClients() {
	if m := w.board.unfollow(); m != nil {
		m.stop()
	}
	if w.globalReader != nil {
		w.globalReader.stop()
		w.globalReader = nil
	}
	w.restores.cancelAll() // after a fatal error, one may still run
	w.standby.close()
	if w.tasks != nil {
		// After a fatal error the tasks are still open: close them, and
		// their stores on disk, before the clients go.
		closeTasks(w.tasks, w.metrics, w.tasks.Tasks())
	}
	w.local.close() // its look at the changelogs uses the consumer
	if w.consumer != nil {
		if err := w.consumer.Close(); err != nil {
			w.log.Warn("close consumer", zap.Error(err))
		}
	}
	if w.admin != nil {
		w.admin.Close()
	}
	if w.producer != nil {
		if err := w.producer.Close(); err != nil {
			w.log.Warn("close producer", zap.Error(err))
		}
	}
	if w.broker != nil {
		w.broker.Close()
	}
	releaseStateDir(w.stateLock, w.log)
	w.stateLock = nil
}

// releaseStateDir gives up the state dir's lock, once nothing in it is
// open any more.
func releaseStateDir(lock *statedir.Lock, log *zap.Logger) {
	if err := lock.Release(); err != nil {
		log.Warn("release the state dir's lock", zap.Error(err))
	}
}
