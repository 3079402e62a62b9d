// Package task runs one task of a topology: one processor instance behind
// its causal gate, with its state stores. It does no I/O: the caller (the
// Kafka runtime, or the in-memory test driver) feeds it records and
// positions, takes the stamped outputs it produced, and commits a snapshot
// of offsets, gate checkpoint and store changes together.
package task

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/store"
)

// Observer hears what a task does, for logs and metrics: every record it
// did not turn into output on purpose (nothing is dropped without a call),
// and how long each delivered record waited at the gate.
type Observer interface {
	Dropped(task string, ev framework.DropEvent)
	Delivered(task string, waited time.Duration)
}

type nopObserver struct{}

func (nopObserver) Dropped(string, framework.DropEvent) {}
func (nopObserver) Delivered(string, time.Duration)     {}

// received is what the gate holds: the record and when it arrived, and for
// a record taken in as claiming nothing to be dead-lettered instead of
// processed, why.
type received struct {
	rec framework.Record
	at  time.Time
	bad *badRecord
}

// badRecord says why a received record goes to the dead-letter policy
// instead of the processor.
type badRecord struct {
	stage  string
	policy framework.BadInputPolicy
	cause  error
}

// Skip names a record an operator moved a failed task past: when the task
// receives it, the record is taken in as claiming nothing and written to
// the dead-letter topic with Reason, instead of being processed.
type Skip struct {
	Record causal.Entry
	Reason string
}

// RecordError is a task's failure on one input record: processing it, or
// sending an output that processing it emitted. It names the record, so an
// operator can find it, or move the task past it.
type RecordError struct {
	// Record is the input record.
	Record causal.Entry
	// Stage is framework.StageProcess or framework.StageProduce.
	Stage string
	// Output is the topic that refused the output, for StageProduce.
	Output string
	Err    error
}

// Error implements error.
func (e *RecordError) Error() string {
	at := fmt.Sprintf("%s@%d", e.Record.Channel, e.Record.Offset)
	if e.Stage == framework.StageProduce {
		if e.Record.Channel.Topic == "" {
			at = "a punctuation"
		} else {
			at = "input " + at
		}
		return fmt.Sprintf("output to %s emitted for %s was refused: %v", e.Output, at, e.Err)
	}
	return fmt.Sprintf("process %s: %v", at, e.Err)
}

// Unwrap returns the cause.
func (e *RecordError) Unwrap() error { return e.Err }

// Config describes the task to build.
type Config struct {
	Topology  *framework.Topology
	Processor string
	Partition int32
	// OutputPartitions returns the partition count of an output topic, used
	// to place keyed records as Kafka's default partitioner would. It is
	// asked once per output, at its first record, and the answer kept.
	// Required when the processor has outputs.
	OutputPartitions func(topic string) (int32, error)
	// GateOff delivers records in arrival order, ignoring their clocks. For
	// measurements and demonstrations only.
	GateOff bool
	// Now is the wall clock for wall-clock punctuations. Default time.Now.
	Now func() time.Time
	// Observer hears about dropped records. Default: none.
	Observer Observer
	// Stores holds the task's stores. The task writes to them and never
	// commits, aborts or closes them: their owner commits them with the
	// Kafka transaction that holds the task's Snapshot, and aborts them
	// when that transaction aborts. Default: a new in-memory set of the
	// task's own, which the task closes.
	Stores store.Set
	// DeadLetterTopic is where dead letters go. Default: the topology's
	// dead-letter topic. Required for Skip.
	DeadLetterTopic string
	// Skip lists records to move past (see Skip). Default: none.
	Skip []Skip
	// CheckClaims checks the claims of records on the task's ingress
	// inputs (topics no processor of the topology writes) before they
	// reach the gate: Receive hands a claim it cannot show to exist back
	// as a *causal.ClaimError; report the claimed channel's end with
	// SetEnd and receive the record again, or pass it to ReceiveBad.
	// Default off.
	CheckClaims bool
	// Globals holds, by store name, the worker's copy of every global
	// table the processor reads (framework.Global); the task only reads
	// them. GlobalNext is, for each partition of their topics, the offset
	// after the last record the copy has applied: the task's gate counts
	// those as delivered, and AdvanceGlobal moves them on. Required when
	// the processor reads global tables.
	Globals    map[string]store.KeyValue
	GlobalNext map[causal.Channel]int64
}

// Output is a record the task emitted, stamped and placed: Topic and
// Partition are where it goes, and its Record says the same in its own
// Topic and Partition (Offset 0), so that it is a record to produce as
// it is.
type Output struct {
	Topic     string
	Partition int32
	Record    framework.Record
	// From is the input record whose processing emitted it; the zero
	// Entry for an output of a punctuation.
	From causal.Entry
}

// Snapshot is what a commit must write together: offsets to commit per input
// channel, the gate checkpoint, and the store changes since the last
// snapshot.
type Snapshot struct {
	Offsets    []causal.Entry
	Checkpoint []byte
	Changes    map[string][]store.Change
	// StreamTime is the task's stream time (the largest timestamp it has
	// processed), which windows, grace and stream-time punctuations are
	// measured by; restore it with RestoreStreamTime so that a restarted
	// task drops as late what it would have dropped without the restart.
	StreamTime time.Time
}

// Status describes the task for operators.
type Status struct {
	ID       string
	Channels []causal.ChannelStatus
	Held     int
	Err      error
}

type schedule struct {
	id       int
	interval time.Duration
	typ      framework.PunctuationType
	next     time.Time
	fn       framework.Punctuator
	anchored bool
}

// Task is one processor instance behind its gate. It is not safe for
// concurrent use.
type Task struct {
	id   string
	cfg  Config
	info framework.ProcessorInfo
	// globals are the global tables the processor reads, read-only, by
	// store name; globalTopics their topics.
	globals      map[string]store.KeyValue
	globalTopics map[string]bool
	// extracts is set when an input of the processor has a timestamp
	// extractor; lastValid holds the largest valid timestamp each such
	// input has had, for UsePreviousOnInvalidTimestamp.
	extracts  bool
	lastValid map[string]time.Time
	// logicalIn maps the inputs the topology renamed (see
	// framework.Topology.ForApplication) to the names the processor knows.
	logicalIn map[string]string
	policy    framework.BadInputPolicy
	// clockPolicy is what happens to a record whose clock header does not
	// decode: DeadLetter when the processor's bad input goes to the
	// dead-letter topic, else FailTask (fail closed). LogAndSkip does not
	// apply: a record whose claims are lost must leave a record of itself.
	clockPolicy framework.BadInputPolicy
	dlq         *output // the dead-letter topic, when there is one
	// node carries, as each held record's payload, the index of its slot
	// in held: the gate's queues then move four bytes a record, not the
	// record. free lists the slots not in use.
	node    *causal.Node[int32]
	held    []received
	free    []int32
	proc    framework.Processor
	kv      map[string]store.Logged
	set     store.Set
	ownSet  bool
	windows map[string]store.Window
	specs   map[string]framework.StoreSpec
	outputs []*output
	outbox  []Output
	spare   []Output // the outbox TakeOutputs handed out before the last
	// current is what outputs take of the record being processed, while
	// inRecord says one is: only its timestamp and where it was read, so
	// that setting it copies no more than that.
	current  currentRecord
	inRecord bool
	// Stamps and output header lists are carved from slabs, so that an
	// output costs no allocation of its own; what is carved is not written
	// again until ReleaseOutputs.
	stampSlabs  slabs[byte]
	headerSlabs slabs[framework.Header]
	stream      time.Time
	schedules   []*schedule
	nextID      int
	ctx         *taskContext
	started     bool
	err         error
	// broken is set when the task failed part-way through processing a
	// record: its state then no longer matches any offset.
	broken bool
}

// New builds a task. Restore its state with RestoreStore and RestoreGate,
// seed its channels with Seed, then call Start before the first Receive.
func New(cfg Config) (*Task, error) {
	if cfg.Topology == nil {
		return nil, errors.New("task: no topology")
	}
	info, ok := cfg.Topology.Processor(cfg.Processor)
	if !ok {
		return nil, fmt.Errorf("task: no processor %q in topology %q", cfg.Processor, cfg.Topology.Name())
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Observer == nil {
		cfg.Observer = nopObserver{}
	}
	if len(info.Outputs) > 0 && cfg.OutputPartitions == nil {
		return nil, errors.New("task: OutputPartitions is required for a processor with outputs")
	}
	for _, gt := range info.Globals {
		if cfg.Globals[gt.Store] == nil {
			return nil, fmt.Errorf("task: processor %q reads global table %q, and the task was given no store %q for it", info.Name, gt.Topic, gt.Store)
		}
	}
	opts, err := cfg.Topology.NodeOptions(cfg.Processor)
	if err != nil {
		return nil, fmt.Errorf("task: %w", err)
	}
	policy, _ := cfg.Topology.BadInput()
	if cfg.DeadLetterTopic == "" {
		cfg.DeadLetterTopic = cfg.Topology.DeadLetterTopic()
	}
	dlq := cfg.DeadLetterTopic
	if len(cfg.Skip) > 0 && dlq == "" {
		return nil, errors.New("task: skipping a record needs a dead-letter topic")
	}
	if cfg.GateOff {
		opts = append(opts, causal.DeliverOnArrival())
	}
	if cfg.CheckClaims {
		if ingress := ingressInputs(cfg.Topology, info); len(ingress) > 0 {
			opts = append(opts, causal.CheckClaims(ingress...))
		}
	}
	node, err := causal.NewNode[int32](opts...)
	if err != nil {
		return nil, fmt.Errorf("task: %w", err)
	}
	t := &Task{
		id:          ID(cfg.Processor, cfg.Partition),
		cfg:         cfg,
		info:        info,
		extracts:    info.ExtractsTimestamps(),
		policy:      policy,
		clockPolicy: clockPolicy(info, policy),
		node:        node,
		proc:        info.New(),
		kv:          map[string]store.Logged{},
		set:         cfg.Stores,
		windows:     map[string]store.Window{},
		specs:       map[string]framework.StoreSpec{},
		stampSlabs:  slabs[byte]{size: stampSlabLen, keep: keptStampSlabs},
		headerSlabs: slabs[framework.Header]{size: headerSlabLen, keep: keptHeaderSlabs},
	}
	t.ctx = &taskContext{t: t}
	// Where causal order leaves a choice, the smallest timestamp goes
	// first, as Kafka Streams chooses among its partitions.
	node.PreferBy(func(a, b int32) bool { return t.held[a].rec.Timestamp.Before(t.held[b].rec.Timestamp) })
	for _, o := range info.Outputs {
		t.outputs = append(t.outputs, &output{topic: o.Topic, name: cfg.Topology.LogicalTopic(o.Topic), keep: o.KeepPartition})
	}
	for _, in := range info.Inputs {
		if l := cfg.Topology.LogicalTopic(in); l != in {
			if t.logicalIn == nil {
				t.logicalIn = map[string]string{}
			}
			t.logicalIn[in] = l
		}
	}
	if dlq != "" {
		t.dlq = &output{topic: dlq}
	}
	for _, gt := range info.Globals {
		if t.globals == nil {
			t.globals, t.globalTopics = map[string]store.KeyValue{}, map[string]bool{}
		}
		t.globals[gt.Store], t.globalTopics[gt.Topic] = store.ReadOnly(cfg.Globals[gt.Store]), true
	}
	if t.set == nil {
		t.set, t.ownSet = store.NewMemorySet(), true
	}
	for _, s := range info.Stores {
		m, err := t.set.Store(s.Name)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("task %s: store %q: %w", t.id, s.Name, err), t.closeSet())
		}
		t.kv[s.Name], t.specs[s.Name] = m, s
		if s.Kind == framework.WindowKind {
			t.windows[s.Name] = store.NewWindow(m, store.SegmentFor(s.Retention))
		}
	}
	return t, nil
}

// ingressInputs lists the inputs of info that no processor of topo writes:
// where causality enters the topology from outside.
func ingressInputs(topo *framework.Topology, info framework.ProcessorInfo) []string {
	written := map[string]bool{}
	for _, p := range topo.Processors() {
		for _, o := range p.Outputs {
			written[o.Topic] = true
		}
	}
	var out []string
	for _, in := range info.Inputs {
		if !written[in] {
			out = append(out, in)
		}
	}
	return out
}

// entryOf names where rec was read.
func entryOf(rec framework.Record) causal.Entry {
	return causal.Entry{Channel: causal.Channel{Topic: rec.Topic, Partition: rec.Partition}, Offset: rec.Offset}
}

// ID names a task as "processor/partition".
func ID(processor string, partition int32) string {
	return processor + "/" + strconv.FormatInt(int64(partition), 10)
}

// ID names this task.
func (t *Task) ID() string { return t.id }

// Partition is the partition index of the task's inputs.
func (t *Task) Partition() int32 { return t.cfg.Partition }

// Inputs lists the topics the task reads (partition Partition() of each).
func (t *Task) Inputs() []string { return slices.Clone(t.info.Inputs) }

// Stores lists the task's stores.
func (t *Task) Stores() []framework.StoreSpec { return slices.Clone(t.info.Stores) }

// Err returns the failure that stopped the task, or nil.
func (t *Task) Err() error { return t.err }

// RestoreStore applies changelog entries to a store before Start.
func (t *Task) RestoreStore(name string, changes []store.Change) error {
	m, ok := t.kv[name]
	if !ok {
		return fmt.Errorf("task %s: restore: %w: %q", t.id, framework.ErrUnknownStore, name)
	}
	return m.Restore(changes)
}

// RestoreGate restores the gate's checkpoint before Start.
func (t *Task) RestoreGate(checkpoint []byte) error {
	if err := t.node.Restore(checkpoint); err != nil {
		return fmt.Errorf("task %s: %w", t.id, err)
	}
	return nil
}

// RestoreStreamTime restores the stream time of the last committed
// snapshot before Start.
func (t *Task) RestoreStreamTime(st time.Time) {
	if st.After(t.stream) {
		t.stream = st
	}
}

// Seed brings input topic's channel into scope at the offset the consumer
// starts at.
func (t *Task) Seed(topic string, next int64) error {
	if err := t.node.Seed(causal.Channel{Topic: topic, Partition: t.cfg.Partition}, next); err != nil {
		return fmt.Errorf("task %s: %w", t.id, err)
	}
	return nil
}

// ReadsGlobal reports whether the processor reads topic as a global table.
func (t *Task) ReadsGlobal(topic string) bool { return t.globalTopics[topic] }

// SeedGlobals brings the channels of the processor's global tables into
// scope at the positions of Config.GlobalNext.
func (t *Task) SeedGlobals() error {
	for ch, next := range t.cfg.GlobalNext {
		if !t.globalTopics[ch.Topic] {
			continue
		}
		if err := t.node.Seed(ch, next); err != nil {
			return fmt.Errorf("task %s: global table: %w", t.id, err)
		}
	}
	return nil
}

// AdvanceGlobal reports that the worker's copy of a global table has
// applied every record of ch before next, and runs whatever that releases.
// A channel the task does not read is ignored.
func (t *Task) AdvanceGlobal(ch causal.Channel, next int64) error {
	if t.err != nil {
		return t.err
	}
	if !t.globalTopics[ch.Topic] {
		return nil
	}
	if err := t.node.Advance(ch, next); err != nil {
		return t.refuse(err)
	}
	return t.drain(t.cfg.Now())
}

// Start initialises the processor.
func (t *Task) Start() error {
	if t.started {
		return nil
	}
	t.started = true
	if err := t.proc.Init(t.ctx); err != nil {
		return t.fail(fmt.Errorf("init: %w", err))
	}
	return nil
}

// fail stops the task after a failure while processing: the gate has
// already counted the record as delivered, so no snapshot is valid any more.
func (t *Task) fail(err error) error {
	t.broken = true
	return t.refuse(err)
}

// refuse stops the task on input it could not accept (a corrupt clock):
// the record never entered the gate, so everything before it can still be
// committed.
func (t *Task) refuse(err error) error {
	if t.err == nil {
		t.err = fmt.Errorf("task %s: %w", t.id, err)
	}
	return t.err
}

// Receive takes one record read from an input (Topic, Partition, Offset and
// Headers set) and runs the processor on everything the gate then releases.
// An error fails the task; it is sticky.
func (t *Task) Receive(rec framework.Record) error {
	if t.err != nil {
		return t.err
	}
	if !t.started {
		return t.fail(errors.New("receive before Start"))
	}
	header, present := rec.Header(causal.HeaderKey)
	ch := causal.Channel{Topic: rec.Topic, Partition: rec.Partition}
	now := t.cfg.Now()
	var bad *badRecord
	if len(t.cfg.Skip) > 0 {
		if reason, ok := t.skipped(ch, rec.Offset); ok {
			bad = &badRecord{stage: framework.StageSkip, policy: framework.DeadLetter, cause: errors.New(reason)}
		}
	}
	if bad == nil {
		// The gate takes the record in and, when it may be delivered at
		// once, hands it straight back (ReceiveNow): then it is processed
		// from here and never stored in a slot. The slot is only reserved
		// for the gate to name when it holds the record.
		slot := t.nextSlot()
		reject := t.clockPolicy != framework.FailTask
		taken, direct, err := t.node.ReceiveNow(ch, rec.Offset, header, present, reject, slot)
		if taken {
			t.reserve() // slot, as nextSlot said
			t.held[slot] = received{rec: rec, at: now}
		}
		if !reject || !errors.Is(err, causal.ErrCorruptClock) {
			if err != nil {
				return t.refuseUnlessClaim(err)
			}
			if direct {
				t.cfg.Observer.Delivered(t.id, 0)
				if err := t.process(rec); err != nil {
					return t.fail(err)
				}
			}
			return t.drain(now)
		}
		// Bad input under a policy that goes on: the record is taken in as
		// claiming nothing, and dead-lettered or skipped when it is due.
		bad = &badRecord{stage: framework.StageClock, policy: t.clockPolicy, cause: err}
	}
	if err := t.receiveAsBad(rec, now, bad); err != nil {
		return t.refuseUnlessClaim(err)
	}
	return t.drain(now)
}

// receiveAsBad takes rec, received at now, into the gate as claiming
// nothing, to go to bad's policy instead of the processor when it is due.
func (t *Task) receiveAsBad(rec framework.Record, now time.Time, bad *badRecord) error {
	slot := t.slot(rec, now)
	t.held[slot].bad = bad
	taken, err := t.node.ReceiveHeader(causal.Channel{Topic: rec.Topic, Partition: rec.Partition}, rec.Offset, nil, false, slot)
	t.release(slot, taken)
	return err
}

// nextSlot is the index of the slot reserve would take next, left free
// until it does.
func (t *Task) nextSlot() int32 {
	if n := len(t.free); n > 0 {
		return t.free[n-1]
	}
	return int32(len(t.held))
}

// reserve takes a free slot of held, growing held when none is, and
// returns its index; the slot is empty.
func (t *Task) reserve() int32 {
	if n := len(t.free); n > 0 {
		i := t.free[n-1]
		t.free = t.free[:n-1]
		return i
	}
	t.held = append(t.held, received{})
	return int32(len(t.held) - 1)
}

// slot puts rec, received at now, in a free slot of held and returns its
// index, the payload the gate carries for it.
func (t *Task) slot(rec framework.Record, now time.Time) int32 {
	i := t.reserve()
	t.held[i] = received{rec: rec, at: now}
	return i
}

// release frees slot i unless the gate took its record in (taken).
func (t *Task) release(i int32, taken bool) {
	if !taken {
		t.freeSlot(i)
	}
}

// freeSlot empties slot i, so that it holds on to no record, and lists it
// as free.
func (t *Task) freeSlot(i int32) {
	t.held[i] = received{}
	t.free = append(t.free, i)
}

func clockPolicy(info framework.ProcessorInfo, badInput framework.BadInputPolicy) framework.BadInputPolicy {
	if info.ProcessingPolicy(framework.ErrDeserialize, badInput) == framework.DeadLetter {
		return framework.DeadLetter
	}
	return framework.FailTask
}

// refuseUnlessClaim refuses the record with err, unless err is a claim the
// caller can settle (CheckClaims): that one goes back to it as it is, and
// the task stays as it was.
func (t *Task) refuseUnlessClaim(err error) error {
	if errors.Is(err, causal.ErrClaimBeyondEnd) {
		return err
	}
	return t.refuse(err)
}

// SetEnd reports a channel's end (its high watermark), or with a negative
// end that it does not exist, for checking claims (Config.CheckClaims).
func (t *Task) SetEnd(ch causal.Channel, end int64) { t.node.SetEnd(ch, end) }

// ReceiveBad takes in rec as bad input because of cause (a claim that
// cannot be met): under a DeadLetter policy it is taken in as claiming
// nothing and dead-lettered when due, and the task goes on; otherwise the
// task refuses it and fails, as for a corrupt clock header, with
// everything before it still committable.
func (t *Task) ReceiveBad(rec framework.Record, cause error) error {
	if t.err != nil {
		return t.err
	}
	if t.clockPolicy != framework.DeadLetter {
		return t.refuse(cause)
	}
	now := t.cfg.Now()
	if err := t.receiveAsBad(rec, now, &badRecord{stage: framework.StageClock, policy: framework.DeadLetter, cause: cause}); err != nil {
		return t.refuse(err)
	}
	return t.drain(now)
}

// skipped reports whether the record at off on ch is one to move past, and
// why.
func (t *Task) skipped(ch causal.Channel, off int64) (string, bool) {
	for _, s := range t.cfg.Skip {
		if s.Record.Channel == ch && s.Record.Offset == off {
			return s.Reason, true
		}
	}
	return "", false
}

// Advance reports the consumer's position on an input with nothing more to
// read (partition EOF), and runs whatever that releases.
func (t *Task) Advance(topic string, position int64) error {
	if t.err != nil {
		return t.err
	}
	if err := t.node.Advance(causal.Channel{Topic: topic, Partition: t.cfg.Partition}, position); err != nil {
		return t.refuse(err)
	}
	return t.drain(t.cfg.Now())
}

// drain processes every record the gate releases; now is when the call that
// released them began, which is what each one's wait is measured to.
func (t *Task) drain(now time.Time) error {
	for {
		d, ok := t.node.Next()
		if !ok {
			return nil
		}
		in := t.held[d.Payload]
		t.freeSlot(d.Payload)
		if !in.at.IsZero() {
			t.cfg.Observer.Delivered(t.id, now.Sub(in.at))
		}
		if b := in.bad; b != nil {
			if err := t.badInput(b.policy, in.rec, in.rec, b.stage, b.cause); err != nil {
				return t.fail(err)
			}
			continue
		}
		if err := t.process(in.rec); err != nil {
			return t.fail(err)
		}
	}
}

// currentRecord is what outputs take of the record being processed.
type currentRecord struct {
	timestamp time.Time
	from      causal.Entry
}

// setCurrent makes rec the record being processed. Nothing clears it:
// inRecord says whether it applies, and it points to no record's bytes.
//
// Its fields that hold pointers (the timestamp's location, the topic) are
// written only when they change, which they seldom do from one record to
// the next: a pointer written into the heap costs a write barrier while
// the collector marks, which it does for much of a busy worker's time.
func (t *Task) setCurrent(rec framework.Record) {
	c := &t.current
	if c.timestamp != rec.Timestamp {
		c.timestamp = rec.Timestamp
	}
	if c.from.Channel.Topic != rec.Topic {
		c.from.Channel.Topic = rec.Topic
	}
	c.from.Channel.Partition, c.from.Offset = rec.Partition, rec.Offset
	t.inRecord = true
}

func (t *Task) process(rec framework.Record) error {
	if t.extracts {
		var skip bool
		var err error
		if rec, skip, err = t.extractTimestamp(rec); err != nil || skip {
			return err
		}
	}
	if rec.Timestamp.After(t.stream) {
		t.stream = rec.Timestamp
	}
	t.setCurrent(rec)
	mark := len(t.outbox)
	in := rec
	if l, ok := t.logicalIn[rec.Topic]; ok {
		in.Topic = l
	}
	err := t.proc.Process(t.ctx, in)
	t.inRecord = false
	if err != nil {
		policy := t.info.ProcessingPolicy(err, t.policy)
		if policy == framework.FailTask {
			return &RecordError{Record: entryOf(rec), Stage: framework.StageProcess, Err: err}
		}
		// Outputs emitted for a record that failed are discarded with it.
		clear(t.outbox[mark:])
		t.outbox = t.outbox[:mark]
		stage := framework.StageProcess
		if errors.Is(err, framework.ErrDeserialize) {
			stage = framework.StageDeserialize
		}
		t.setCurrent(rec)
		err = t.badInput(policy, rec, rec, stage, err)
		t.inRecord = false
		if err != nil {
			return err
		}
	}
	if len(t.schedules) == 0 {
		return nil // no call per record for a processor that schedules nothing
	}
	return t.punctuate(framework.StreamTime, t.stream)
}

// extractTimestamp gives rec the timestamp its input's extractor makes of
// it (see framework.ExtractTimestamp). A record the policy skips is
// reported; one whose timestamp is invalid under FailOnInvalidTimestamp
// fails as a processing error does, under the processor's policy.
func (t *Task) extractTimestamp(rec framework.Record) (framework.Record, bool, error) {
	in := rec // as the topology names its topic
	if l, ok := t.logicalIn[rec.Topic]; ok {
		in.Topic = l
	}
	ts, skip, err := t.info.Timestamp(in, t.lastValid[rec.Topic])
	switch {
	case err != nil:
		t.setCurrent(rec)
		defer func() { t.inRecord = false }()
		policy := t.info.ProcessingPolicy(err, t.policy)
		if policy == framework.FailTask {
			return rec, false, &RecordError{Record: entryOf(rec), Stage: framework.StageProcess, Err: err}
		}
		return rec, true, t.badInput(policy, rec, rec, framework.StageProcess, err)
	case skip:
		t.ctx.Report(framework.DropEvent{Reason: framework.DropInvalidTimestamp, Record: rec, Detail: "the timestamp extractor gave no valid timestamp"})
		return rec, true, nil
	}
	if t.lastValid == nil {
		t.lastValid = map[string]time.Time{}
	}
	if ts.After(t.lastValid[rec.Topic]) {
		t.lastValid[rec.Topic] = ts
	}
	rec.Timestamp = ts
	return rec, false, nil
}

// badInput applies policy (LogAndSkip or DeadLetter) to rec, which failed
// at stage: it is counted, and under DeadLetter written to the
// dead-letter topic with headers naming the input record src, the stage
// and the cause.
func (t *Task) badInput(policy framework.BadInputPolicy, src, rec framework.Record, stage string, cause error) error {
	ev := framework.DropEvent{Reason: "skipped", Record: src, Detail: stage + ": " + cause.Error()}
	if policy == framework.DeadLetter {
		if t.dlq == nil {
			return fmt.Errorf("dead-letter %s/%d@%d: the topology has no dead-letter topic: %w", src.Topic, src.Partition, src.Offset, cause)
		}
		// The dead letter keeps the record's headers as they came, its
		// clock header included (even a corrupt one): it is a record of
		// what arrived, and written back to its topic it claims what it
		// claimed. No gate reads the dead-letter topic, so it needs no
		// stamp of its own.
		dl := framework.Record{Key: rec.Key, Value: rec.Value, Timestamp: rec.Timestamp, Headers: slices.Clone(rec.Headers)}
		if src.Topic != "" {
			dl = dl.WithHeader(framework.HeaderDLQTopic, []byte(src.Topic)).
				WithHeader(framework.HeaderDLQPartition, []byte(strconv.FormatInt(int64(src.Partition), 10))).
				WithHeader(framework.HeaderDLQOffset, []byte(strconv.FormatInt(src.Offset, 10)))
		}
		dl = dl.WithHeader(framework.HeaderDLQStage, []byte(stage)).
			WithHeader(framework.HeaderDLQError, []byte(cause.Error()))
		if rec.Topic != "" && rec.Topic != src.Topic {
			dl = dl.WithHeader(framework.HeaderDLQOutput, []byte(rec.Topic))
		}
		if err := t.place(t.dlq, dl); err != nil {
			return fmt.Errorf("dead-letter %s/%d@%d: %w", src.Topic, src.Partition, src.Offset, err)
		}
		ev.Reason = "dead-letter"
	}
	t.cfg.Observer.Dropped(t.id, ev)
	return nil
}

// ProductionError applies the processor's production error policy to an
// output Kafka refused for good (cause). Under FailTask the task fails,
// naming the input record that emitted the output, and its snapshot is
// void, as after a processing failure; the error is returned. Under
// LogAndSkip the output is dropped and counted. Under DeadLetter the
// output goes to the dead-letter topic instead: take it with TakeOutputs
// and produce it in the same transaction. keepValue false leaves the value
// out of the dead-letter record (when its size was the problem).
func (t *Task) ProductionError(o Output, cause error, keepValue bool) error {
	if t.err != nil {
		return t.err
	}
	src := framework.Record{Topic: o.From.Channel.Topic, Partition: o.From.Channel.Partition, Offset: o.From.Offset}
	policy := t.info.ProductionErrors
	if t.dlq != nil && o.Topic == t.dlq.topic {
		policy = framework.FailTask // a dead letter has nowhere else to go
	}
	if policy == framework.FailTask {
		return t.fail(&RecordError{Record: o.From, Stage: framework.StageProduce, Output: o.Topic, Err: cause})
	}
	rec := o.Record
	rec.Topic = o.Topic
	if !keepValue {
		rec.Value = nil
	}
	if err := t.badInput(policy, src, rec, framework.StageProduce, cause); err != nil {
		return t.fail(err)
	}
	return nil
}

// output is one topic the task writes to.
type output struct {
	topic string
	// name is what the processor calls the topic (see
	// framework.Topology.ForApplication).
	name string
	// keep places every record on the task's partition instead of by key.
	keep bool
	// partitions is the topic's partition count, asked of
	// Config.OutputPartitions on the first record and kept: a topic's
	// partitions cannot change under a running task without breaking the
	// placement by key that the records already written follow.
	partitions int32
}

// partitionCount returns o's partition count.
func (t *Task) partitionCount(o *output) (int32, error) {
	if o.partitions > 0 {
		return o.partitions, nil
	}
	n, err := t.cfg.OutputPartitions(o.topic)
	if err != nil {
		return 0, fmt.Errorf("partitions of %q: %w", o.topic, err)
	}
	if n <= 0 {
		return 0, fmt.Errorf("output %q has %d partitions", o.topic, n)
	}
	o.partitions = n
	return n, nil
}

// emit stamps rec for output o and places it in the outbox.
func (t *Task) emit(o *output, rec framework.Record) error {
	stamp, err := t.appendStamp(o.topic)
	if err != nil {
		return err
	}
	rec.Headers = t.withClock(rec.Headers, stamp)
	return t.place(o, rec)
}

// place puts rec, headers as they are, in the outbox for output o.
func (t *Task) place(o *output, rec framework.Record) error {
	n, err := t.partitionCount(o)
	if err != nil {
		return err
	}
	part := t.cfg.Partition % n
	if rec.Key != nil && !o.keep {
		part = framework.PartitionFor(rec.Key, n)
	}
	if rec.Timestamp.IsZero() {
		rec.Timestamp = t.stream
		if t.inRecord {
			rec.Timestamp = t.current.timestamp
		}
	}
	var from causal.Entry
	if t.inRecord {
		from = t.current.from
	}
	// Into a slot of the outbox one field at a time: copying a whole
	// output costs a barrier on each of its pointers while the collector
	// marks. The slot may hold an output taken before, mostly of the same
	// topic and input: the fields holding a topic or a timestamp's
	// location are written only when they change.
	if len(t.outbox) < cap(t.outbox) {
		t.outbox = t.outbox[:len(t.outbox)+1]
	} else {
		t.outbox = append(t.outbox, Output{})
	}
	out := &t.outbox[len(t.outbox)-1]
	r := &out.Record
	if out.Topic != o.topic {
		out.Topic = o.topic
	}
	if r.Topic != o.topic {
		r.Topic = o.topic
	}
	if out.From.Channel.Topic != from.Channel.Topic {
		out.From.Channel.Topic = from.Channel.Topic
	}
	if r.Timestamp != rec.Timestamp {
		r.Timestamp = rec.Timestamp
	}
	out.Partition, out.From.Channel.Partition, out.From.Offset = part, from.Channel.Partition, from.Offset
	r.Key, r.Value, r.Headers = rec.Key, rec.Value, rec.Headers
	r.Partition, r.Offset = part, 0
	return nil
}

// The slabs' sizes, and how many ReleaseOutputs keeps for reuse: at most
// about 2 MB of stamps and 1.3 MB of header lists a task, what a task
// emitting some 20,000 records between two commits fills.
const (
	stampSlabLen    = 16 << 10
	headerSlabLen   = 256
	keptStampSlabs  = 128
	keptHeaderSlabs = 128
)

// appendStamp encodes the stamp for output into the stamp slab.
func (t *Task) appendStamp(output string) ([]byte, error) {
	s := &t.stampSlabs
	s.room(stampSlabLen / 16)
	at := len(s.cur)
	b, err := t.node.AppendStamp(s.cur, output)
	if err != nil {
		return nil, err
	}
	// A stamp longer than the room left moved the slab to a larger array;
	// carving goes on there, which is as good.
	s.cur = b
	return b[at:len(b):len(b)], nil
}

// withClock returns hs without any clock header and with clock appended, in
// a list carved from the header slab; hs itself is never written.
func (t *Task) withClock(hs []framework.Header, clock []byte) []framework.Header {
	s := &t.headerSlabs
	if len(hs) == 0 || len(hs) == 1 && hs[0].Key == causal.HeaderKey {
		// The common case, a record whose only header is its clock: the
		// list is the new clock alone.
		s.room(1)
		at := len(s.cur)
		s.cur = s.cur[:at+1]
		h := &s.cur[at]
		if h.Key != causal.HeaderKey {
			h.Key = causal.HeaderKey
		}
		h.Value = clock
		return s.cur[at : at+1 : at+1]
	}
	n := 1
	for _, h := range hs {
		if h.Key != causal.HeaderKey {
			n++
		}
	}
	s.room(n)
	at := len(s.cur)
	// Lengthened in place, not appended to one header at a time: that
	// would store the slab's pointer again with each header.
	s.cur = s.cur[:at+n]
	list := s.cur[at : at+n : at+n]
	k := 0
	for _, h := range hs {
		if h.Key != causal.HeaderKey {
			list[k] = h
			k++
		}
	}
	list[k] = framework.Header{Key: causal.HeaderKey, Value: clock}
	return list
}

// Punctuate runs the wall-clock punctuations that are due at now.
func (t *Task) Punctuate(now time.Time) error {
	if t.err != nil {
		return t.err
	}
	if err := t.punctuate(framework.WallClockTime, now); err != nil {
		return t.fail(err)
	}
	return nil
}

func (t *Task) punctuate(typ framework.PunctuationType, now time.Time) error {
	if now.IsZero() {
		return nil
	}
	var due []*schedule
	for _, s := range t.schedules {
		switch {
		case s.typ != typ:
		case !s.anchored:
			s.next, s.anchored = now.Add(s.interval), true
		case !now.Before(s.next):
			for !now.Before(s.next) {
				s.next = s.next.Add(s.interval)
			}
			due = append(due, s) // allocates only when something fires
		}
	}
	for _, s := range due {
		// A callback may have cancelled a later one.
		if !slices.Contains(t.schedules, s) {
			continue
		}
		if err := s.fn(t.ctx, now); err != nil {
			return fmt.Errorf("punctuate (%s): %w", typ, err)
		}
	}
	return nil
}

// TakeOutputs returns the records emitted since the last call. Outputs
// belong to the same transaction as the next Snapshot's offsets: produce
// them into the transaction that commits that snapshot (a runtime may
// stream them into the open transaction as they come). The returned slice
// is reused after the next call: copy out what must outlive it (the Output
// values themselves, and the records' bytes, stay valid until
// ReleaseOutputs).
//
// The outputs handed out before are not cleared, only written over: until
// ReleaseOutputs clears them, they keep the bytes they point to reachable,
// which costs less than clearing every batch.
func (t *Task) TakeOutputs() []Output {
	out := t.outbox
	t.outbox, t.spare = t.spare[:0], out
	return out
}

// ReleaseOutputs tells the task that every output it has emitted is done
// with: each was taken (TakeOutputs) and its client has sent it or copied
// it, so nothing reads the stamps and header lists the task carved for
// them any more. The task then carves the next ones from the same memory.
// With outputs not yet taken it does nothing. A caller that never calls it
// loses nothing but the reuse.
func (t *Task) ReleaseOutputs() {
	if len(t.outbox) > 0 {
		return
	}
	t.ReuseCarved()
	clear(t.outbox[:cap(t.outbox)])
	clear(t.spare[:cap(t.spare)])
	t.spare = t.spare[:0]
}

// ReuseCarved tells the task that nothing reads the stamps and header lists
// of the outputs it has emitted any more: each was taken (TakeOutputs) and
// its client has copied them. The task then carves the next ones from the
// same memory, while it is still in the processor's caches. Unlike
// ReleaseOutputs it leaves the taken outputs' records where they are,
// which costs nothing per output; a worker calls it after each batch of
// outputs it produces. With outputs not yet taken it does nothing.
func (t *Task) ReuseCarved() {
	if len(t.outbox) > 0 {
		return
	}
	t.stampSlabs.release()
	t.headerSlabs.release()
}

// Broken reports whether the task failed part-way through processing a
// record, which voids its snapshot (see Snapshot). Unlike Snapshot it has no
// side effects.
func (t *Task) Broken() bool { return t.broken }

// Snapshot returns what to commit now. The store changes it returns stay
// pending in the task's store set until its owner commits the set (after
// the Kafka transaction holding the snapshot commits) or aborts it (then
// rebuild the task from the committed state).
//
// A task that failed while processing a record has no snapshot: its gate
// already counts that record as delivered (delivery precedes processing),
// so its offsets must not be committed. Snapshot returns the failure, and
// the caller commits nothing of the task since its last snapshot. A task
// that refused a record at receipt (a corrupt clock) still has one: it
// covers everything before that record and nothing of it.
func (t *Task) Snapshot() (Snapshot, error) {
	if t.broken {
		return Snapshot{}, t.err
	}
	offsets := t.node.Committable()
	if t.globalTopics != nil {
		// A global table's position is the worker's, not the task's.
		offsets = slices.DeleteFunc(offsets, func(e causal.Entry) bool { return t.globalTopics[e.Channel.Topic] })
	}
	s := Snapshot{Offsets: offsets, Checkpoint: t.node.Checkpoint(), Changes: map[string][]store.Change{}, StreamTime: t.stream}
	for name, m := range t.kv {
		if ch := m.Changes(); len(ch) > 0 {
			s.Changes[name] = ch
		}
	}
	return s, nil
}

// Status describes the task.
func (t *Task) Status() Status {
	return Status{ID: t.id, Channels: t.node.Status(), Held: t.node.Held(), Err: t.err}
}

// Close closes the processor, and the task's store set if the task made it.
func (t *Task) Close() error {
	var err error
	if t.started {
		t.started = false
		if cerr := t.proc.Close(); cerr != nil {
			err = fmt.Errorf("task %s: close: %w", t.id, cerr)
		}
	}
	return errors.Join(err, t.closeSet())
}

func (t *Task) closeSet() error {
	if !t.ownSet || t.set == nil {
		return nil
	}
	set := t.set
	t.set = nil
	return set.Close()
}

// KeyValueStore gives tests and the runtime's status read access to a store.
func (t *Task) KeyValueStore(name string) (store.KeyValue, bool) {
	m, ok := t.kv[name]
	return m, ok
}

// CommittedStore gives the runtime's queries a key-value store as of its
// last commit (store.Logged.Committed).
func (t *Task) CommittedStore(name string) (store.KeyValue, bool) {
	m, ok := t.kv[name]
	if !ok || t.specs[name].Kind != framework.KeyValueKind {
		return nil, false
	}
	return m.Committed(), true
}

// CommittedWindowStore is CommittedStore for a window store.
func (t *Task) CommittedWindowStore(name string) (store.Window, bool) {
	m, ok := t.kv[name]
	spec := t.specs[name]
	if !ok || spec.Kind != framework.WindowKind {
		return nil, false
	}
	return store.NewWindow(m.Committed(), store.SegmentFor(spec.Retention)), true
}

// taskContext is the framework.Context handed to the processor.
type taskContext struct{ t *Task }

var _ framework.Context = (*taskContext)(nil)

func (c *taskContext) Forward(rec framework.Record) error {
	for _, o := range c.t.outputs {
		if err := c.t.emit(o, rec); err != nil {
			return err
		}
	}
	return nil
}

func (c *taskContext) Emit(topic string, rec framework.Record) error {
	for _, o := range c.t.outputs {
		if o.name == topic {
			return c.t.emit(o, rec)
		}
	}
	return fmt.Errorf("processor %q: %w: %q", c.t.info.Name, framework.ErrUnknownOutput, topic)
}

func (c *taskContext) KeyValueStore(name string) (store.KeyValue, error) {
	if g, ok := c.t.globals[name]; ok {
		return g, nil
	}
	m, ok := c.t.kv[name]
	if !ok || c.t.specs[name].Kind != framework.KeyValueKind {
		return nil, fmt.Errorf("processor %q: %w: key-value store %q", c.t.info.Name, framework.ErrUnknownStore, name)
	}
	return m, nil
}

func (c *taskContext) WindowStore(name string) (store.Window, error) {
	w, ok := c.t.windows[name]
	if !ok {
		return nil, fmt.Errorf("processor %q: %w: window store %q", c.t.info.Name, framework.ErrUnknownStore, name)
	}
	return w, nil
}

func (c *taskContext) Schedule(interval time.Duration, typ framework.PunctuationType, fn framework.Punctuator) (framework.Cancel, error) {
	if interval <= 0 {
		return nil, fmt.Errorf("schedule: interval %v must be positive", interval)
	}
	if fn == nil {
		return nil, errors.New("schedule: nil punctuator")
	}
	t := c.t
	t.nextID++
	s := &schedule{id: t.nextID, interval: interval, typ: typ, fn: fn}
	now := t.stream
	if typ == framework.WallClockTime {
		now = t.cfg.Now()
	}
	if !now.IsZero() {
		s.next, s.anchored = now.Add(interval), true
	}
	t.schedules = append(t.schedules, s)
	return func() {
		t.schedules = slices.DeleteFunc(t.schedules, func(x *schedule) bool { return x == s })
	}, nil
}

func (c *taskContext) StreamTime() time.Time { return c.t.stream }
func (c *taskContext) TaskID() string        { return c.t.id }
func (c *taskContext) Partition() int32      { return c.t.cfg.Partition }
func (c *taskContext) Outputs() []string {
	topics := make([]string, len(c.t.outputs))
	for i, o := range c.t.outputs {
		topics[i] = o.name
	}
	return topics
}

func (c *taskContext) Report(ev framework.DropEvent) { c.t.cfg.Observer.Dropped(c.t.id, ev) }
