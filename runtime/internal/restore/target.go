package restore

import (
	"fmt"
	"sync/atomic"

	"github.com/causeway-stream/causeway/framework/store"
	"github.com/causeway-stream/causeway/framework/taskmgr"
	"github.com/prometheus/client_golang/prometheus"
)

// storeTarget is where one store changelog partition restores to.
// Each target applies its changes on a goroutine of its own, batch by
// batch, so that stores fill in parallel while the reader decodes.
//
//causeway:owned
type storeTarget struct {
	t *taskmgr.Task
	// id is t's id, and name the store's.
	id   string
	name string
	kv   store.Logged
	buf  []store.Change
	// applied counts the records applied, for the task's metric.
	applied prometheus.Counter
	batches chan []store.Change
	// free brings applied batches back for the reader to fill again.
	free chan []store.Change
	done chan error
	// records and bytes count what the applier applied.
	records, bytes atomic.Int64
}

// start starts the target's applier.
func (s *storeTarget) start() {
	s.batches, s.free, s.done = make(chan []store.Change, 4), make(chan []store.Change, 6), make(chan error, 1)
	go func() {
		var err error
		for b := range s.batches {
			if err == nil {
				err = s.kv.Restore(b)
				s.applied.Add(float64(len(b)))
				n := 0
				for _, c := range b {
					n += len(c.Key) + len(c.Value)
				}
				s.records.Add(int64(len(b)))
				s.bytes.Add(int64(n))
			}
			// The batch goes back to be filled again, so that a restore
			// allocates a few batches, not one per restoreBatch changes.
			clear(b)
			select {
			case s.free <- b[:0]:
			default:
			}
		}
		s.done <- err
	}()
}

// add gathers one change, and hands a full batch to the applier.
func (s *storeTarget) add(key, value []byte) {
	s.buf = append(s.buf, store.Change{Key: key, Value: value})
	if len(s.buf) >= restoreBatch {
		s.flush()
	}
}

// flush hands what the target has gathered to its applier.
func (s *storeTarget) flush() {
	if len(s.buf) == 0 {
		return
	}
	s.batches <- s.buf
	select {
	case s.buf = <-s.free:
	default:
		s.buf = make([]store.Change, 0, restoreBatch)
	}
}

// finish applies what is left, stops the applier, and returns its error.
func (s *storeTarget) finish() error {
	s.flush()
	close(s.batches)
	if err := <-s.done; err != nil {
		return fmt.Errorf("restore %s of %s: %w", s.name, s.t.ID(), err)
	}
	return nil
}
