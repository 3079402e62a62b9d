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
	// MaxRecordBytes is the most key and value bytes of a record the
	// task writes of its own accord. A store Put over it fails the record
	// being processed with a *store.RecordTooLargeError (see store.Limit),
	// since its changelog could never hold it; a dead letter over it is
	// cut to fit (framework.HeaderDLQTruncated). Default 0: no bound.
	MaxRecordBytes int
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

// Snapshot is what a commit must write together: offsets to commit per input
// channel, the gate checkpoint, and the store changes since the last
// snapshot.
type Snapshot struct {
	Offsets []causal.Entry
	// Gate is the gate's checkpoint.
	Gate    []byte
	Changes map[string][]store.Change
	// StreamTime is the task's stream time (the largest timestamp it has
	// processed), which windows, grace and stream-time punctuations are
	// measured by; restore it with RestoreStreamTime so that a restarted
	// task drops as late what it would have dropped without the restart.
	StreamTime time.Time
}

// Checkpoint is the snapshot's checkpoint: the next offset of each input,
// the stream time and the gate's checkpoint.
func (s Snapshot) Checkpoint() Checkpoint {
	next := make(map[string]int64, len(s.Offsets))
	for _, e := range s.Offsets {
		next[e.Channel.Topic] = e.Offset
	}
	return Checkpoint{Next: next, StreamTime: s.StreamTime, Gate: s.Gate}
}

// Status describes the task for operators.
type Status struct {
	ID       string
	Channels []causal.ChannelStatus
	Held     int
	Err      error
}

// Task is one processor instance behind its gate. It is not safe for
// concurrent use.
//
//causeway:owned
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
	// versioned are the versioned stores, laid over their key-value
	// stores.
	versioned map[string]store.Versioned
	specs     map[string]framework.StoreSpec
	outputs   []*output
	outbox    []Output
	spare     []Output // the outbox TakeOutputs handed out before the last
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

// SetEnd reports a channel's end (its high watermark), or with a negative
// end that it does not exist, for checking claims (Config.CheckClaims).
func (t *Task) SetEnd(ch causal.Channel, end int64) { t.node.SetEnd(ch, end) }

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
	s := Snapshot{Offsets: offsets, Gate: t.node.Checkpoint(), Changes: map[string][]store.Change{}, StreamTime: t.stream}
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
	if !ok || t.specs[name].Kind == framework.WindowKind {
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
