package runtime

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/internal/taskmgr"
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
	// Since and Until bound the starts of a windows query.
	Since time.Time `json:"since,omitempty"`
	Until time.Time `json:"until,omitempty"`
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

// limit is how many entries a range query may answer.
func (q Query) limit() int {
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
	Start     *time.Time `json:"start,omitempty"`
	Timestamp *time.Time `json:"timestamp,omitempty"`
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
	// Found and Value answer a get.
	Found bool   `json:"found"`
	Value []byte `json:"value,omitempty"`
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

// keepFirst puts a range answer's entries, gathered partition by
// partition, in key order, and keeps the first limit of them.
func (a *Answer) keepFirst(limit int) {
	slices.SortStableFunc(a.Entries, func(x, y QueryEntry) int { return bytes.Compare(x.Key, y.Key) })
	if len(a.Entries) > limit {
		a.Entries, a.Truncated = a.Entries[:limit], true
	}
}

// queryRequest is a query on its way to the pump.
type queryRequest struct {
	q     Query
	reply chan queryReply
	// until is when a query with a clock stops waiting.
	until time.Time
}

type queryReply struct {
	a   Answer
	err error
}

// Query answers q from this worker's stores as committed: the pump reads
// the stores' committed views (store.Logged.Committed), so an answer never
// shows a write an open transaction may still take back. A query with a
// clock waits, at the pump, for the commit that catches the store up. It
// returns ErrUnknownStore, ErrNotLocal, ErrNotAvailable, ErrNotCaughtUp,
// ErrClockNotCheckable, ErrStopped, or ctx's error.
func (w *StreamThread) Query(ctx context.Context, q Query) (Answer, error) {
	req := queryRequest{q: q, reply: make(chan queryReply, 1)}
	if !q.After.IsEmpty() {
		wait := q.Wait
		if wait <= 0 {
			wait = DefaultQueryWait
		}
		req.until = time.Now().Add(wait)
		// Claims on records that reach the store through other processors
		// become claims on its own inputs (upstream.go).
		after, err := w.throughUpstream(ctx, q, req.until)
		if err != nil {
			return Answer{}, err
		}
		req.q.After = after
	}
	select {
	case w.queries <- req:
	case <-ctx.Done():
		return Answer{}, ctx.Err()
	case <-w.done:
		return Answer{}, ErrStopped
	}
	select {
	case r := <-req.reply:
		return r.a, r.err
	case <-ctx.Done():
		return Answer{}, ctx.Err()
	case <-w.done:
		return Answer{}, ErrStopped
	}
}

// takeQueries answers the queries that arrived, and keeps those that
// wait for a commit.
func (w *StreamThread) takeQueries() {
	for {
		select {
		case req := <-w.queries:
			w.takeQuery(req)
		default:
			return
		}
	}
}

// takeQuery answers req now, unless its clock makes it wait for a commit.
func (w *StreamThread) takeQuery(req queryRequest) {
	if w.settle(req) {
		w.pendingQueries = append(w.pendingQueries, req)
	}
}

// answerQueries answers the queries waiting for a commit that caught
// their store up with their clock, or fails those whose wait is over: the
// pump calls it after every commit and abort.
func (w *StreamThread) answerQueries() {
	w.takeQueries()
	waiting := w.pendingQueries[:0]
	for _, req := range w.pendingQueries {
		if w.settle(req) {
			waiting = append(waiting, req)
		}
	}
	clear(w.pendingQueries[len(waiting):])
	w.pendingQueries = waiting
}

// settle answers req, or reports that it waits for a commit: its clock
// names records the store has not taken in yet, or its task restores, and
// its wait is not over.
func (w *StreamThread) settle(req queryRequest) (waits bool) {
	if !req.q.After.IsEmpty() {
		caught, err := w.caughtUp(req.q)
		behind := (err == nil && !caught) || restoring(err)
		switch {
		case behind && time.Now().Before(req.until):
			return true // asked again at the next commit
		case err != nil:
			req.reply <- queryReply{err: err}
			return false
		case !caught:
			req.reply <- queryReply{err: fmt.Errorf("%w: waited until %s", ErrNotCaughtUp, req.until.Format(time.RFC3339Nano))}
			return false
		}
	}
	a, err := w.answer(req.q)
	req.reply <- queryReply{a: a, err: err}
	return false
}

// caughtUp reports whether the task holding q's key has committed every
// record q's clock names on its inputs: a record on another partition of
// an input never reaches that task. (Claims on other topics were turned
// into claims on the inputs before the query reached the pump.)
func (w *StreamThread) caughtUp(q Query) (bool, error) {
	pi, _, ok := w.storeOwner(q.Store)
	if !ok {
		return false, fmt.Errorf("%w: %q", ErrUnknownStore, q.Store)
	}
	if q.Kind != QueryGet && q.Kind != QueryWindows {
		return false, fmt.Errorf("a clock goes with a get or a windows query, not %s", q.Kind)
	}
	n := w.tasks.Partitions(pi.Inputs[0])
	if n <= 0 {
		return false, fmt.Errorf("%w: the partitions of %s are not known yet", ErrNotAvailable, pi.Inputs[0])
	}
	p := framework.PartitionFor(q.Key, n)
	rt, err := w.queryTask(pi.Name, p)
	if err != nil {
		return false, err
	}
	for ch, off := range q.After.All() {
		if ch.Partition != p || !slices.Contains(pi.Inputs, ch.Topic) {
			continue // never reaches this task (throughUpstream left only the store's inputs)
		}
		if rt.Committed()[ch.Topic] <= off {
			return false, nil
		}
	}
	return true, nil
}

// refuseQueries answers every query that arrived or waits with err.
func (w *StreamThread) refuseQueries(err error) {
	for {
		select {
		case req := <-w.queries:
			req.reply <- queryReply{err: err}
			continue
		default:
		}
		break
	}
	for _, req := range w.pendingQueries {
		req.reply <- queryReply{err: err}
	}
	w.pendingQueries = nil
}

// answer reads what q asks of the stores of the tasks this worker runs.
func (w *StreamThread) answer(q Query) (Answer, error) {
	pi, spec, ok := w.storeOwner(q.Store)
	if !ok {
		return Answer{}, fmt.Errorf("%w: %q", ErrUnknownStore, q.Store)
	}
	a := Answer{Store: q.Store}
	n := w.tasks.Partitions(pi.Inputs[0])
	if n <= 0 {
		return a, fmt.Errorf("%w: the partitions of %s are not known yet", ErrNotAvailable, pi.Inputs[0])
	}
	switch q.Kind {
	case QueryGet, QueryWindows:
		p := framework.PartitionFor(q.Key, n)
		rt, err := w.queryTask(pi.Name, p)
		if err != nil {
			return a, err
		}
		a.Partitions, a.Complete = []int32{p}, true
		if q.Kind == QueryGet {
			if spec.Kind == framework.WindowKind {
				return a, fmt.Errorf("%w: store %q is a window store: ask for one key's windows (windows?key=)", ErrWrongKind, q.Store)
			}
			return a, w.get(rt, q, &a)
		}
		if spec.Kind != framework.WindowKind {
			return a, fmt.Errorf("%w: store %q is not a window store", ErrWrongKind, q.Store)
		}
		since, until := q.Since, q.Until
		a.Since, a.Until = &since, &until
		ws, _ := rt.Task().CommittedWindowStore(q.Store)
		for start, v := range ws.Fetch(q.Key, q.Since, q.Until) {
			a.Entries = append(a.Entries, windowEntry(spec, q.Key, start, v, p))
		}
		return a, nil
	case QueryRange:
		if spec.Kind != framework.KeyValueKind {
			return a, fmt.Errorf("%w: store %q is not a key-value store: ask for one key's windows (windows?key=)", ErrWrongKind, q.Store)
		}
		limit := q.limit()
		a.Complete = true
		for p := range n {
			rt, err := w.queryTask(pi.Name, p)
			if err != nil {
				a.Complete = false
				continue
			}
			a.Partitions = append(a.Partitions, p)
			kv, _ := rt.Task().CommittedStore(q.Store)
			read := 0
			for k, v := range kv.Range(q.From, q.To) {
				if read == limit {
					a.Truncated = true
					break
				}
				a.Entries = append(a.Entries, QueryEntry{Key: slices.Clone(k), Value: slices.Clone(v), Partition: p})
				read++
			}
		}
		a.keepFirst(limit)
		return a, nil
	}
	return a, fmt.Errorf("unknown query kind %q", q.Kind)
}

func (w *StreamThread) get(rt *taskmgr.Task, q Query, a *Answer) error {
	kv, ok := rt.Task().CommittedStore(q.Store)
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownStore, q.Store)
	}
	v, found, err := kv.Get(q.Key)
	if err != nil {
		return err
	}
	a.Found, a.Value, a.ValueJSON = found, slices.Clone(v), asJSON(v)
	return nil
}

// windowEntry is one window of a windows answer: its value split from
// its latest record's time in a timestamped store.
func windowEntry(spec framework.StoreSpec, key []byte, start time.Time, v []byte, p int32) QueryEntry {
	e := QueryEntry{Key: slices.Clone(key), Start: &start, Partition: p}
	if spec.Timestamped && len(v) >= 8 {
		ts := time.Unix(0, int64(binary.BigEndian.Uint64(v))).UTC()
		e.Timestamp, v = &ts, v[8:]
	}
	e.Value, e.ValueJSON = slices.Clone(v), asJSON(v)
	return e
}

// asJSON is v when it is a JSON object or array, for answers to show as
// JSON; nil otherwise (a number or string alone is more likely text or a
// counter that happens to parse).
func asJSON(v []byte) json.RawMessage {
	t := bytes.TrimSpace(v)
	if len(t) == 0 || (t[0] != '{' && t[0] != '[') || !json.Valid(t) {
		return nil
	}
	return slices.Clone(t)
}

// storeOwner finds the processor that declares a store.
func (w *StreamThread) storeOwner(name string) (framework.ProcessorInfo, framework.StoreSpec, bool) {
	for _, pi := range w.topo.Processors() {
		for _, s := range pi.Stores {
			if s.Name == name {
				return pi, s, true
			}
		}
	}
	return framework.ProcessorInfo{}, framework.StoreSpec{}, false
}

// queryTask returns the task of processor and partition if it runs here
// and can be read.
func (w *StreamThread) queryTask(processor string, p int32) (*taskmgr.Task, error) {
	id := processor + "/" + strconv.Itoa(int(p))
	rt, ok := w.tasks.Find(id)
	switch {
	case !ok:
		return nil, &NotLocalError{Task: id}
	case rt.State() == StateRestoring:
		return nil, fmt.Errorf("%w: %w", ErrNotAvailable, &restoringError{task: id})
	case rt.State() != StateRunning || rt.Task() == nil:
		return nil, fmt.Errorf("%w: %s is %s", ErrNotAvailable, id, rt.State())
	}
	return rt, nil
}

// restoringError is a query for a key whose task restores.
type restoringError struct{ task string }

func (e *restoringError) Error() string { return e.task + " is " + string(StateRestoring) }

// restoring reports whether err is a query's for a task that restores: a
// query with a clock waits for it.
func restoring(err error) bool {
	var re *restoringError
	return errors.As(err, &re)
}
