// Package driver runs a topology in memory, deterministically, with the
// causal gate in front of every processor, as Kafka Streams'
// TopologyTestDriver does for Streams applications. Tests pipe records into
// input topics, hold channels back to simulate lag, advance the wall clock,
// and read output topics (with their clocks) and store contents.
package driver

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/store"
	"github.com/causeway-stream/causeway/framework/task"
	"github.com/causeway-stream/causeway/framework/taskmgr"
)

// ErrUnknownTopic is returned for a topic the driver has no partitions for.
var ErrUnknownTopic = errors.New("unknown topic")

// The errors of RestartTask and SkipRecord, the same as a worker's.
var (
	// ErrNoTask: the driver has no task of that id.
	ErrNoTask = taskmgr.ErrNoTask
	// ErrNotFailed: SkipRecord was asked for a task that is not failed.
	ErrNotFailed = taskmgr.ErrNotFailed
	// ErrNoRecord: the task's failure names no record to skip.
	ErrNoRecord = taskmgr.ErrNoRecord
)

// Opt configures a Driver.
type Opt interface{ apply(*config) }

type config struct {
	partitions map[string]int32
	defaultN   int32
	gateOff    bool
	start      time.Time
	appID      string
}

type optFunc func(*config)

func (f optFunc) apply(c *config) { f(c) }

// Partitions sets the partition count of a topic. Topics the topology
// declares with a count use it; others default to DefaultPartitions.
func Partitions(topic string, n int32) Opt {
	return optFunc(func(c *config) { c.partitions[topic] = n })
}

// DefaultPartitions sets the partition count of topics with none set.
// Default: 1.
func DefaultPartitions(n int32) Opt { return optFunc(func(c *config) { c.defaultN = n }) }

// GateOff delivers records in arrival order, ignoring their clocks: the
// same run without causal delivery, to show what goes wrong.
func GateOff() Opt { return optFunc(func(c *config) { c.gateOff = true }) }

// ApplicationID runs the topology as the application id does on a worker:
// its internal topics are named "<id>-<name>" (see
// framework.Topology.ForApplication), and Records and Pipe take those
// names. Default: none, topics keep the names they were built with.
func ApplicationID(id string) Opt { return optFunc(func(c *config) { c.appID = id }) }

// WallClock sets the wall clock's starting time. Default: 2026-01-01 UTC.
func WallClock(start time.Time) Opt { return optFunc(func(c *config) { c.start = start }) }

// DefaultDeadLetterTopic is where dead letters go when the topology names
// no dead-letter topic.
const DefaultDeadLetterTopic = "dead-letter"

type partition struct {
	records []framework.Record // offsets are positions in the slice
}

// Driver is an in-memory run of one topology. Its tasks live in the same
// task manager as a worker's: they are built from committed state, fail
// one by one, are restarted or moved past a poison record, and commit by
// the same rules. It is not safe for concurrent use.
type Driver struct {
	cfg        config
	topo       *framework.Topology
	topics     map[string][]*partition
	tasks      *taskmgr.Manager
	deadLetter string
	// group is the consumer group's committed offsets, and committed each
	// task's committed store changes and checkpoint.
	group     map[causal.Channel]int64
	committed map[string]*taskmgr.Restored
	paused    map[causal.Channel]bool
	now       time.Time
	dropped   []Dropped
	// globals is the copy of the global tables, as a worker keeps it;
	// globalErr what applying to it failed on since the last Run.
	globals   *taskmgr.Globals
	globalErr error
}

// Dropped is a record a task dropped on purpose (bad input, late).
type Dropped struct {
	Task  string
	Event framework.DropEvent
}

// New builds the driver and starts one task per processor and partition.
func New(topo *framework.Topology, opts ...Opt) (*Driver, error) {
	cfg := config{partitions: map[string]int32{}, defaultN: 1, start: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	for _, o := range opts {
		o.apply(&cfg)
	}
	topo = topo.ForApplication(cfg.appID)
	d := &Driver{cfg: cfg, topo: topo, topics: map[string][]*partition{}, paused: map[causal.Channel]bool{}, now: cfg.start,
		group: map[causal.Channel]int64{}, committed: map[string]*taskmgr.Restored{}, deadLetter: topo.DeadLetterTopic()}
	if d.deadLetter == "" {
		d.deadLetter = DefaultDeadLetterTopic
	}
	counts := map[string]int32{}
	for _, ti := range topo.Topics() {
		if c, ok := cfg.partitions[ti.Name]; ok {
			counts[ti.Name] = c
		} else if !ti.Internal || ti.Partitions > 0 {
			counts[ti.Name] = topo.PartitionCount(ti.Name, nil, cfg.defaultN)
		}
	}
	// Internal topics the application sizes after others, as a worker does.
	for _, ti := range topo.Topics() {
		if _, ok := counts[ti.Name]; !ok {
			counts[ti.Name] = topo.PartitionCount(ti.Name, counts, cfg.defaultN)
		}
	}
	if _, ok := counts[d.deadLetter]; !ok {
		counts[d.deadLetter] = cfg.defaultN
	}
	var chs []causal.Channel
	for name, n := range counts {
		for p := range n {
			d.topics[name] = append(d.topics[name], &partition{})
			chs = append(chs, causal.Channel{Topic: name, Partition: p})
		}
	}
	if err := topo.CheckPartitions(counts); err != nil {
		return nil, err
	}
	globals, err := taskmgr.NewGlobals(topo, counts)
	if err != nil {
		return nil, err
	}
	d.globals = globals
	m, err := taskmgr.New(taskmgr.Config{
		Topology: topo, Partitions: counts, Offsets: memOffsets{d}, DeadLetterTopic: d.deadLetter,
		GateOff: cfg.gateOff, CheckClaims: true, Observer: observer{d}, Globals: globals,
	})
	if err != nil {
		return nil, err
	}
	d.tasks = m
	m.SetNow(d.now)
	all := m.Create(chs)
	if err := m.Build(all, d.committed); err != nil {
		return nil, err
	}
	for _, t := range all {
		if t.State() == taskmgr.Failed {
			return nil, fmt.Errorf("task %s: %w", t.ID(), t.Err())
		}
	}
	m.Started(m.Starts(all))
	return d, nil
}

// memOffsets answers the task manager from the driver's log.
type memOffsets struct{ d *Driver }

func (o memOffsets) Committed(chs []causal.Channel) (map[causal.Channel]int64, error) {
	out := map[causal.Channel]int64{}
	for _, ch := range chs {
		if off, ok := o.d.group[ch]; ok {
			out[ch] = off
		}
	}
	return out, nil
}

func (o memOffsets) Watermarks(ch causal.Channel) (low, high int64, err error) {
	ps, ok := o.d.topics[ch.Topic]
	if !ok || ch.Partition < 0 || int(ch.Partition) >= len(ps) {
		return 0, 0, fmt.Errorf("%w: %s", ErrUnknownTopic, ch)
	}
	return 0, int64(len(ps[ch.Partition].records)), nil
}

// ClaimEnd is the end of a claimed channel, -1 when it does not exist.
func (o memOffsets) ClaimEnd(claim causal.Entry) (int64, error) {
	_, high, err := o.Watermarks(claim.Channel)
	if err != nil {
		return -1, nil
	}
	return high, nil
}

type observer struct{ d *Driver }

func (o observer) Dropped(id string, ev framework.DropEvent) {
	o.d.dropped = append(o.d.dropped, Dropped{Task: id, Event: ev})
}

func (o observer) Delivered(string, time.Duration) {}

// PipeOpt configures one piped record.
type PipeOpt interface{ applyPipe(*pipe) }

type pipe struct {
	partition int32
	explicit  bool
	session   *causal.Session
}

type pipeOptFunc func(*pipe)

func (f pipeOptFunc) applyPipe(p *pipe) { f(p) }

// ToPartition writes the record to a given partition instead of the one its
// key hashes to.
func ToPartition(p int32) PipeOpt {
	return pipeOptFunc(func(pp *pipe) { pp.partition, pp.explicit = p, true })
}

// InSession stamps the record with the session's clock and records its
// offset in the session, as a causal producer does.
func InSession(s *causal.Session) PipeOpt {
	return pipeOptFunc(func(pp *pipe) { pp.session = s })
}

// Pipe appends rec to topic and returns where it landed. Nothing is
// processed until Run.
func (d *Driver) Pipe(topic string, rec framework.Record, opts ...PipeOpt) (causal.Channel, int64, error) {
	var p pipe
	for _, o := range opts {
		o.applyPipe(&p)
	}
	ps, ok := d.topics[topic]
	if !ok {
		return causal.Channel{}, 0, fmt.Errorf("%w: %q", ErrUnknownTopic, topic)
	}
	if !p.explicit {
		p.partition = framework.PartitionFor(rec.Key, int32(len(ps)))
	}
	if p.partition < 0 || int(p.partition) >= len(ps) {
		return causal.Channel{}, 0, fmt.Errorf("topic %q has no partition %d", topic, p.partition)
	}
	if p.session != nil && !p.session.Clock().IsEmpty() {
		rec = rec.WithHeader(causal.HeaderKey, p.session.AppendHeader(nil))
	}
	if rec.Timestamp.IsZero() {
		rec.Timestamp = d.now
	}
	off := d.append(topic, p.partition, rec)
	ch := causal.Channel{Topic: topic, Partition: p.partition}
	if p.session != nil {
		p.session.Produced(ch, off)
	}
	return ch, off, nil
}

func (d *Driver) append(topic string, part int32, rec framework.Record) int64 {
	pt := d.topics[topic][part]
	rec.Topic, rec.Partition, rec.Offset = topic, part, int64(len(pt.records))
	pt.records = append(pt.records, rec)
	return rec.Offset
}

// Pause holds a channel back: no task reads it until Resume. This is how a
// test makes an effect arrive before its cause.
func (d *Driver) Pause(topic string, partition int32) {
	d.paused[causal.Channel{Topic: topic, Partition: partition}] = true
}

// Resume lets tasks read a paused channel again.
func (d *Driver) Resume(topic string, partition int32) {
	delete(d.paused, causal.Channel{Topic: topic, Partition: partition})
}

// Run lets every task read and process until nothing moves: every unpaused
// channel is read to its end, outputs are appended to their topics (and read
// in turn), and each task commits, as a worker's would. A task that fails
// stops alone, FAILED at its last commit, as in a worker: Run returns the
// failures of the tasks that failed during the call, and the other tasks
// go on. See RestartTask and SkipRecord.
func (d *Driver) Run() error {
	failed := d.failedTasks()
	for d.step() {
	}
	err := errors.Join(d.newFailures(failed), d.globalErr)
	d.globalErr = nil
	return err
}

// step reads every unpaused channel to its end, task by task in the order
// they were created, committing after each task's channels, and reports
// whether any record was read.
func (d *Driver) step() bool {
	moved := d.applyGlobals()
	for _, t := range d.tasks.Tasks() {
		for _, in := range t.Inputs() {
			ch := causal.Channel{Topic: in, Partition: t.Partition()}
			r := d.tasks.Route(ch)
			if d.paused[ch] || r == nil {
				continue
			}
			recs := d.topics[in][t.Partition()].records
			for r.Position()+1 < int64(len(recs)) {
				d.tasks.Deliver(r, recs[r.Position()+1])
				moved = true
			}
			d.tasks.Advance(r, int64(len(recs)))
		}
		d.commit()
	}
	return moved
}

// applyGlobals applies what is new on every unpaused partition of the
// global tables' topics to the worker's copy, as a worker's global reader
// does, and reports whether there was any.
func (d *Driver) applyGlobals() bool {
	moved := false
	for ch, next := range d.globals.Channels() {
		if d.paused[ch] {
			continue
		}
		recs := d.topics[ch.Topic][ch.Partition].records
		if next >= int64(len(recs)) {
			continue
		}
		for _, rec := range recs[next:] {
			if err := d.globals.Apply(rec); err != nil {
				d.globalErr = errors.Join(d.globalErr, err)
			}
		}
		d.tasks.AdvanceGlobal(ch)
		moved = true
	}
	return moved
}

// failedTasks returns the ids of the failed tasks.
func (d *Driver) failedTasks() map[string]bool {
	failed := map[string]bool{}
	for _, t := range d.tasks.Tasks() {
		if t.State() == taskmgr.Failed {
			failed[t.ID()] = true
		}
	}
	return failed
}

// newFailures joins the failures of the tasks failed now and not in before.
func (d *Driver) newFailures(before map[string]bool) error {
	var errs []error
	for _, t := range d.tasks.Tasks() {
		if t.State() == taskmgr.Failed && !before[t.ID()] {
			errs = append(errs, fmt.Errorf("task %s failed: %w", t.ID(), t.Err()))
		}
	}
	return errors.Join(errs...)
}

// commit commits every task's outputs, store changes, checkpoint and
// offsets, as one transaction; a task whose snapshot is not well defined
// (it failed part-way through a record) contributes nothing.
func (d *Driver) commit() {
	// The in-memory log refuses nothing, so the commit cannot fail.
	_, _ = d.tasks.Commit(memoryTransaction{d})
}

// memoryTransaction is the driver's in-memory log as the task manager's
// commit writes to it: outputs are appended at once, and what each task
// committed is kept as a worker's changelog and checkpoint topics would
// keep it.
type memoryTransaction struct{ d *Driver }

var _ taskmgr.Transaction = memoryTransaction{}

// Begin goes on: the driver commits every time it is asked to.
func (memoryTransaction) Begin(bool) (bool, error) { return true, nil }

func (tx memoryTransaction) SendOutputs(t *taskmgr.Task) (bool, error) {
	for _, o := range t.Task().TakeOutputs() {
		tx.d.append(o.Topic, o.Partition, o.Record)
	}
	return true, nil
}

func (tx memoryTransaction) WriteState(t *taskmgr.Task, snap task.Snapshot) ([]byte, bool, error) {
	c := tx.d.committed[t.ID()]
	if c == nil {
		c = &taskmgr.Restored{Stores: map[string][]store.Change{}}
		tx.d.committed[t.ID()] = c
	}
	for name, changes := range snap.Changes {
		c.Stores[name] = append(c.Stores[name], changes...)
	}
	cp := snap.Checkpoint()
	c.Checkpoint = &cp
	return nil, true, nil
}

func (tx memoryTransaction) Commit(offsets map[causal.Channel]int64) error {
	maps.Copy(tx.d.group, offsets)
	return nil
}

// GroupOffsets returns the offsets the consumer group has committed, as a
// worker's would: per input channel, the next offset to read.
func (d *Driver) GroupOffsets() map[causal.Channel]int64 { return maps.Clone(d.group) }

// AdvanceWallClock moves the wall clock, runs the wall-clock punctuations
// that become due, then Run. It returns the failures of the tasks that
// failed meanwhile.
func (d *Driver) AdvanceWallClock(by time.Duration) error {
	failed := d.failedTasks()
	d.now = d.now.Add(by)
	d.tasks.SetNow(d.now)
	for _, t := range d.tasks.Tasks() {
		if t.State() != taskmgr.Running {
			continue
		}
		if err := t.Task().Punctuate(d.now); err != nil {
			d.tasks.Fail(t, err)
		}
		d.commit()
	}
	return errors.Join(d.newFailures(failed), d.Run())
}

// RestartTask throws a task away and rebuilds it from what it committed:
// stores from their changelog, the gate from its checkpoint, positions from
// committed offsets, as after a crash (so unlike a worker's restart, it
// rebuilds a running task too). Its input channels are read again from its
// committed offsets; the other tasks reading them skip what they already
// received. It returns the task's failure when it cannot be rebuilt.
func (d *Driver) RestartTask(id string) error {
	t, ok := d.tasks.Find(id)
	if !ok {
		return fmt.Errorf("%w: %q", ErrNoTask, id)
	}
	d.commit()
	d.tasks.DropStores(t)
	return d.rebuild(t)
}

// SkipRecord moves a failed task past the input record it failed on, by
// the worker's rule: the task is rebuilt from its committed state and,
// when it reaches that record again, writes it to the dead-letter topic
// (with the failure as the reason) instead of processing it. It returns
// the record skipped, or an error wrapping ErrNoTask, ErrNotFailed or
// ErrNoRecord. Run processes what follows.
func (d *Driver) SkipRecord(id string) (causal.Entry, error) {
	t, skip, err := d.tasks.Request(id, true)
	if err != nil {
		return causal.Entry{}, err
	}
	t.AddSkip(skip)
	return skip.Record, d.rebuild(t)
}

func (d *Driver) rebuild(t *taskmgr.Task) error {
	d.commit()
	if _, err := d.tasks.Rebuild([]*taskmgr.Task{t}, d.committed); err != nil {
		return err
	}
	if t.State() == taskmgr.Failed {
		return fmt.Errorf("task %s: %w", t.ID(), t.Err())
	}
	return nil
}

// Failed returns the failure of every failed task, by id.
func (d *Driver) Failed() map[string]error {
	out := map[string]error{}
	for _, t := range d.tasks.Tasks() {
		if t.State() == taskmgr.Failed {
			out[t.ID()] = t.Err()
		}
	}
	return out
}

// DeadLetterTopic is the topic dead letters go to: the topology's, or
// DefaultDeadLetterTopic.
func (d *Driver) DeadLetterTopic() string { return d.deadLetter }

// Records returns every record of every partition of topic, in partition
// then offset order.
func (d *Driver) Records(topic string) ([]framework.Record, error) {
	ps, ok := d.topics[topic]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownTopic, topic)
	}
	var out []framework.Record
	for _, p := range ps {
		out = append(out, p.records...)
	}
	return out, nil
}

// Store returns a task's key-value store (window stores are key-value stores
// underneath; see store.NewWindow to read them as windows).
func (d *Driver) Store(taskID, name string) (store.KeyValue, error) {
	t, ok := d.tasks.Find(taskID)
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrNoTask, taskID)
	}
	if t.Task() == nil {
		return nil, fmt.Errorf("task %s is %s: %w", taskID, t.State(), t.Err())
	}
	kv, ok := t.Task().KeyValueStore(name)
	if !ok {
		return nil, fmt.Errorf("task %s: %w: %q", taskID, framework.ErrUnknownStore, name)
	}
	return kv, nil
}

// Tasks returns the status of every task that has state, by id.
func (d *Driver) Tasks() []task.Status {
	out := make([]task.Status, 0, len(d.tasks.Tasks()))
	for _, t := range d.tasks.Tasks() {
		if t.Task() != nil {
			out = append(out, t.Task().Status())
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Dropped returns every record tasks dropped on purpose so far.
func (d *Driver) Dropped() []Dropped { return slices.Clone(d.dropped) }

// Now is the driver's wall clock.
func (d *Driver) Now() time.Time { return d.now }
