// Package taskmgr is the task manager the worker and the in-memory test
// driver share: which tasks exist, building them from committed state,
// failing and rebuilding them one by one, the channel routes records are
// dispatched by (and the rewinding of channels when some tasks are
// rebuilt), and the offsets a commit may send. It does no I/O of its own:
// what it needs from Kafka (or from the driver's in-memory log) it asks
// through Offsets and Config.Restore, and the caller polls, produces and
// commits.
//
// A Manager is not safe for concurrent use; the worker's pump goroutine,
// or the driver's caller, owns it.
package taskmgr

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/store"
	"github.com/causeway-stream/causeway/framework/task"
)

// State is where a task is in its life.
type State string

// Task states.
const (
	// Restoring: the task is being built from committed state.
	Restoring State = "RESTORING"
	// Running: the task receives and processes records.
	Running State = "RUNNING"
	// Failed: the task stopped on an error; its offsets stay at its last
	// commit until it is restarted or moved past the record.
	Failed State = "FAILED"
)

// Sentinel errors of Request.
var (
	// ErrNoTask: the manager has no task of that id.
	ErrNoTask = errors.New("no such task on this worker")
	// ErrNotFailed: the task is not failed, so there is nothing to restart
	// or skip; nothing is rebuilt.
	ErrNotFailed = errors.New("task is not failed")
	// ErrNoRecord: the task's failure names no input record to skip.
	ErrNoRecord = errors.New("the task's failure names no record to skip")
)

// Task is one task and what the manager knows of it besides the task
// itself. Its fields are the manager's: the pump reads them through the
// methods below, and changes the little that is its own bookkeeping (the
// list of tasks to stream from, outputs streamed, how long a channel has
// waited, records skipped, the stores' set after a wipe) through the
// methods named for it, never by assignment.
//
//causeway:owned
type Task struct {
	id        string
	processor string
	partition int32
	inputs    []string
	// task is the task; nil for a failed task whose state was let go.
	task  *task.Task
	state State
	// err is the failure of a failed task.
	err error
	// streamed counts outputs produced into the open transaction.
	streamed int
	// inTxn is set when the open transaction holds effects of the task:
	// outputs it streamed, or a snapshot taken for the commit under way.
	// An abort rebuilds exactly these tasks.
	inTxn bool
	// touched is set while the task is on the pump's list of tasks to
	// stream outputs from.
	touched bool
	// committed is the next offset per input topic as last committed (or
	// seeded): what the task resumes from.
	committed map[string]int64
	// blocked is, per input channel whose head waits at the gate, since
	// when it has waited on what.
	blocked map[causal.Channel]Blocked
	// skips lists the records an operator moved the task past; every
	// build of the task dead-letters them instead of processing them.
	skips []task.Skip
	// stores holds the task's stores, at their committed state whenever
	// no transaction is open. It outlives the task instances built on it,
	// so a rebuild after an abort or a restart reads nothing back; nil
	// until the first build, and after a failure that leaves it in doubt.
	stores store.Set
	// last is the task's committed checkpoint, matching stores: where a
	// rebuild on the same stores resumes. Nil when stores is.
	last *Restored
	// observer logs and counts the events of the task instance last
	// built; its counts of dropped records wait for the commit.
	observer *taskObserver
}

// Blocked is how long a channel's head has waited at the gate, and for
// what.
type Blocked struct {
	Head    int64 // offset of the waiting record
	On      causal.Channel
	Off     int64
	Since   time.Time
	Checked time.Time // when the claim was last checked against the cluster
}

// Offsets is what the manager asks of the log: the group's committed
// offsets and a partition's bounds, to decide where a task resumes, and
// the end of a channel a record claims, to check the claims that enter the
// topology (Config.CheckClaims).
type Offsets interface {
	// Committed returns the group's next offset of each channel that has
	// one.
	Committed(chs []causal.Channel) (map[causal.Channel]int64, error)
	// Watermarks returns the first offset of ch and the offset after its
	// last record.
	Watermarks(ch causal.Channel) (low, high int64, err error)
	// ClaimEnd returns the end of a claimed channel (the offset after its
	// last record), at least what it was when the claimed record was
	// written if that record exists, or -1 when the channel's topic does
	// not exist. An answer known to cover the claim may come from a cache.
	ClaimEnd(claim causal.Entry) (int64, error)
}

// Restored is what the changelog holds for one task: its stores' changes
// and its last checkpoint (nil when none was found), the task package's
// Committed under the name the manager's owner knows it by.
type Restored = task.Committed

// Config is what a Manager is built from. It holds values and the log the
// manager asks (Offsets); the manager calls nothing else of its owner's.
// What changes as the owner runs comes in through calls: the time
// (SetNow), the stores a restore fills (Opened, Finish), what a commit
// wrote (Transaction).
type Config struct {
	// Topology is the application's topology. Required.
	Topology *framework.Topology
	// Partitions is the partition count of every topic the topology uses.
	// Required.
	Partitions map[string]int32
	// Offsets tells where tasks resume, and where claimed channels end.
	// Required.
	Offsets Offsets
	// DeadLetterTopic is where the tasks' dead letters go. Default: the
	// topology's dead-letter topic.
	DeadLetterTopic string
	// GateOff delivers records in arrival order, ignoring clocks.
	GateOff bool
	// CheckClaims has the tasks hand back claims beyond what they know of
	// a channel's end (see task.Config.CheckClaims), which Deliver checks
	// against Offsets.ClaimEnd.
	CheckClaims bool
	// MaxRecordBytes bounds store writes and dead letters (task.Config's).
	// Default 0: no bound.
	MaxRecordBytes int
	// AutoOffsetReset is where a channel with no committed position
	// starts: "earliest" (default) or "latest".
	AutoOffsetReset string
	// AllowOffsetReset lets a committed position outside the log reset to
	// its nearest end instead of failing the task.
	AllowOffsetReset bool
	// Log hears task failures, resets and dropped records. Default: none.
	Log *zap.Logger
	// Metrics counts the tasks' records. Default: counters nobody reads.
	Metrics *Metrics
	// Observer hears every task's events besides the manager's own logs
	// and metrics. Default: none.
	Observer task.Observer
	// Globals is the worker's copy of the topology's global tables.
	// Required when the topology has any.
	Globals *Globals
}

// Manager owns a set of tasks. Build it with New.
//
//causeway:owned
type Manager struct {
	cfg       Config
	tasks     []*Task
	routes    map[causal.Channel]*Route
	recordsIn map[string]prometheus.Counter
	// now is the tasks' clock, as the owner last set it.
	now time.Time
}

// New checks cfg, fills in its defaults, and returns a manager with no
// tasks.
func New(cfg Config) (*Manager, error) {
	switch {
	case cfg.Topology == nil:
		return nil, errors.New("taskmgr: no topology")
	case cfg.Partitions == nil:
		return nil, errors.New("taskmgr: no partition counts")
	case cfg.Offsets == nil:
		return nil, errors.New("taskmgr: no offsets")
	case len(cfg.Topology.GlobalTables()) > 0 && cfg.Globals == nil:
		return nil, errors.New("taskmgr: the topology reads global tables and Globals is not set")
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = unregisteredMetrics()
	}
	return &Manager{cfg: cfg, routes: map[causal.Channel]*Route{}, recordsIn: map[string]prometheus.Counter{}}, nil
}

// SetNow sets the time the tasks see (wall-clock punctuation, how long a
// record waited): the owner's clock, read once where it polls, not by
// every task.
func (m *Manager) SetNow(now time.Time) { m.now = now }

// Now is the tasks' time, as last set.
func (m *Manager) Now() time.Time { return m.now }

// Tasks returns the manager's tasks, in the order they were created. The
// slice is the manager's own: do not change it.
func (m *Manager) Tasks() []*Task { return m.tasks }

// Create adds a task, Restoring, for every (processor, partition index)
// whose input channels chs holds completely and that the manager has not
// got yet, and returns them. Build them next. A worker whose group hands
// out partitions incrementally calls it with each addition.
func (m *Manager) Create(chs []causal.Channel) []*Task {
	have := map[causal.Channel]bool{}
	for _, ch := range chs {
		have[ch] = true
	}
	exists := map[string]bool{}
	for _, t := range m.tasks {
		exists[t.id] = true
	}
	var created []*Task
	for _, pi := range m.cfg.Topology.Processors() {
		for p := range m.cfg.Partitions[pi.Inputs[0]] {
			complete := true
			for _, in := range pi.Inputs {
				complete = complete && have[causal.Channel{Topic: in, Partition: p}]
			}
			if !complete || exists[task.ID(pi.Name, p)] {
				continue
			}
			t := &Task{id: task.ID(pi.Name, p), processor: pi.Name, partition: p, inputs: pi.Inputs,
				state: Restoring, committed: map[string]int64{}, blocked: map[causal.Channel]Blocked{}}
			created = append(created, t)
			m.tasks = append(m.tasks, t)
		}
	}
	return created
}

// Detached returns a task of processor's partition p that the manager does
// not run and does not list: the owner keeps a copy of its state up to date
// (a standby), giving it stores with Opened and closing them with
// DropStores. It is never built.
func (m *Manager) Detached(processor string, p int32) *Task {
	pi, _ := m.cfg.Topology.Processor(processor)
	return &Task{id: task.ID(processor, p), processor: processor, partition: p, inputs: pi.Inputs,
		state: Restoring, committed: map[string]int64{}, blocked: map[causal.Channel]Blocked{}}
}

// Find returns the task named id.
func (m *Manager) Find(id string) (*Task, bool) {
	for _, t := range m.tasks {
		if t.id == id {
			return t, true
		}
	}
	return nil, false
}

// Build builds the given tasks from their committed state, seeds and
// starts them, and indexes them by channel. A task whose stores are open
// (it was built before, and its stores hold their committed state) is
// built on them, from its last committed checkpoint, without reading
// anything back; the others are built on new stores in memory from what
// restored holds for them by task id (nothing: they start empty). Each
// task it builds replaces its previous instance; no other task is touched.
// A task that cannot be built fails on its own; the error returned is one
// that stops the owner (the offsets could not be read).
//
// Build is Prepare and Finish in one call, for an owner that has the
// committed state at hand (the test driver); one that restores from a log
// while its other tasks run calls those itself.
func (m *Manager) Build(ts []*Task, restored map[string]*Restored) error {
	cold, err := m.Prepare(ts)
	if err != nil || len(cold) == 0 {
		return err
	}
	return m.Finish(cold, restored)
}

// Prepare starts building the given tasks: it lets their instances go,
// builds at once (as Build does) those whose stores hold their committed
// state, and returns the others, still Restoring and without stores, for
// the owner to give stores (Opened), restore, and hand to Finish.
// Meanwhile a restoring task receives nothing and commits nothing, and the
// offsets the group may commit for its channels stay where they are: its
// Committed offsets are seeded from the group's (or where the reset policy
// starts) when it has none yet. Until Finish, the stores of the tasks
// returned belong to whoever restores them: the manager does not touch
// them, and neither may its owner.
func (m *Manager) Prepare(ts []*Task) (cold []*Task, err error) {
	var warm []*Task
	for _, t := range ts {
		m.CloseTask(t)
		t.restoring()
		if t.stores != nil && t.last != nil {
			if err := t.stores.Abort(); err == nil {
				warm = append(warm, t)
				continue
			}
		}
		m.closeStores(t)
		cold = append(cold, t)
	}
	group, err := m.groupOffsets(ts)
	if err != nil {
		return nil, err
	}
	for _, t := range cold {
		m.seedProvisional(t, group)
	}
	m.buildAll(warm, group)
	m.index()
	return cold, nil
}

// Opened gives t, a task Prepare returned, the stores its restore fills.
// Finish gives one without any new stores in memory.
func (m *Manager) Opened(t *Task, set store.Set) {
	m.closeStores(t)
	t.opened(set)
}

// Finish builds the tasks Prepare returned, whose restore is over:
// restored holds, by task id, what their changelogs held (see
// Config.Restore). A task that failed or went away meanwhile is not
// built; its stores are closed. The owner then rewinds their channels
// (Rewind).
func (m *Manager) Finish(cold []*Task, restored map[string]*Restored) error {
	var build []*Task
	for _, t := range cold {
		if o, ok := m.Find(t.id); !ok || o != t || t.state != Restoring {
			m.closeStores(t)
			continue
		}
		r := restored[t.id]
		if r == nil {
			r = &Restored{}
		}
		if t.stores == nil {
			t.opened(store.NewMemorySet())
		}
		if err := m.fill(t, r); err != nil {
			m.closeStores(t)
			m.Fail(t, fmt.Errorf("restore: %w", err))
			continue
		}
		build = append(build, t)
	}
	group, err := m.groupOffsets(build)
	if err != nil {
		return err
	}
	m.buildAll(build, group)
	m.index()
	return nil
}

// groupOffsets reads the group's committed offsets of the tasks' inputs.
func (m *Manager) groupOffsets(ts []*Task) (map[causal.Channel]int64, error) {
	var chs []causal.Channel
	for _, t := range ts {
		for _, in := range t.inputs {
			chs = append(chs, causal.Channel{Topic: in, Partition: t.partition})
		}
	}
	if len(chs) == 0 {
		return nil, nil
	}
	group, err := m.cfg.Offsets.Committed(chs)
	if err != nil {
		return nil, fmt.Errorf("read committed offsets: %w", err)
	}
	return group, nil
}

// seedProvisional gives a restoring task that has no committed offsets yet
// the ones it would resume from without a checkpoint, which are never past
// those of its checkpoint: counted in GroupOffsets, they keep the other
// readers of its channels from committing past what it has not read.
func (m *Manager) seedProvisional(t *Task, group map[causal.Channel]int64) {
	for _, in := range t.inputs {
		if _, ok := t.committed[in]; ok {
			continue
		}
		ch := causal.Channel{Topic: in, Partition: t.partition}
		next, err := m.startOffset(ch, nil, group)
		if err != nil {
			// Out of range, and no reset allowed: the build decides; until
			// then, hold the group's offset.
			next = group[ch]
		}
		t.committedAt(in, next)
	}
}

// buildAll builds each of ts, failing on its own one that cannot be built.
func (m *Manager) buildAll(ts []*Task, group map[causal.Channel]int64) {
	for _, t := range ts {
		if t.state == Failed {
			continue
		}
		if err := m.buildOne(t, group); err != nil {
			m.CloseTask(t)
			m.closeStores(t)
			m.Fail(t, err)
		}
	}
}

// fill applies the store changes r carries, if any, and keeps r's
// checkpoint as t's last.
func (m *Manager) fill(t *Task, r *Restored) error {
	for name, changes := range r.Stores {
		kv, err := t.stores.Store(name)
		if err != nil {
			return err
		}
		if err := kv.Restore(changes); err != nil {
			return fmt.Errorf("store %q: %w", name, err)
		}
	}
	t.matched(&Restored{Checkpoint: r.Checkpoint})
	return nil
}

// DropStores closes t's stores and forgets them, as a crash would: the
// next Build of t restores them.
func (m *Manager) DropStores(t *Task) { m.closeStores(t) }

// closeStores closes t's stores, if open, and forgets them with the
// checkpoint they matched.
func (m *Manager) closeStores(t *Task) {
	if t.stores != nil {
		if err := t.stores.Close(); err != nil {
			m.cfg.Log.Warn("close stores", zap.String("task", t.id), zap.Error(err))
		}
	}
	t.storesClosed()
}

func (m *Manager) buildOne(t *Task, group map[causal.Channel]int64) error {
	t.building()
	r := t.last
	if err := m.seedOffsets(t, r, group); err != nil {
		return err
	}
	cp := task.Checkpoint{Next: t.committed}
	if r.Checkpoint != nil {
		cp.Gate, cp.StreamTime = r.Checkpoint.Gate, r.Checkpoint.StreamTime
	}
	c := task.Committed{Checkpoint: &cp}
	cfg := task.Config{
		Topology: m.cfg.Topology, Processor: t.processor, Partition: t.partition,
		OutputPartitions: m.partitionCount, GateOff: m.cfg.GateOff, Now: m.Now,
		DeadLetterTopic: m.cfg.DeadLetterTopic, Skip: t.skips, CheckClaims: m.cfg.CheckClaims, Observer: t.observe(m),
		MaxRecordBytes: m.cfg.MaxRecordBytes,
		Stores:         t.stores,
	}
	if g := m.cfg.Globals; g != nil {
		cfg.Globals, cfg.GlobalNext = g.stores, g.Channels()
	}
	tt, err := task.Rebuild(cfg, c)
	if err != nil {
		return err
	}
	t.running(tt)
	return nil
}

// ReadsGlobal reports whether t's processor reads topic as a global table.
func (t *Task) ReadsGlobal(topic string) bool {
	return t.task != nil && t.task.ReadsGlobal(topic)
}

// seedOffsets sets, for each input of t, the offset it resumes from.
func (m *Manager) seedOffsets(t *Task, r *Restored, group map[causal.Channel]int64) error {
	for _, in := range t.inputs {
		next, err := m.startOffset(causal.Channel{Topic: in, Partition: t.partition}, r, group)
		if err != nil {
			return err
		}
		t.committedAt(in, next)
	}
	return nil
}

// startOffset is where a task resumes a channel: its own checkpointed
// position, else the group's committed offset, else where the reset policy
// starts. A committed position outside the log fails the task unless
// resets are allowed.
func (m *Manager) startOffset(ch causal.Channel, r *Restored, group map[causal.Channel]int64) (int64, error) {
	low, high, err := m.cfg.Offsets.Watermarks(ch)
	if err != nil {
		return 0, fmt.Errorf("watermarks of %s: %w", ch, err)
	}
	next, known := int64(-1), false
	if r != nil && r.Checkpoint != nil {
		next, known = r.Checkpoint.Next[ch.Topic]
	}
	if !known {
		next, known = group[ch]
	}
	if !known {
		if m.cfg.AutoOffsetReset == "latest" {
			return high, nil
		}
		return low, nil
	}
	if next < low || next > high {
		if !m.cfg.AllowOffsetReset {
			return 0, fmt.Errorf("committed offset %d of %s is outside the log [%d, %d]: records were lost before they were processed "+
				"(retention or truncation); restart with --allow-offset-reset to skip them", next, ch, low, high)
		}
		m.cfg.Log.Warn("committed offset out of range; resetting as allowed", zap.Stringer("channel", ch), zap.Int64("offset", next))
		if next < low {
			return low, nil
		}
		return high, nil
	}
	return next, nil
}

// Starts is, per input channel of the given tasks, the lowest offset any
// of them resumes from: where reading must start.
func (m *Manager) Starts(ts []*Task) map[causal.Channel]int64 {
	start := map[causal.Channel]int64{}
	for _, t := range ts {
		for in, next := range t.committed {
			ch := causal.Channel{Topic: in, Partition: t.partition}
			if cur, ok := start[ch]; !ok || next < cur {
				start[ch] = next
			}
		}
	}
	return start
}

// FailedRecord returns the input record a task failure names, if any: a
// task.RecordError's record, a corrupt clock's, a deserialization
// error's, or that of any error in the chain with a FailedRecord method.
func FailedRecord(err error) (causal.Entry, bool) {
	var re *task.RecordError
	if errors.As(err, &re) && re.Record.Channel.Topic != "" {
		return re.Record, true
	}
	var ce *causal.ClockError
	if errors.As(err, &ce) {
		return causal.Entry{Channel: ce.Channel, Offset: ce.Offset}, true
	}
	var de *framework.DeserializeError
	if errors.As(err, &de) {
		return causal.Entry{Channel: causal.Channel{Topic: de.Topic, Partition: de.Partition}, Offset: de.Offset}, true
	}
	var named interface{ FailedRecord() causal.Entry }
	if errors.As(err, &named) {
		return named.FailedRecord(), true
	}
	return causal.Entry{}, false
}

// Fail marks t failed with err (the first failure sticks) and logs it with
// the record it names. It reports whether the open transaction must
// abort: the task failed part-way through a record after streaming
// outputs into it.
func (m *Manager) Fail(t *Task, err error) (mustAbort bool) {
	if t.state == Failed {
		return false
	}
	t.failed(err)
	fields := []zap.Field{zap.String("task", t.id), zap.Error(err)}
	if rec, ok := FailedRecord(err); ok {
		fields = append(fields, zap.Stringer("channel", rec.Channel), zap.Int64("offset", rec.Offset))
	}
	m.cfg.Log.Error("task failed; its offsets stay at the last commit (POST /tasks/"+t.id+"/restart to retry, /skip to move past the record)", fields...)
	return t.task != nil && t.task.Broken() && t.streamed > 0
}

// CloseTask closes t's task, if it has one, and lets it go.
func (m *Manager) CloseTask(t *Task) {
	if t.task == nil {
		return
	}
	if err := t.task.Close(); err != nil {
		m.cfg.Log.Warn("close task", zap.String("task", t.id), zap.Error(err))
	}
	t.closed()
}

// CloseAll closes every task and its stores, and forgets them.
func (m *Manager) CloseAll() {
	for _, t := range m.tasks {
		m.CloseTask(t)
		m.closeStores(t)
	}
	m.tasks = nil
	m.routes = map[causal.Channel]*Route{}
}

// Close closes the given tasks and their stores, and forgets them and the
// routes of the channels no other task reads; the other tasks go on as
// they were, keeping what they have received. A worker calls it for the
// tasks a rebalance moves elsewhere.
func (m *Manager) Close(ts []*Task) {
	ts = slices.Clone(ts) // it may be m.tasks itself
	for _, t := range ts {
		m.CloseTask(t)
		m.closeStores(t)
	}
	m.tasks = slices.DeleteFunc(m.tasks, func(t *Task) bool { return slices.Contains(ts, t) })
	m.index()
}

// Reading returns the tasks that read any of chs.
func (m *Manager) Reading(chs []causal.Channel) []*Task {
	var out []*Task
	for _, t := range m.tasks {
		for _, in := range t.inputs {
			if slices.Contains(chs, causal.Channel{Topic: in, Partition: t.partition}) {
				out = append(out, t)
				break
			}
		}
	}
	return out
}

// Partitions is a topic's partition count, 0 for a topic the manager does
// not know.
func (m *Manager) Partitions(topic string) int32 { return m.cfg.Partitions[topic] }

func (m *Manager) partitionCount(topic string) (int32, error) {
	n, ok := m.cfg.Partitions[topic]
	if !ok {
		return 0, fmt.Errorf("unknown topic %q", topic)
	}
	return n, nil
}
