package framework

import (
	"fmt"
	"slices"
	"strings"

	"github.com/causeway-stream/causeway/causal"
)

// Build validates the topology and returns it, or an error matching
// ErrInvalidTopology that names every problem found.
func (b *Builder) Build() (*Topology, error) {
	c := newTopologyCheck(b.errs)
	if b.name == "" {
		c.bad("topology has no name")
	}
	for _, p := range b.procs {
		c.processor(p)
	}
	c.declaredTopics(b)
	c.deadLetter(b)
	t := b.assemble()
	if !b.allowCycles {
		if cycle := t.findCycle(); cycle != nil {
			c.bad("processors form a cycle through topics: %s (AllowCycles permits it)", strings.Join(cycle, " -> "))
		}
	}
	if err := c.err(b.name); err != nil {
		return nil, err
	}
	for i := range t.procs {
		for j := range t.procs[i].Outputs {
			o := &t.procs[i].Outputs[j]
			o.Prune = o.Prune || t.topics[o.Topic].Internal
		}
	}
	return t, nil
}

// topologyCheck gathers what Build finds wrong, processor by processor,
// and what it has seen so far.
type topologyCheck struct {
	errs        []error
	procNames   map[string]bool
	storeOwner  map[string]string // store -> the processor declaring it
	globalStore map[string]string // global table topic -> store
	used        map[string]bool   // topics a processor reads or writes
}

func newTopologyCheck(errs []error) *topologyCheck {
	return &topologyCheck{errs: slices.Clone(errs), procNames: map[string]bool{}, storeOwner: map[string]string{},
		globalStore: map[string]string{}, used: map[string]bool{}}
}

func (c *topologyCheck) bad(format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf(format, args...))
}

// err is every problem found, as one error matching ErrInvalidTopology,
// or nil.
func (c *topologyCheck) err(topology string) error {
	if len(c.errs) == 0 {
		return nil
	}
	msgs := make([]string, len(c.errs))
	for i, e := range c.errs {
		msgs[i] = e.Error()
	}
	return fmt.Errorf("%w %q: %s", ErrInvalidTopology, topology, strings.Join(msgs, "; "))
}

// processor checks one processor: its name, inputs, timestamp
// extractors, outputs, stores, global tables, and what an instance of it
// says it uses.
func (c *topologyCheck) processor(p *ProcessorInfo) {
	switch {
	case p.Name == "":
		c.bad("a processor has no name")
	case c.procNames[p.Name]:
		c.bad("processor %q declared twice", p.Name)
	}
	c.procNames[p.Name] = true
	if p.New == nil {
		c.bad("processor %q has no constructor", p.Name)
	}
	ins := c.inputs(p)
	c.timestamps(p, ins)
	outs := c.outputs(p, ins)
	stores := c.stores(p)
	c.globals(p, ins, stores)
	c.instance(p, stores, outs)
}

func (c *topologyCheck) inputs(p *ProcessorInfo) map[string]bool {
	if len(p.Inputs) == 0 {
		c.bad("processor %q has no inputs", p.Name)
	}
	ins := map[string]bool{}
	for _, in := range p.Inputs {
		if err := checkTopicName(in); err != nil {
			c.bad("processor %q input %q: %v", p.Name, in, err)
		}
		if ins[in] {
			c.bad("processor %q reads %q twice", p.Name, in)
		}
		ins[in] = true
		c.used[in] = true
	}
	return ins
}

func (c *topologyCheck) timestamps(p *ProcessorInfo, ins map[string]bool) {
	for topic, src := range p.timestamps {
		switch {
		case !ins[topic]:
			c.bad("processor %q extracts timestamps of %q, which is not one of its inputs", p.Name, topic)
		case src.extract == nil:
			c.bad("processor %q: the timestamp extractor of %q is nil", p.Name, topic)
		}
	}
}

func (c *topologyCheck) outputs(p *ProcessorInfo, ins map[string]bool) map[string]bool {
	outs := map[string]bool{}
	for _, o := range p.Outputs {
		if err := checkTopicName(o.Topic); err != nil {
			c.bad("processor %q output %q: %v", p.Name, o.Topic, err)
		}
		if outs[o.Topic] {
			c.bad("processor %q writes %q twice", p.Name, o.Topic)
		}
		outs[o.Topic] = true
		c.used[o.Topic] = true
		for _, f := range o.FedBy {
			if !ins[f] && !slices.ContainsFunc(p.Globals, func(g GlobalTable) bool { return g.Topic == f }) {
				c.bad("processor %q output %q fed by %q, which is not one of its inputs or global tables", p.Name, o.Topic, f)
			}
		}
	}
	return outs
}

func (c *topologyCheck) stores(p *ProcessorInfo) map[string]bool {
	stores := map[string]bool{}
	for _, s := range p.Stores {
		if s.Name == "" {
			c.bad("processor %q declares a store with no name", p.Name)
		}
		if owner, dup := c.storeOwner[s.Name]; dup {
			c.bad("store %q declared by both %q and %q", s.Name, owner, p.Name)
		}
		c.storeOwner[s.Name] = p.Name
		stores[s.Name] = true
	}
	return stores
}

// globals checks the processor's global tables, and adds their stores to
// stores.
func (c *topologyCheck) globals(p *ProcessorInfo, ins, stores map[string]bool) {
	for _, gt := range p.Globals {
		if err := checkTopicName(gt.Topic); err != nil {
			c.bad("processor %q global table %q: %v", p.Name, gt.Topic, err)
		}
		switch {
		case gt.Store == "":
			c.bad("processor %q reads global table %q into a store with no name", p.Name, gt.Topic)
		case ins[gt.Topic]:
			c.bad("processor %q reads %q both as an input and as a global table", p.Name, gt.Topic)
		case stores[gt.Store]:
			c.bad("processor %q: global table store %q is also one of its stores", p.Name, gt.Store)
		}
		if have, ok := c.globalStore[gt.Topic]; ok && have != gt.Store {
			c.bad("global table %q is kept in two stores, %q and %q", gt.Topic, have, gt.Store)
		}
		if owner, dup := c.storeOwner[gt.Store]; dup {
			c.bad("global table store %q is also the store of %q", gt.Store, owner)
		}
		c.globalStore[gt.Topic] = gt.Store
		stores[gt.Store] = true
		c.used[gt.Topic] = true
	}
}

// instance checks what an instance of the processor says it uses against
// what the processor declares.
func (c *topologyCheck) instance(p *ProcessorInfo, stores, outs map[string]bool) {
	if p.New == nil {
		return
	}
	inst := p.New()
	if inst == nil {
		c.bad("processor %q constructor returned nil", p.Name)
	}
	if su, ok := inst.(StoreUser); ok {
		for _, s := range su.UsesStores() {
			if !stores[s] {
				c.bad("processor %q uses store %q, which it does not declare", p.Name, s)
			}
		}
	}
	if ou, ok := inst.(OutputUser); ok {
		for _, o := range ou.UsesOutputs() {
			if !outs[o] {
				c.bad("processor %q emits to %q, which it does not declare as an output", p.Name, o)
			}
		}
	}
}

// declaredTopics checks that every topic declared is read or written.
func (c *topologyCheck) declaredTopics(b *Builder) {
	for _, name := range b.topicOrder {
		if !c.used[name] {
			c.bad("topic %q is declared but no processor reads or writes it", name)
		}
		if like := b.topics[name].PartitionsLike; like != "" && !c.used[like] {
			c.bad("topic %q takes the partition count of %q, which no processor reads or writes", name, like)
		}
	}
}

// deadLetter checks that a dead-letter policy has its topic, and that no
// processor reads or writes it.
func (c *topologyCheck) deadLetter(b *Builder) {
	dlq := b.badInput == DeadLetter
	for _, p := range b.procs {
		if p.usesDeadLetter() {
			dlq = true
		}
	}
	switch {
	case dlq && b.deadLetter == "":
		c.bad("the dead-letter policy needs a dead-letter topic")
	case b.deadLetter != "" && c.used[b.deadLetter]:
		c.bad("dead-letter topic %q is also read or written by a processor", b.deadLetter)
	}
}

// assemble makes the topology of the builder's processors and topics:
// every topic a processor names, with what was declared of it.
func (b *Builder) assemble() *Topology {
	t := &Topology{name: b.name, topics: map[string]TopicInfo{}, badInput: b.badInput, deadLetter: b.deadLetter}
	for _, p := range b.procs {
		t.procs = append(t.procs, *p)
		globals := make([]string, len(p.Globals))
		for i, gt := range p.Globals {
			globals[i] = gt.Topic
		}
		for _, tn := range append(append(slices.Clone(p.Inputs), outputTopics(p.Outputs)...), globals...) {
			if _, ok := t.topics[tn]; !ok {
				t.topics[tn] = TopicInfo{Name: tn}
			}
		}
	}
	for name, ti := range b.topics {
		t.topics[name] = *ti
	}
	return t
}

func checkTopicName(t string) error {
	switch {
	case t == "":
		return causal.ErrEmptyTopic
	case len(t) > causal.MaxTopicLen:
		return causal.ErrTopicTooLong
	}
	return nil
}

func outputTopics(os []OutputInfo) []string {
	out := make([]string, len(os))
	for i, o := range os {
		out[i] = o.Topic
	}
	return out
}

// findCycle returns a cycle of two or more processors (through topics), or
// nil. A processor that reads its own output is not reported.
func (t *Topology) findCycle() []string {
	next := map[string][]string{} // processor -> processors reading its outputs
	for _, p := range t.procs {
		for _, q := range t.procs {
			if p.Name == q.Name {
				continue
			}
			for _, o := range p.Outputs {
				if t.topics[o.Topic].Reply {
					continue // answers end the cycle they close
				}
				if slices.Contains(q.Inputs, o.Topic) {
					next[p.Name] = append(next[p.Name], q.Name)
					break
				}
			}
		}
	}
	const (
		white = iota
		grey
		black
	)
	color := map[string]int{}
	var stack []string
	var found []string
	var visit func(string) bool
	visit = func(n string) bool {
		color[n] = grey
		stack = append(stack, n)
		for _, m := range next[n] {
			if color[m] == grey {
				i := slices.Index(stack, m)
				found = append(slices.Clone(stack[i:]), m)
				return true
			}
			if color[m] == white && visit(m) {
				return true
			}
		}
		stack = stack[:len(stack)-1]
		color[n] = black
		return false
	}
	for _, p := range t.procs {
		if color[p.Name] == white && visit(p.Name) {
			return found
		}
	}
	return nil
}
