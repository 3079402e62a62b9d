package runtime

import (
	"errors"

	"github.com/causeway-stream/causeway/internal/taskmgr"
)

// ErrNoTask is returned by RestartTask and SkipRecord for a task this
// worker does not run.
var ErrNoTask = taskmgr.ErrNoTask

// ErrNotFailed is returned by RestartTask for a task that is not failed:
// there is nothing to restart, and nothing is rebuilt.
var ErrNotFailed = taskmgr.ErrNotFailed

// ErrNoRecord is returned by SkipRecord for a task whose failure names no
// input record to move past (an offset out of range, a failed restore):
// restart it instead, once the cause is fixed.
var ErrNoRecord = taskmgr.ErrNoRecord

// UnsatisfiableClaimError is the failure of a task that received a record
// claiming an offset that does not exist: beyond the end of a partition the
// consumer has read to the end, or on a topic that does not exist. Record
// is the record that carries the claim.
type UnsatisfiableClaimError = taskmgr.UnsatisfiableClaimError

// ErrLegacyState is returned by Start when the application's state is in
// the single changelog topic of an earlier Causeway.
var ErrLegacyState = errors.New("application state in an earlier layout")

// ErrStopped is returned by calls on a worker that has stopped.
var ErrStopped = errors.New("worker stopped")

// errorClass says what the worker does about a Kafka error; docs/operations.md
// has the same table for operators.
type errorClass int

const (
	// classRetriable: try the same call again, with backoff.
	classRetriable errorClass = iota + 1
	// classAbortable: abort the transaction and rebuild the tasks that had
	// effects in it from committed state.
	classAbortable
	// classRecord: the error belongs to one record and will happen again
	// every time that record is sent (too large, invalid, a topic that does
	// not exist or may not be written). The emitting processor's production
	// error policy decides.
	classRecord
	// classFatal: the worker cannot go on (fenced by a newer instance,
	// authentication refused); it stops, and its supervisor restarts it.
	classFatal
)

func (c errorClass) String() string {
	switch c {
	case classRetriable:
		return "retriable"
	case classAbortable:
		return "abortable"
	case classRecord:
		return "permanent for one record"
	case classFatal:
		return "fatal"
	}
	return "unknown"
}
