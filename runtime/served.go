package runtime

import "github.com/causeway-stream/causeway/runtime/internal/served"

// What a worker serves, under its public names: the types live in
// runtime/internal/served, which the HTTP server shares.

// Status is what /status reports: the worker and each of its tasks.
type Status = served.Status

// TaskStatus describes one task.
type TaskStatus = served.TaskStatus

// RestartStatus is a task's restarts by the restart policy.
type RestartStatus = served.RestartStatus

// StandbyStatus is one copy of another worker's task's state, in Status.
type StandbyStatus = served.StandbyStatus

// ChannelStatus describes one input channel of a task.
type ChannelStatus = served.ChannelStatus

// RestoreStatus is the progress of one task's restore.
type RestoreStatus = served.RestoreStatus

// Query asks a worker what one of its stores holds.
type Query = served.Query

// QueryKind says what a query asks.
type QueryKind = served.QueryKind

// QueryEntry is one key of an answer, with the window it belongs to for a
// windows query.
type QueryEntry = served.QueryEntry

// Answer is what a worker's stores held, as of a commit.
type Answer = served.Answer

// NotLocalError is a query for a key whose task does not run on this
// worker. It matches ErrNotLocal.
type NotLocalError = served.NotLocalError

// The kinds of query.
const (
	// QueryGet reads one key.
	QueryGet = served.QueryGet
	// QueryRange reads the keys in [From, To) (nil: open) of every
	// partition this worker holds, in key order.
	QueryRange = served.QueryRange
	// QueryWindows reads one key's windows that start in [Since, Until].
	QueryWindows = served.QueryWindows
)

// DefaultQueryWait is how long a query with a clock waits for the store to
// catch up when it names no wait of its own.
const DefaultQueryWait = served.DefaultQueryWait

// Errors of Query. A query that fails with ErrNotLocal or ErrNotAvailable
// may succeed later, or on another worker.
var (
	// ErrUnknownStore: no processor of the topology has the store.
	ErrUnknownStore = served.ErrUnknownStore
	// ErrWrongKind: the query does not suit the store's kind.
	ErrWrongKind = served.ErrWrongKind
	// ErrNotLocal: the task that holds the key's partition does not run
	// on this worker.
	ErrNotLocal = served.ErrNotLocal
	// ErrNotAvailable: the task runs here but its store cannot be read now
	// (it restores, or it failed).
	ErrNotAvailable = served.ErrNotAvailable
	// ErrNotCaughtUp: the query's clock names records the store has not
	// taken in (committed) within the query's wait.
	ErrNotCaughtUp = served.ErrNotCaughtUp
	// ErrClockNotCheckable: the query's clock names a record whose way to
	// the store cannot be followed.
	ErrClockNotCheckable = served.ErrClockNotCheckable
	// ErrClockBeyondEnd: the query's clock claims an offset its channel
	// has not reached.
	ErrClockBeyondEnd = served.ErrClockBeyondEnd
)
