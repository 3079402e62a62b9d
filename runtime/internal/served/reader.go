package served

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/store"
	"github.com/causeway-stream/causeway/framework/taskmgr"
)

// Reader answers store queries from the stores of a task manager's tasks,
// as committed: it reads the stores' committed views
// (store.Logged.Committed), so an answer never shows a write an open
// transaction may still take back. It is used on the goroutine that owns
// the tasks.
type Reader struct {
	Topology *framework.Topology
	Tasks    *taskmgr.Manager
}

// CaughtUp reports whether the task holding q's key has committed every
// record q's clock names on its inputs: a record on another partition of
// an input never reaches that task. (Claims on other topics were turned
// into claims on the inputs before the query reached the pump.)
func (r Reader) CaughtUp(q Query) (bool, error) {
	pi, _, ok := StoreOwner(r.Topology, q.Store)
	if !ok {
		return false, fmt.Errorf("%w: %q", ErrUnknownStore, q.Store)
	}
	if q.Kind != QueryGet && q.Kind != QueryWindows {
		return false, fmt.Errorf("a clock goes with a get or a windows query, not %s", q.Kind)
	}
	n := r.Tasks.Partitions(pi.Inputs[0])
	if n <= 0 {
		return false, fmt.Errorf("%w: the partitions of %s are not known yet", ErrNotAvailable, pi.Inputs[0])
	}
	p := framework.PartitionFor(q.Key, n)
	rt, err := r.Task(pi.Name, p)
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

// Answer reads what q asks of the stores of the tasks.
func (r Reader) Answer(q Query) (Answer, error) {
	pi, spec, ok := StoreOwner(r.Topology, q.Store)
	if !ok {
		return Answer{}, fmt.Errorf("%w: %q", ErrUnknownStore, q.Store)
	}
	a := Answer{Store: q.Store}
	n := r.Tasks.Partitions(pi.Inputs[0])
	if n <= 0 {
		return a, fmt.Errorf("%w: the partitions of %s are not known yet", ErrNotAvailable, pi.Inputs[0])
	}
	switch q.Kind {
	case QueryGet, QueryWindows, QueryVersions:
		p := framework.PartitionFor(q.Key, n)
		rt, err := r.Task(pi.Name, p)
		if err != nil {
			return a, err
		}
		a.Partitions, a.Complete = []int32{p}, true
		if q.Kind == QueryGet {
			if spec.Kind == framework.WindowKind {
				return a, fmt.Errorf("%w: store %q is a window store: ask for one key's windows (windows?key=)", ErrWrongKind, q.Store)
			}
			return a, get(rt, spec, q, &a)
		}
		if q.Kind == QueryVersions {
			return a, versions(rt, spec, q, &a, p)
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
		limit := q.MaxEntries()
		a.Complete = true
		for p := range n {
			rt, err := r.Task(pi.Name, p)
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
		a.KeepFirst(limit)
		return a, nil
	}
	return a, fmt.Errorf("unknown query kind %q", q.Kind)
}

func get(rt *taskmgr.Task, spec framework.StoreSpec, q Query, a *Answer) error {
	kv, ok := rt.Task().CommittedStore(q.Store)
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownStore, q.Store)
	}
	if spec.Kind == framework.VersionedKind {
		return getVersion(store.NewVersioned(kv, spec.Retention), q, a)
	}
	if q.AsOf != nil {
		return fmt.Errorf("%w: store %q keeps no history to read as of a time", ErrWrongKind, q.Store)
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
	if spec.Sessions && len(v) >= 8 {
		// A session is kept under its end, its start leading the value.
		end := start
		begin := time.Unix(0, int64(binary.BigEndian.Uint64(v))).UTC()
		e.Start, e.End, v = &begin, &end, v[8:]
	}
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

// StoreOwner finds the processor of topo that declares a store.
func StoreOwner(topo *framework.Topology, name string) (framework.ProcessorInfo, framework.StoreSpec, bool) {
	for _, pi := range topo.Processors() {
		for _, s := range pi.Stores {
			if s.Name == name {
				return pi, s, true
			}
		}
	}
	return framework.ProcessorInfo{}, framework.StoreSpec{}, false
}

// Task returns the task of processor and partition if it runs here and
// can be read.
func (r Reader) Task(processor string, p int32) (*taskmgr.Task, error) {
	id := processor + "/" + strconv.Itoa(int(p))
	rt, ok := r.Tasks.Find(id)
	switch {
	case !ok:
		return nil, &NotLocalError{Task: id}
	case rt.State() == taskmgr.Restoring:
		return nil, fmt.Errorf("%w: %w", ErrNotAvailable, &restoringError{task: id})
	case rt.State() != taskmgr.Running || rt.Task() == nil:
		return nil, fmt.Errorf("%w: %s is %s", ErrNotAvailable, id, rt.State())
	}
	return rt, nil
}

// restoringError is a query for a key whose task restores.
type restoringError struct{ task string }

func (e *restoringError) Error() string { return e.task + " is " + string(taskmgr.Restoring) }

// Restoring reports whether err is a query's for a task that restores: a
// query with a clock waits for it.
func Restoring(err error) bool {
	var re *restoringError
	return errors.As(err, &re)
}

// getVersion answers a get on a versioned store: the key's latest
// version, or the one valid at q.AsOf.
func getVersion(vs store.Versioned, q Query, a *Answer) error {
	var rec store.VersionedRecord
	var found bool
	var err error
	if q.AsOf != nil {
		rec, found, err = vs.GetAsOf(q.Key, *q.AsOf)
	} else {
		rec, found, err = vs.Get(q.Key)
	}
	if err != nil || !found {
		return err
	}
	a.Found, a.Value, a.ValueJSON = true, rec.Value, asJSON(rec.Value)
	a.Timestamp, a.ValidTo = &rec.Timestamp, validTo(rec)
	return nil
}

// versions answers a versions query: one key's versions valid in
// [q.Since, q.Until], newest first.
func versions(rt *taskmgr.Task, spec framework.StoreSpec, q Query, a *Answer, p int32) error {
	if spec.Kind != framework.VersionedKind {
		return fmt.Errorf("%w: store %q is not a versioned store", ErrWrongKind, q.Store)
	}
	kv, ok := rt.Task().CommittedStore(q.Store)
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownStore, q.Store)
	}
	since, until := q.Since, q.Until
	a.Since, a.Until = &since, &until
	for rec, err := range store.NewVersioned(kv, spec.Retention).History(q.Key, q.Since, q.Until) {
		if err != nil {
			return err
		}
		ts := rec.Timestamp
		a.Entries = append(a.Entries, QueryEntry{Key: slices.Clone(q.Key), Value: rec.Value, ValueJSON: asJSON(rec.Value),
			Timestamp: &ts, ValidTo: validTo(rec), Partition: p})
	}
	return nil
}

// validTo is a version's end, nil for the latest.
func validTo(rec store.VersionedRecord) *time.Time {
	if rec.ValidTo.IsZero() {
		return nil
	}
	t := rec.ValidTo
	return &t
}
