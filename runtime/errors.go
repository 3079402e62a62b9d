package runtime

import (
	"errors"
	"fmt"

	"github.com/causeway-stream/causeway/framework/taskmgr"
	"github.com/causeway-stream/causeway/runtime/internal/reach"
	"github.com/causeway-stream/causeway/runtime/internal/transport"
)

// ErrKafkaUnreachable is returned by Start when the cluster did not answer
// within Config.ConnectTimeout, or refused the worker for good (its
// credentials, or a broker certificate that does not verify); the error
// names the bootstrap servers and the last cause.
var ErrKafkaUnreachable = reach.ErrUnreachable

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

// StateRefusedError is the failure of a task whose state Kafka refused for
// good: a store change (or its checkpoint) too large for its changelog
// topic, or one the broker finds invalid. Retrying cannot help, so the
// task fails rather than the transaction aborting again and again; a
// restart after the topic's limit is raised (max.message.bytes) writes
// it. What names the store.
type StateRefusedError struct {
	Task string
	What string
	// Size is the change's key and value, in bytes.
	Size int
	Err  error
}

// Error implements error.
func (e *StateRefusedError) Error() string {
	return fmt.Sprintf("task %s: Kafka refused a write of %s (%d bytes of key and value) to its changelog for good: %v; "+
		"raise the changelog topic's max.message.bytes (and the producer's message.max.bytes), or write smaller values", e.Task, e.What, e.Size, e.Err)
}

// Unwrap returns Kafka's error.
func (e *StateRefusedError) Unwrap() error { return e.Err }
