package served

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/causeway-stream/causeway/causal"
)

// Errors of Query. A query that fails with ErrNotLocal or ErrNotAvailable
// may succeed later, or on another worker.
var (
	// ErrUnknownStore: no processor of the topology has the store.
	ErrUnknownStore = errors.New("no such store")
	// ErrWrongKind: the query does not suit the store's kind (a get or
	// range on a window store, a windows query on a key-value store).
	ErrWrongKind = errors.New("query does not suit the store")
	// ErrNotLocal: the task that holds the key's partition does not run
	// on this worker.
	ErrNotLocal = errors.New("the task holding this key runs on another worker")
	// ErrNotAvailable: the task runs here but its store cannot be read now
	// (it restores, or it failed).
	ErrNotAvailable = errors.New("the task holding this key cannot be read now")
	// ErrNotCaughtUp: the query's clock names records the store has not
	// taken in (committed) within the query's wait.
	ErrNotCaughtUp = errors.New("the store has not caught up with the query's clock")
	// ErrClockNotCheckable: the query's clock names a record that reaches
	// the store through other processors, and the worker cannot follow it
	// there: those processors form a cycle, or the worker has no admin
	// client to read the group's offsets with.
	ErrClockNotCheckable = errors.New("the clock names a record whose way to this store cannot be followed")
	// ErrClockBeyondEnd: the query's clock claims an offset its channel
	// has not reached, a record that does not exist; waiting for it would
	// wait the query's whole wait.
	ErrClockBeyondEnd = errors.New("the query's clock claims a record that does not exist")
)

// DefaultQueryWait is how long a query with a clock waits for the store to
// catch up when it names no wait of its own.
const DefaultQueryWait = 5 * time.Second

// NotLocalError is a query for a key whose task does not run on this
// worker. It matches ErrNotLocal.
type NotLocalError struct {
	// Task is the task that holds the key.
	Task string
}

func (e *NotLocalError) Error() string { return fmt.Sprintf("%v: %s", ErrNotLocal, e.Task) }

// Unwrap makes the error match ErrNotLocal.
func (e *NotLocalError) Unwrap() error { return ErrNotLocal }

// QueryKind says what a query asks.
type QueryKind string

// The kinds of query.
const (
	// QueryGet reads one key.
	QueryGet QueryKind = "get"
	// QueryRange reads the keys in [From, To) (nil: open) of every
	// partition this worker holds, in key order.
	QueryRange QueryKind = "range"
	// QueryWindows reads one key's windows that start in [Since, Until].
	QueryWindows QueryKind = "windows"
	// QueryVersions reads one key's versions in a versioned store that
	// were valid at some time in [Since, Until], newest first (KIP-968).
	QueryVersions QueryKind = "versions"
)

// Query asks a worker what one of its stores holds.
type Query struct {
	Store string    `json:"store"`
	Kind  QueryKind `json:"kind"`
	// Key is the serialized key of a get or a windows query.
	Key []byte `json:"key,omitempty"`
	// From and To bound a range query; Limit caps its entries (0: 1000).
	From  []byte `json:"from,omitempty"`
	To    []byte `json:"to,omitempty"`
	Limit int    `json:"limit,omitempty"`
	// Since and Until bound the starts of a windows query, and the times
	// of a versions query.
	Since time.Time `json:"since,omitempty"`
	Until time.Time `json:"until,omitempty"`
	// AsOf, for a get on a versioned store, reads the key's version valid
	// at that time rather than its latest (KIP-960).
	AsOf *time.Time `json:"as_of,omitempty"`
	// After, for a get or windows query, is a causal clock (a client
	// session's, say): the answer waits until the store has taken in,
	// and committed, every record the clock names that can reach the
	// key, directly or through the processors before the store, so a
	// client reads its own writes. It waits while the key's task
	// restores, too. Claims on records that cannot reach
	// the store are ignored. Wait bounds the wait (0: DefaultQueryWait);
	// past it the query fails with ErrNotCaughtUp.
	After causal.Clock  `json:"-"`
	Wait  time.Duration `json:"-"`
}

// defaultQueryLimit caps a range query that gives no limit.
const defaultQueryLimit = 1000

// MaxEntries is how many entries a range query may answer: Limit, or
// 1000 when it gives none.
func (q Query) MaxEntries() int {
	if q.Limit <= 0 {
		return defaultQueryLimit
	}
	return q.Limit
}

// QueryEntry is one key of an answer, with the window it belongs to for a
// windows query.
type QueryEntry struct {
	Key   []byte `json:"key"`
	Value []byte `json:"value"`
	// ValueJSON is Value again, when it is a JSON document, to read as
	// such.
	ValueJSON json.RawMessage `json:"value_json,omitempty"`
	// Start is a window's start; Timestamp, in a timestamped window
	// store, the time of its latest record.
	Start *time.Time `json:"start,omitempty"`
	// End is a session's end (a session store's windows).
	End       *time.Time `json:"end,omitempty"`
	Timestamp *time.Time `json:"timestamp,omitempty"`
	// ValidTo is when a version of a versioned store stopped being the
	// key's value (absent for the latest).
	ValidTo   *time.Time `json:"valid_to,omitempty"`
	Partition int32      `json:"partition"`
}

// Answer is what a worker's stores held, as of a commit.
type Answer struct {
	Store string `json:"store"`
	// Partitions lists the partitions the answer read; Complete says
	// whether they are all of the store's (a range query reads those this
	// worker holds).
	Partitions []int32 `json:"partitions"`
	Complete   bool    `json:"complete"`
	// Found and Value answer a get; Timestamp and ValidTo say, on a
	// versioned store, when the version found was put and until when it
	// was the key's value (absent for the latest).
	Found     bool       `json:"found"`
	Value     []byte     `json:"value,omitempty"`
	Timestamp *time.Time `json:"timestamp,omitempty"`
	ValidTo   *time.Time `json:"valid_to,omitempty"`
	// ValueJSON is Value again, when it is a JSON document.
	ValueJSON json.RawMessage `json:"value_json,omitempty"`
	// Since and Until are the window starts a windows query covered.
	Since *time.Time `json:"since,omitempty"`
	Until *time.Time `json:"until,omitempty"`
	// Entries answer a range or windows query.
	Entries []QueryEntry `json:"entries,omitempty"`
	// Truncated: a range query had more than its limit.
	Truncated bool `json:"truncated,omitempty"`
}

// KeepFirst puts a range answer's entries, gathered partition by
// partition, in key order, and keeps the first limit of them.
func (a *Answer) KeepFirst(limit int) {
	slices.SortStableFunc(a.Entries, func(x, y QueryEntry) int { return bytes.Compare(x.Key, y.Key) })
	if len(a.Entries) > limit {
		a.Entries, a.Truncated = a.Entries[:limit], true
	}
}
