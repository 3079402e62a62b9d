package framework

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/causeway-stream/causeway/causal"
)

// StoreKind says what a store holds.
type StoreKind int

const (
	// KeyValueKind is a store.KeyValue.
	KeyValueKind StoreKind = iota
	// WindowKind is a store.Window.
	WindowKind
	// VersionedKind is a store.Versioned, its history retention in the
	// spec's Retention.
	VersionedKind
)

// String names the kind.
func (k StoreKind) String() string {
	switch k {
	case WindowKind:
		return "window"
	case VersionedKind:
		return "versioned"
	}
	return "key-value"
}

// StoreSpec declares a state store.
type StoreSpec struct {
	Name string
	Kind StoreKind
	// Retention, for window stores: windows starting longer ago than this
	// (in stream time) may be dropped. Zero keeps everything.
	Retention time.Duration
	// Memory keeps the store in memory even where the worker keeps stores
	// on disk: it is restored from its changelog in full whenever its task
	// starts on a worker. See InMemory.
	Memory bool
	// Timestamped, for window stores: each value starts with the time of
	// the window's latest record (8 bytes, big-endian Unix nanoseconds),
	// then the value, as in Kafka Streams' timestamped stores. Queries
	// give the two apart.
	Timestamped bool
	// Sessions, for window stores: each window is a session kept under
	// its end, its value the session's start (8 bytes, big-endian Unix
	// nanoseconds) then the aggregate. Queries answer each session's
	// start and end, and the aggregate alone.
	Sessions bool
}

// InMemory returns the spec of the same store kept in memory: for small
// stores whose reads must be as fast as can be. Stores are kept on disk
// by default, on workers with a state directory.
func (s StoreSpec) InMemory() StoreSpec {
	s.Memory = true
	return s
}

// KeyValueStore declares a key-value store.
func KeyValueStore(name string) StoreSpec { return StoreSpec{Name: name, Kind: KeyValueKind} }

// WindowStore declares a window store with a retention period.
func WindowStore(name string, retention time.Duration) StoreSpec {
	return StoreSpec{Name: name, Kind: WindowKind, Retention: retention}
}

// VersionedStore declares a versioned key-value store (Kafka Streams'
// Stores.persistentVersionedKeyValueStore, KIP-889) keeping history
// readable for history behind its stream time.
func VersionedStore(name string, history time.Duration) StoreSpec {
	return StoreSpec{Name: name, Kind: VersionedKind, Retention: history}
}

// StoreUser is implemented by processors that can name the stores they use,
// so that Build can check those are declared. The operators implement it.
type StoreUser interface{ UsesStores() []string }

// OutputUser is implemented by processors that can name the outputs they
// emit to by name, so that Build can check those are declared.
type OutputUser interface{ UsesOutputs() []string }

// OutputInfo describes one output of a processor.
type OutputInfo struct {
	Topic string
	// FedBy lists the inputs whose records lead to output here; nil: all.
	FedBy []string
	// Prune, when true, drops from stamps the topics no processor downstream
	// of this output consumes. Only set for outputs nothing outside the
	// topology reads.
	Prune bool
	// KeepPartition, when true, writes every record to the partition the
	// task reads instead of placing keyed records by key.
	KeepPartition bool
}

// ProcessorInfo describes one processor of a built topology.
type ProcessorInfo struct {
	Name    string
	Inputs  []string
	Outputs []OutputInfo
	Stores  []StoreSpec
	New     func() Processor
	// ProductionErrors is what happens when Kafka refuses one of the
	// processor's outputs for good (too large, invalid, a topic that does
	// not exist or may not be written). Default FailTask. See
	// OnProductionError.
	ProductionErrors BadInputPolicy
	// Globals are the global tables the processor's tasks read (see
	// Global).
	Globals []GlobalTable
	// processingErrors, when processingSet, is what happens when the
	// processor returns an error for a record. See OnProcessingError.
	processingErrors BadInputPolicy
	processingSet    bool
	// timestamps holds the timestamp extractor of each input that has one
	// (see ExtractTimestamp).
	timestamps map[string]timestampSource
}

// ProcessingPolicy is what happens when the processor returns err for a
// record: the policy OnProcessingError set, or else the topology's bad
// input policy for a deserialization error and FailTask for any other.
func (p ProcessorInfo) ProcessingPolicy(err error, badInput BadInputPolicy) BadInputPolicy {
	switch {
	case p.processingSet:
		return p.processingErrors
	case errors.Is(err, ErrDeserialize):
		return badInput
	}
	return FailTask
}

// usesDeadLetter reports whether any of the processor's policies writes to
// the dead-letter topic.
func (p ProcessorInfo) usesDeadLetter() bool {
	return p.ProductionErrors == DeadLetter || (p.processingSet && p.processingErrors == DeadLetter)
}

// TopicInfo describes a topic a topology uses.
type TopicInfo struct {
	Name string
	// Partitions is the declared partition count; 0 when the topic is
	// external and the runtime learns it from the cluster.
	Partitions int32
	// Internal topics are created and owned by the application
	// (repartition topics); they are read by nothing outside it.
	Internal bool
	// Reply marks a topic that carries answers back to the processor that
	// asked (Reply): Build's cycle check does not follow it.
	Reply bool
	// PartitionsLike, for a topic without Partitions, names the topic
	// whose partition count it takes when the runtime creates it. See
	// PartitionsLike.
	PartitionsLike string
}

// Builder collects a topology's processors and topics. Methods record
// mistakes and Build reports them all; a Builder is not safe for concurrent
// use.
type Builder struct {
	name        string
	procs       []*ProcessorInfo
	topics      map[string]*TopicInfo
	topicOrder  []string
	badInput    BadInputPolicy
	deadLetter  string
	allowCycles bool
	errs        []error
}

// NewBuilder starts a topology called name (used in descriptions).
func NewBuilder(name string) *Builder {
	return &Builder{name: name, topics: map[string]*TopicInfo{}}
}

// ProcessorOpt configures one processor.
type ProcessorOpt interface{ applyProc(*ProcessorInfo) }

type procOptFunc func(*ProcessorInfo)

func (f procOptFunc) applyProc(p *ProcessorInfo) { f(p) }

// From names the processor's input topics. All inputs of one processor must
// be co-partitioned: one task consumes partition i of each.
func From(topics ...string) ProcessorOpt {
	return procOptFunc(func(p *ProcessorInfo) { p.Inputs = append(p.Inputs, topics...) })
}

// OutputOpt configures one output.
type OutputOpt interface{ applyOutput(*OutputInfo) }

type outputOptFunc func(*OutputInfo)

func (f outputOptFunc) applyOutput(o *OutputInfo) { f(o) }

// To declares an output topic.
func To(topic string, opts ...OutputOpt) ProcessorOpt {
	return procOptFunc(func(p *ProcessorInfo) {
		o := OutputInfo{Topic: topic}
		for _, opt := range opts {
			opt.applyOutput(&o)
		}
		p.Outputs = append(p.Outputs, o)
	})
}

// FedBy says which inputs lead to records on this output. Default: every
// input, which is always sound.
func FedBy(inputs ...string) OutputOpt {
	return outputOptFunc(func(o *OutputInfo) { o.FedBy = append(o.FedBy, inputs...) })
}

// PruneDownstream drops, from the clocks stamped on this output, topics no
// processor downstream of it consumes. Default: off for topics the user
// names, on for internal topics. Turn it on only for outputs that nothing
// outside the topology reads.
func PruneDownstream() OutputOpt {
	return outputOptFunc(func(o *OutputInfo) { o.Prune = true })
}

// KeepPartition writes every record on this output to the partition index
// of the task that emits it (the input partition), instead of placing keyed
// records by their key with Kafka's default partitioner (murmur2). Default:
// off. Use it where the output must stay partitioned as the input is: a
// per-record transform of a topic already partitioned as downstream needs,
// or an output nothing downstream groups or joins by key. Placing by key
// scatters each task's records over every output partition, which costs
// the producer and the broker a good deal more per record (see
// docs/benchmarks.md). Kafka Streams does this with a custom
// StreamPartitioner.
func KeepPartition() OutputOpt {
	return outputOptFunc(func(o *OutputInfo) { o.KeepPartition = true })
}

// OnProcessingError sets what happens when the processor (or an
// operator's user function) returns an error for a record, a
// deserialization error included: FailTask stops the task at that record,
// LogAndSkip counts it and goes on, DeadLetter also writes the record to
// the topology's dead-letter topic with the error and the stage that
// failed. Outputs emitted for the record before the error are discarded;
// store writes made before it stay. Default: a deserialization error
// follows the topology's OnBadInput, any other error fails the task. Kafka
// Streams calls this a processing exception handler.
func OnProcessingError(policy BadInputPolicy) ProcessorOpt {
	return procOptFunc(func(p *ProcessorInfo) { p.processingErrors, p.processingSet = policy, true })
}

// OnProductionError sets what happens when Kafka refuses one of the
// processor's outputs for good: the record is too large, invalid, or its
// topic does not exist or may not be written. FailTask (the default) stops
// the task, naming the input record whose processing emitted it;
// LogAndSkip drops that output and goes on; DeadLetter writes it to the
// dead-letter topic instead (without its value when the value is what was
// too large). Retriable errors are retried and other transaction errors
// abort, whatever the policy. Kafka Streams calls this a production
// exception handler.
func OnProductionError(policy BadInputPolicy) ProcessorOpt {
	return procOptFunc(func(p *ProcessorInfo) { p.ProductionErrors = policy })
}

// GlobalTable is a topic every task of a processor reads whole, kept in a
// key-value store of its own: one copy per worker, shared by the tasks
// that read it, which may only read it.
type GlobalTable struct {
	Topic string
	Store string
}

// Global gives the processor's tasks the whole of topic, every partition,
// as the read-only key-value store storeName (a record with a nil value
// deletes its key): Kafka Streams' global table. Unlike an input, the
// topic needs no co-partitioning, and its records are not handed to
// Process. A worker reads a global table to its end before its tasks
// start, then follows it. Under the causal gate, a record that claims an
// offset of a global table's topic waits until the worker's copy has
// applied it.
func Global(topic, storeName string) ProcessorOpt {
	return procOptFunc(func(p *ProcessorInfo) { p.Globals = append(p.Globals, GlobalTable{Topic: topic, Store: storeName}) })
}

// Stores declares the state stores the processor uses. Store names are
// unique within a topology.
func Stores(specs ...StoreSpec) ProcessorOpt {
	return procOptFunc(func(p *ProcessorInfo) { p.Stores = append(p.Stores, specs...) })
}

// Processor adds a processor. newProc is called once per task to make its
// instance (and once by Build, to ask it which stores and outputs it uses).
func (b *Builder) Processor(name string, newProc func() Processor, opts ...ProcessorOpt) *Builder {
	p := &ProcessorInfo{Name: name, New: newProc}
	for _, o := range opts {
		o.applyProc(p)
	}
	b.procs = append(b.procs, p)
	return b
}

// TopicOpt configures a topic declaration.
type TopicOpt interface{ applyTopic(*TopicInfo) }

type topicOptFunc func(*TopicInfo)

func (f topicOptFunc) applyTopic(t *TopicInfo) { f(t) }

// Partitions sets the partition count the topic must have.
func Partitions(n int32) TopicOpt {
	return topicOptFunc(func(t *TopicInfo) { t.Partitions = n })
}

// PartitionsLike gives a topic the application creates the partition
// count of another topic of the topology: a repartition topic that must be
// co-partitioned with a topic its reader also reads, or that takes the
// parallelism of what feeds it, as Kafka Streams sizes its repartition
// topics. Partitions, when also given, wins.
func PartitionsLike(topic string) TopicOpt {
	return topicOptFunc(func(t *TopicInfo) { t.PartitionsLike = topic })
}

// Internal marks a topic as owned by the application (a repartition topic):
// the runtime creates it, and its clocks are pruned to what the topology
// reads downstream.
func Internal() TopicOpt {
	return topicOptFunc(func(t *TopicInfo) { t.Internal = true })
}

// Reply marks a topic as carrying answers back to a processor that asked
// for them, as a foreign-key join's response topic does: what its reader
// does with an answer never sends a new question, so the cycle the topic
// closes ends with each answer. Build does not count a cycle through it as
// one; give it only to topics that keep that promise.
func Reply() TopicOpt {
	return topicOptFunc(func(t *TopicInfo) { t.Reply = true })
}

// Topic declares facts about a topic the processors use. Topics need no
// declaration unless they are internal or must have a set partition count.
func (b *Builder) Topic(name string, opts ...TopicOpt) *Builder {
	if _, dup := b.topics[name]; dup {
		b.errs = append(b.errs, fmt.Errorf("topic %q declared twice", name))
		return b
	}
	t := &TopicInfo{Name: name}
	for _, o := range opts {
		o.applyTopic(t)
	}
	b.topics[name] = t
	b.topicOrder = append(b.topicOrder, name)
	return b
}

// OnBadInput sets what happens to records a processor cannot deserialize,
// for processors that do not say otherwise with OnProcessingError. A
// non-empty deadLetterTopic names the topology's dead-letter topic (as
// DeadLetterTopic does), which DeadLetter needs. Default: FailTask.
func (b *Builder) OnBadInput(policy BadInputPolicy, deadLetterTopic string) *Builder {
	b.badInput = policy
	if deadLetterTopic != "" {
		b.deadLetter = deadLetterTopic
	}
	return b
}

// DeadLetterTopic names the topic every DeadLetter policy of the topology
// writes to. The runtime creates it when missing.
func (b *Builder) DeadLetterTopic(name string) *Builder {
	b.deadLetter = name
	return b
}

// AllowCycles permits processors to form cycles through topics longer than
// a processor reading its own output. Off by default: such cycles are
// usually a wiring mistake, and when meant, every record in them must
// eventually stop producing more.
func (b *Builder) AllowCycles() *Builder {
	b.allowCycles = true
	return b
}

// Topology is a validated, immutable topology.
type Topology struct {
	name       string
	procs      []ProcessorInfo
	topics     map[string]TopicInfo
	badInput   BadInputPolicy
	deadLetter string
	// logical maps the internal topics ForApplication renamed to the
	// names processors know them by.
	logical map[string]string
}

// Name is the topology's name.
func (t *Topology) Name() string { return t.name }

// GlobalTables lists every global table a processor of the topology reads,
// once each, by topic.
func (t *Topology) GlobalTables() []GlobalTable {
	var out []GlobalTable
	for _, p := range t.procs {
		for _, gt := range p.Globals {
			if !slices.Contains(out, gt) {
				out = append(out, gt)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Topic < out[j].Topic })
	return out
}

// ForApplication returns the topology as the application named id runs
// it: every internal topic is named "<id>-<name>", as Kafka Streams names
// its repartition topics after application.id, so that two applications
// running one topology on one cluster each have their own. Processors keep
// the names they were built with: a task maps the topic given to Emit, and
// the Topic of a record it delivers, between the two (see LogicalTopic and
// PhysicalTopic). An empty id, or a topology already renamed, is returned
// as it is.
func (t *Topology) ForApplication(id string) *Topology {
	if id == "" || t.logical != nil {
		return t
	}
	rename := map[string]string{}
	for name, ti := range t.topics {
		if ti.Internal {
			rename[name] = id + "-" + name
		}
	}
	if len(rename) == 0 {
		return t
	}
	to := func(name string) string {
		if r, ok := rename[name]; ok {
			return r
		}
		return name
	}
	out := &Topology{name: t.name, topics: map[string]TopicInfo{}, badInput: t.badInput, deadLetter: t.deadLetter,
		logical: map[string]string{}}
	for name, ti := range t.topics {
		ti.Name = to(name)
		if ti.PartitionsLike != "" {
			ti.PartitionsLike = to(ti.PartitionsLike)
		}
		out.topics[ti.Name] = ti
	}
	for name, phys := range rename {
		out.logical[phys] = name
	}
	for _, p := range t.procs {
		p.Inputs = slices.Clone(p.Inputs)
		for i, in := range p.Inputs {
			p.Inputs[i] = to(in)
		}
		p.Outputs = slices.Clone(p.Outputs)
		for i, o := range p.Outputs {
			o.Topic = to(o.Topic)
			o.FedBy = slices.Clone(o.FedBy)
			for j, f := range o.FedBy {
				o.FedBy[j] = to(f)
			}
			p.Outputs[i] = o
		}
		out.procs = append(out.procs, p)
	}
	return out
}

// LogicalTopic returns the name processors know a topic by: the name
// the topology was built with, where ForApplication renamed it.
func (t *Topology) LogicalTopic(topic string) string {
	if l, ok := t.logical[topic]; ok {
		return l
	}
	return topic
}

// PhysicalTopic returns the name in the cluster of a topic processors
// know by name.
func (t *Topology) PhysicalTopic(name string) string {
	for phys, l := range t.logical {
		if l == name {
			return phys
		}
	}
	return name
}

// Processors describes the processors in the order they were added.
func (t *Topology) Processors() []ProcessorInfo { return slices.Clone(t.procs) }

// Processor returns one processor's description.
func (t *Topology) Processor(name string) (ProcessorInfo, bool) {
	for _, p := range t.procs {
		if p.Name == name {
			return p, true
		}
	}
	return ProcessorInfo{}, false
}

// Topics describes every topic the topology reads or writes, by name.
func (t *Topology) Topics() []TopicInfo {
	out := make([]TopicInfo, 0, len(t.topics))
	for _, ti := range t.topics {
		out = append(out, ti)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Topic describes one topic.
func (t *Topology) Topic(name string) (TopicInfo, bool) {
	ti, ok := t.topics[name]
	return ti, ok
}

// BadInput returns the bad-input policy and the dead-letter topic.
func (t *Topology) BadInput() (BadInputPolicy, string) { return t.badInput, t.deadLetter }

// DeadLetterTopic returns the topic dead-letter policies write to, or ""
// when the topology has none.
func (t *Topology) DeadLetterTopic() string { return t.deadLetter }

// SourceTopics lists the topics that processors read and no processor
// writes: where data enters the topology.
func (t *Topology) SourceTopics() []string {
	written := map[string]bool{}
	for _, p := range t.procs {
		for _, o := range p.Outputs {
			written[o.Topic] = true
		}
	}
	var out []string
	for _, p := range t.procs {
		for _, in := range p.Inputs {
			if !written[in] && !slices.Contains(out, in) {
				out = append(out, in)
			}
		}
	}
	sort.Strings(out)
	return out
}

// PartitionCount returns the partition count the application creates
// topic with: its declared Partitions, else that of the topic it is like
// (PartitionsLike; from known, the counts of topics that exist, or
// declared in turn), else def.
func (t *Topology) PartitionCount(topic string, known map[string]int32, def int32) int32 {
	for range len(t.topics) + 1 { // a chain of likes ends, or loops
		ti, ok := t.topics[topic]
		switch {
		case ok && ti.Partitions > 0:
			return ti.Partitions
		case ok && ti.PartitionsLike != "":
			if n, ok := known[ti.PartitionsLike]; ok {
				return n
			}
			topic = ti.PartitionsLike
			continue
		}
		break
	}
	return def
}

// CheckPartitions checks the topology against the partition counts of its
// topics (from the cluster, or declared): every processor's inputs must have
// the same count, and declared counts must match. Missing counts are errors.
func (t *Topology) CheckPartitions(counts map[string]int32) error {
	var errs []string
	for _, ti := range t.Topics() {
		if ti.Partitions > 0 {
			if c, ok := counts[ti.Name]; ok && c != ti.Partitions {
				errs = append(errs, fmt.Sprintf("topic %q has %d partitions, the topology declares %d", ti.Name, c, ti.Partitions))
			}
		}
	}
	for _, p := range t.procs {
		var parts []string
		var first int32 = -1
		mismatch := false
		for _, in := range p.Inputs {
			c, ok := counts[in]
			if !ok {
				errs = append(errs, fmt.Sprintf("processor %q: partition count of input %q unknown", p.Name, in))
				continue
			}
			parts = append(parts, fmt.Sprintf("%s=%d", in, c))
			if first < 0 {
				first = c
			} else if c != first {
				mismatch = true
			}
		}
		if mismatch {
			errs = append(errs, fmt.Sprintf("processor %q reads %s", p.Name, strings.Join(parts, ", ")))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %s", ErrNotCoPartitioned, strings.Join(errs, "; "))
	}
	return nil
}

// downstreamInputs returns the input topics of every processor reachable
// from topic, sorted.
func (t *Topology) downstreamInputs(topic string) []string {
	seen := map[string]bool{}
	keep := map[string]bool{}
	queue := []string{topic}
	for len(queue) > 0 {
		tp := queue[0]
		queue = queue[1:]
		for _, p := range t.procs {
			if seen[p.Name] || !(slices.Contains(p.Inputs, tp) || slices.ContainsFunc(p.Globals, func(g GlobalTable) bool { return g.Topic == tp })) {
				continue
			}
			seen[p.Name] = true
			for _, in := range p.Inputs {
				keep[in] = true
			}
			for _, gt := range p.Globals {
				keep[gt.Topic] = true
			}
			queue = append(queue, outputTopics(p.Outputs)...)
		}
	}
	out := make([]string, 0, len(keep))
	for k := range keep {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// NodeOptions returns the causal node configuration of one processor's
// tasks: its inputs, its outputs with what feeds them and, for pruned
// outputs, the topics gates downstream read.
func (t *Topology) NodeOptions(processor string) ([]causal.NodeOpt, error) {
	p, ok := t.Processor(processor)
	if !ok {
		return nil, fmt.Errorf("%w: no processor %q", ErrInvalidTopology, processor)
	}
	inputs := slices.Clone(p.Inputs)
	for _, gt := range p.Globals {
		inputs = append(inputs, gt.Topic)
	}
	opts := []causal.NodeOpt{causal.Inputs(inputs...)}
	for _, o := range p.Outputs {
		var oo []causal.OutputOpt
		if o.FedBy != nil {
			oo = append(oo, causal.FedBy(o.FedBy...))
		}
		if o.Prune {
			oo = append(oo, causal.PruneTo(t.downstreamInputs(o.Topic)...))
		}
		opts = append(opts, causal.Output(o.Topic, oo...))
	}
	return opts, nil
}
