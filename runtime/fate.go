package runtime

import "errors"

// fate is what a stream thread's pump has learned it must do beyond its
// next step. Only the pump goroutine touches it, and only through these
// methods; the rest of the pump reads its fields.
//
//causeway:owned
type fate struct {
	// fatal, once set, stops the thread: the pump hands over nothing
	// more, closes its clients and reports it (Err).
	fatal error
	// abort is set when a task failed mid-processing after streaming
	// outputs into the open transaction: those outputs cannot be committed
	// without the offsets the failed task no longer has, so the
	// transaction is aborted instead of committed.
	abort bool
}

// stop records a fatal error; the thread stops.
func (f *fate) stop(err error) { f.fatal = err }

// onlyStopped reports whether the fatal error is only that the thread was
// stopped (stop is closed) while the pump waited (ErrStopped).
func (f *fate) onlyStopped(stop <-chan struct{}) bool {
	if f.fatal == nil || !errors.Is(f.fatal, ErrStopped) {
		return false
	}
	select {
	case <-stop:
		return true
	default:
		return false
	}
}

// mustAbort records that the open transaction must abort.
func (f *fate) mustAbort() { f.abort = true }

// aborted records that the transaction was aborted.
func (f *fate) aborted() { f.abort = false }
