// Package driver runs a topology in memory, deterministically, with the
// causal gate in front of every processor, as Kafka Streams'
// TopologyTestDriver does for Streams applications. Tests pipe records into
// input topics, hold channels back to simulate lag, advance the wall clock,
// and read output topics (with their clocks) and store contents.
package driver

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/store"
	"github.com/causeway-stream/causeway/framework/task"
)

// ErrUnknownTopic is returned for a topic the driver has no partitions for.
var ErrUnknownTopic = errors.New("unknown topic")

// Opt configures a Driver.
type Opt interface{ apply(*config) }

type config struct {
	partitions map[string]int32
	defaultN   int32
	gateOff    bool
	start      time.Time
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

// WallClock sets the wall clock's starting time. Default: 2026-01-01 UTC.
func WallClock(start time.Time) Opt { return optFunc(func(c *config) { c.start = start }) }

type partition struct {
	records []framework.Record // offsets are positions in the slice
}

type taskState struct {
	processor string
	t         *task.Task
	pos       map[string]int64 // by input topic
	committed task.Snapshot
	changelog map[string][]store.Change // all committed store changes
}

// Driver is an in-memory run of one topology. It is not safe for concurrent
// use.
type Driver struct {
	cfg     config
	topo    *framework.Topology
	topics  map[string][]*partition
	tasks   []*taskState
	paused  map[causal.Channel]bool
	now     time.Time
	dropped []Dropped
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
	d := &Driver{cfg: cfg, topo: topo, topics: map[string][]*partition{}, paused: map[causal.Channel]bool{}, now: cfg.start}
	counts := map[string]int32{}
	for _, ti := range topo.Topics() {
		n := cfg.defaultN
		if ti.Partitions > 0 {
			n = ti.Partitions
		}
		if c, ok := cfg.partitions[ti.Name]; ok {
			n = c
		}
		counts[ti.Name] = n
	}
	if dlq := topo.DeadLetterTopic(); dlq != "" {
		counts[dlq] = cfg.defaultN
	}
	for name, n := range counts {
		for range n {
			d.topics[name] = append(d.topics[name], &partition{})
		}
	}
	if err := topo.CheckPartitions(counts); err != nil {
		return nil, err
	}
	for _, p := range topo.Processors() {
		for part := range counts[p.Inputs[0]] {
			ts := &taskState{processor: p.Name, changelog: map[string][]store.Change{}}
			d.tasks = append(d.tasks, ts)
			if err := d.startTask(ts, p.Name, part); err != nil {
				return nil, err
			}
		}
	}
	return d, nil
}

func (d *Driver) startTask(ts *taskState, processor string, part int32) error {
	next := map[string]int64{}
	for _, e := range ts.committed.Offsets {
		next[e.Channel.Topic] = e.Offset
	}
	t, err := task.Rebuild(task.Config{
		Topology:         d.topo,
		Processor:        processor,
		Partition:        part,
		OutputPartitions: d.partitionCount,
		GateOff:          d.cfg.gateOff,
		Now:              func() time.Time { return d.now },
		Observer:         observer{d},
	}, task.Committed{Stores: ts.changelog, Checkpoint: ts.committed.Checkpoint, StreamTime: ts.committed.StreamTime, Next: next})
	if err != nil {
		return err
	}
	ts.pos = next
	ts.t = t
	return nil
}

type observer struct{ d *Driver }

func (o observer) Dropped(id string, ev framework.DropEvent) {
	o.d.dropped = append(o.d.dropped, Dropped{Task: id, Event: ev})
}

func (o observer) Delivered(string, time.Duration) {}

func (d *Driver) partitionCount(topic string) (int32, error) {
	ps, ok := d.topics[topic]
	if !ok {
		return 0, fmt.Errorf("%w: %q", ErrUnknownTopic, topic)
	}
	return int32(len(ps)), nil
}

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
// in turn), and each task commits. It returns the first task failure.
func (d *Driver) Run() error {
	for {
		moved := false
		for _, ts := range d.tasks {
			m, err := d.step(ts)
			if err != nil {
				return err
			}
			moved = moved || m
		}
		if !moved {
			return nil
		}
	}
}

// step reads everything available to one task, then commits it.
func (d *Driver) step(ts *taskState) (bool, error) {
	t := ts.t
	moved := false
	for _, in := range t.Inputs() {
		ch := causal.Channel{Topic: in, Partition: t.Partition()}
		if d.paused[ch] {
			continue
		}
		recs := d.topics[in][t.Partition()].records
		for ts.pos[in] < int64(len(recs)) {
			rec := recs[ts.pos[in]]
			ts.pos[in]++
			moved = true
			if err := t.Receive(rec); err != nil {
				return false, err
			}
		}
		if err := t.Advance(in, ts.pos[in]); err != nil {
			return false, err
		}
	}
	d.commit(ts)
	return moved, nil
}

// commit appends a task's outputs to their topics and records its snapshot,
// as one transaction. A failed task commits nothing.
func (d *Driver) commit(ts *taskState) {
	snap, err := ts.t.Snapshot()
	outs := ts.t.TakeOutputs()
	if err != nil {
		return
	}
	for _, o := range outs {
		d.append(o.Topic, o.Partition, o.Record)
	}
	for name, changes := range snap.Changes {
		ts.changelog[name] = append(ts.changelog[name], changes...)
	}
	ts.committed = snap
}

// AdvanceWallClock moves the wall clock, runs the wall-clock punctuations
// that become due, then Run.
func (d *Driver) AdvanceWallClock(by time.Duration) error {
	d.now = d.now.Add(by)
	for _, ts := range d.tasks {
		if err := ts.t.Punctuate(d.now); err != nil {
			return err
		}
		d.commit(ts)
	}
	return d.Run()
}

// RestartTask throws a task away and rebuilds it from what it committed:
// stores from their changelog, the gate from its checkpoint, positions from
// committed offsets, as after a crash.
func (d *Driver) RestartTask(id string) error {
	for _, ts := range d.tasks {
		if ts.t.ID() == id {
			if err := ts.t.Close(); err != nil {
				return err
			}
			return d.startTask(ts, ts.processor, ts.t.Partition())
		}
	}
	return fmt.Errorf("no task %q", id)
}

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
	for _, ts := range d.tasks {
		if ts.t.ID() == taskID {
			kv, ok := ts.t.KeyValueStore(name)
			if !ok {
				return nil, fmt.Errorf("task %s: %w: %q", taskID, framework.ErrUnknownStore, name)
			}
			return kv, nil
		}
	}
	return nil, fmt.Errorf("no task %q", taskID)
}

// Tasks returns the status of every task, by id.
func (d *Driver) Tasks() []task.Status {
	out := make([]task.Status, 0, len(d.tasks))
	for _, ts := range d.tasks {
		out = append(out, ts.t.Status())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Dropped returns every record tasks dropped on purpose so far.
func (d *Driver) Dropped() []Dropped { return slices.Clone(d.dropped) }

// Now is the driver's wall clock.
func (d *Driver) Now() time.Time { return d.now }
