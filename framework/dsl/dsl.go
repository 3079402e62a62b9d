// Package dsl builds topologies from typed streams and tables, in the
// manner of Kafka Streams' StreamsBuilder:
//
//	b := dsl.NewBuilder("wordcount")
//	lines := dsl.From(b, "lines", text)
//	words := dsl.FlatMapValues(lines, split)
//	dsl.GroupBy(words, byWord).Count("word-counts").ToStream().To("counts")
//	topo, err := b.Build()
//
// Steps that change the type of a stream are functions (Go methods cannot
// take type parameters); steps that keep it are methods.
//
// Consecutive steps run fused, in one processor: one task per partition,
// one causal gate in front of them, no topic between them, and keys and
// values handed from step to step as Go values. A new processor starts only
// where the data must move between tasks: a stateful step (Count, Reduce,
// Aggregate, a windowed aggregation, a join) after a step that may have
// changed the key (Map, FlatMap, SelectKey, GroupBy) reads an internal
// repartition topic, named after the store or join that needs it
// ("<store>-repartition"; the worker puts its application id in front, as
// for every internal topic) and sized like what it must be co-partitioned
// with. Stores are declared by the step that owns them.
//
// Beyond the stateless steps there are aggregations (Count, Reduce,
// Aggregate), time, session and sliding windows (WindowedBy,
// SessionWindowedBy, SlidingWindowedBy, each with EmitOnWindowClose),
// joins of streams and tables (Join, JoinStreams, JoinTables and their
// left and outer forms) and global tables (GlobalTableFrom, JoinGlobal),
// all following Kafka Streams' semantics. Fragment makes DSL steps one
// processor for the processor-level builder.
//
// To the causal layer a fused processor is one processor: what it emits is
// stamped with what it has delivered, as for any processor, and its
// outputs are fed only by the inputs whose records can reach them.
//
// Builder embeds the processor-level framework.Builder, so custom
// processors (Processor, Topic and the rest) can be added beside fused
// ones and read or write the same topics.
package dsl

import (
	"errors"
	"fmt"
	"slices"

	"github.com/causeway-stream/causeway/framework"
)

// ErrBuilt is returned by Build when it is called a second time.
var ErrBuilt = errors.New("dsl: builder already built")

// Builder collects typed streams and tables and the processors they fuse
// into. It is not safe for concurrent use.
type Builder struct {
	*framework.Builder
	name   string
	groups []*group
	// streams holds the source stream of each topic read with From or
	// TableFrom, so that a topic read twice is read by one processor.
	streams map[string]any
	// repartitions are the repartition topics the steps need.
	repartitions []repartitionTopic
	errs         []error
	built        bool
}

// repartitionTopic is an internal topic the DSL writes records to by key
// and reads back, and the topic whose partition count it takes, or the
// count it was given (Stream.Repartition).
type repartitionTopic struct {
	topic, like string
	partitions  int32
	// reply: the topic carries answers back (framework.Reply), as a
	// foreign-key join's response topic does.
	reply bool
}

// NewBuilder starts a topology called name.
func NewBuilder(name string) *Builder {
	return &Builder{Builder: framework.NewBuilder(name), name: name, streams: map[string]any{}}
}

// Build turns every fused processor into a framework processor, adds it to
// the embedded builder, and builds the topology: an error matching
// framework.ErrInvalidTopology names every problem found.
func (b *Builder) Build() (*framework.Topology, error) {
	if b.built {
		return nil, ErrBuilt
	}
	b.built = true
	b.declareRepartitions()
	b.nameProcessors()
	for _, g := range b.groups {
		if g.parent != nil {
			continue // merged into another
		}
		opts := []framework.ProcessorOpt{framework.From(g.topics()...), framework.Stores(g.stores...)}
		for _, s := range g.sinks {
			opts = append(opts, framework.To(s.topic, append(slices.Clone(s.opts), framework.FedBy(s.fedBy...))...))
		}
		for _, gt := range g.globals {
			opts = append(opts, framework.Global(gt.Topic, gt.Store))
		}
		g := g
		b.Builder.Processor(g.name, func() framework.Processor { return &fused{g: g} }, opts...)
	}
	topo, err := b.Builder.Build()
	if len(b.errs) > 0 {
		errs := errors.Join(b.errs...)
		if err != nil {
			errs = errors.Join(errs, err)
		}
		return nil, fmt.Errorf("%w %q: %w", framework.ErrInvalidTopology, b.name, errs)
	}
	return topo, err
}

// declareRepartitions declares the repartition topics, each with the
// partition count of a topic its reader reads that is not a repartition
// topic (they must be co-partitioned), or else of the topic it was fed
// from, as Kafka Streams sizes them.
func (b *Builder) declareRepartitions() {
	internal := map[string]bool{}
	for _, r := range b.repartitions {
		internal[r.topic] = true
	}
	likeOf := map[string]string{}
	for _, r := range b.repartitions {
		likeOf[r.topic] = r.like
		if r.partitions > 0 {
			likeOf[r.topic] = r.topic // its own count, which others take
		}
	}
	for _, r := range b.repartitions {
		opts := []framework.TopicOpt{framework.Internal()}
		if r.reply {
			opts = append(opts, framework.Reply())
		}
		if r.partitions > 0 {
			b.Builder.Topic(r.topic, append(opts, framework.Partitions(r.partitions))...)
			continue
		}
		like := r.like
		for _, g := range b.groups {
			if g.parent != nil || !slices.Contains(g.topics(), r.topic) {
				continue
			}
			// Every input of the reader takes one count: that of the first
			// input that is not a repartition topic, or else what its first
			// repartition topic is fed from.
			external, first := "", ""
			for _, in := range g.topics() {
				switch {
				case !internal[in] && external == "":
					external = in
				case internal[in] && first == "":
					first = in
				}
			}
			if like = external; like == "" {
				like = likeOf[first]
			}
		}
		if like != "" && like != r.topic {
			opts = append(opts, framework.PartitionsLike(like))
		}
		b.Builder.Topic(r.topic, opts...)
	}
}

func (b *Builder) fail(format string, args ...any) {
	b.errs = append(b.errs, fmt.Errorf(format, args...))
}

// group is one fused processor: the source topics it reads, what it
// writes and the stores it owns. Streams that must run together (a merge,
// a join) put their groups together.
type group struct {
	parent *group
	// name is the first topic the group read, until Build names it.
	name string
	// named is the name Named gave it; roles are what its stateful steps
	// do, in the order added, for the name Build derives.
	named   string
	roles   []role
	sources []source
	sinks   []*sink
	stores  []framework.StoreSpec
	globals []framework.GlobalTable
}

// source is one input topic of a group and how a task reads its records.
type source struct {
	topic string
	open  func(t *task) (func(m *meta) error, error)
}

// sink is one output topic of a group: which of its inputs feed it, and
// how it is written.
type sink struct {
	topic string
	fedBy []string
	opts  []framework.OutputOpt
}

func (b *Builder) newGroup(name string) *group {
	g := &group{name: name}
	b.groups = append(b.groups, g)
	return g
}

// root returns the group g has been merged into, or g.
func (g *group) root() *group {
	for g.parent != nil {
		g = g.parent
	}
	return g
}

// union puts the groups of a and c together and returns the result.
func union(a, c *group) *group {
	a, c = a.root(), c.root()
	if a == c {
		return a
	}
	c.parent = a
	a.roles = append(a.roles, c.roles...)
	if a.named == "" {
		a.named = c.named
	} else if c.named != "" && c.named != a.named {
		a.roles = append(a.roles, role{rank: roleConflict, label: c.named})
	}
	a.sources = append(a.sources, c.sources...)
	a.stores = append(a.stores, c.stores...)
	for _, gt := range c.globals {
		a.addGlobal(gt)
	}
	for _, s := range c.sinks {
		a.addSink(s.topic, s.fedBy, s.opts)
	}
	c.sources, c.stores, c.sinks, c.globals = nil, nil, nil, nil
	return a
}

// addGlobal notes that the group reads a global table.
func (g *group) addGlobal(gt framework.GlobalTable) {
	if !slices.Contains(g.globals, gt) {
		g.globals = append(g.globals, gt)
	}
}

func (g *group) topics() []string {
	out := make([]string, len(g.sources))
	for i, s := range g.sources {
		out[i] = s.topic
	}
	return out
}

// addSink notes that the inputs fedBy write to topic; several streams of
// one processor writing one topic make one output.
func (g *group) addSink(topic string, fedBy []string, opts []framework.OutputOpt) {
	for _, s := range g.sinks {
		if s.topic == topic {
			for _, f := range fedBy {
				if !slices.Contains(s.fedBy, f) {
					s.fedBy = append(s.fedBy, f)
				}
			}
			return
		}
	}
	g.sinks = append(g.sinks, &sink{topic: topic, fedBy: slices.Clone(fedBy), opts: opts})
}

// meta is what travels beside a key and a value from step to step: the
// input record that set the steps off (its timestamp and headers go to
// what is emitted), whether the value is a table's deletion, and, for a
// table's change, whether the key had a row before it.
type meta struct {
	rec       framework.Record
	tombstone bool
	prior     bool
	// old is a table row's value before this change, serialized, when
	// prior and a step after the table asked for it (node.wantsOld).
	old []byte
}

// push hands one key and value to the next step of a task.
type push[K, V any] func(k K, v V, m *meta) error

// task is what the steps of one task share.
type task struct {
	ctx framework.Context
	// opened holds the push of each node opened so far, so that a node
	// reached twice (after a merge) runs once per task.
	opened map[any]any
	// closers close what steps opened, when the task closes.
	closers []func() error
}

// node is the point of a pipeline a Stream or Table stands for: the steps
// attached after it.
type node[K, V any] struct {
	next []func(t *task) (push[K, V], error)
	// wantsPrior is set on a table's node when a step after it needs to
	// know whether a changed key had a row before (meta.prior).
	wantsPrior bool
	// wantsOld is set on a table's node when a step after it needs the
	// changed key's row as it was (meta.old), as a regrouping does to
	// subtract it from its group.
	wantsOld bool
}

func newNode[K, V any]() *node[K, V] { return &node[K, V]{} }

// then attaches a step after n.
func (n *node[K, V]) then(step func(t *task) (push[K, V], error)) {
	n.next = append(n.next, step)
}

// open makes the task's push for n: the steps after it, in the order they
// were attached.
func (n *node[K, V]) open(t *task) (push[K, V], error) {
	if p, ok := t.opened[n]; ok {
		return p.(push[K, V]), nil
	}
	var p push[K, V]
	switch len(n.next) {
	case 0:
		p = func(K, V, *meta) error { return nil }
	case 1:
		var err error
		if p, err = n.next[0](t); err != nil {
			return nil, err
		}
	default:
		ps := make([]push[K, V], len(n.next))
		for i, step := range n.next {
			var err error
			if ps[i], err = step(t); err != nil {
				return nil, err
			}
		}
		p = func(k K, v V, m *meta) error {
			for _, next := range ps {
				if err := next(k, v, m); err != nil {
					return err
				}
			}
			return nil
		}
	}
	t.opened[n] = p
	return p, nil
}

// fused is the framework processor of one group.
type fused struct {
	g *group
	// one is the push of a processor with one input, in.
	one func(m *meta) error
	in  map[string]func(m *meta) error
	m   meta
	// t is what the steps of the task share, kept for Close.
	t *task
}

var (
	_ framework.StoreUser  = (*fused)(nil)
	_ framework.OutputUser = (*fused)(nil)
)

func (f *fused) Init(ctx framework.Context) error {
	t := &task{ctx: ctx, opened: map[any]any{}}
	f.t = t
	f.in = map[string]func(*meta) error{}
	for _, s := range f.g.sources {
		p, err := s.open(t)
		if err != nil {
			return fmt.Errorf("processor %q: %w", f.g.name, err)
		}
		f.in[s.topic] = p
	}
	if len(f.in) == 1 {
		f.one = f.in[f.g.sources[0].topic]
	}
	return nil
}

func (f *fused) Process(_ framework.Context, rec framework.Record) error {
	f.m = meta{rec: rec}
	if f.one != nil {
		return f.one(&f.m)
	}
	p, ok := f.in[rec.Topic]
	if !ok {
		return fmt.Errorf("processor %q does not read %s", f.g.name, rec.Topic)
	}
	return p(&f.m)
}

// Close closes what the steps opened (the processors of Process), the
// last opened first.
func (f *fused) Close() error {
	if f.t == nil {
		return nil
	}
	var errs []error
	for i := len(f.t.closers) - 1; i >= 0; i-- {
		errs = append(errs, f.t.closers[i]())
	}
	f.t.closers = nil
	return errors.Join(errs...)
}

// UsesStores lets Build check the stores are declared.
func (f *fused) UsesStores() []string {
	out := make([]string, len(f.g.stores))
	for i, s := range f.g.stores {
		out[i] = s.Name
	}
	return out
}

// UsesOutputs lets Build check the outputs are declared.
func (f *fused) UsesOutputs() []string {
	out := make([]string, len(f.g.sinks))
	for i, s := range f.g.sinks {
		out[i] = s.topic
	}
	return out
}
