package runtime

import (
	"errors"

	"github.com/causeway-stream/causeway/runtime/internal/transport"

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
var ErrStopped = transport.ErrStopped
