package task

import (
	"errors"
	"fmt"
	"time"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/store"
)

// New builds a task. Restore its state with RestoreStore and RestoreGate,
// seed its channels with Seed, then call Start before the first Receive.
func New(cfg Config) (*Task, error) {
	info, err := cfg.check()
	if err != nil {
		return nil, err
	}
	policy, _ := cfg.Topology.BadInput()
	node, err := newNode(cfg, info)
	if err != nil {
		return nil, err
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
		versioned:   map[string]store.Versioned{},
		specs:       map[string]framework.StoreSpec{},
		stampSlabs:  slabs[byte]{size: stampSlabLen, keep: keptStampSlabs},
		headerSlabs: slabs[framework.Header]{size: headerSlabLen, keep: keptHeaderSlabs},
	}
	t.ctx = &taskContext{t: t}
	// Where causal order leaves a choice, the smallest timestamp goes
	// first, as Kafka Streams chooses among its partitions.
	node.PreferBy(func(a, b int32) bool { return t.held[a].rec.Timestamp.Before(t.held[b].rec.Timestamp) })
	t.wireTopics()
	if err := t.openStores(); err != nil {
		return nil, err
	}
	return t, nil
}

// check fills in cfg's defaults and returns its processor, or what is
// missing.
func (cfg *Config) check() (framework.ProcessorInfo, error) {
	if cfg.Topology == nil {
		return framework.ProcessorInfo{}, errors.New("task: no topology")
	}
	info, ok := cfg.Topology.Processor(cfg.Processor)
	if !ok {
		return info, fmt.Errorf("task: no processor %q in topology %q", cfg.Processor, cfg.Topology.Name())
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Observer == nil {
		cfg.Observer = nopObserver{}
	}
	if len(info.Outputs) > 0 && cfg.OutputPartitions == nil {
		return info, errors.New("task: OutputPartitions is required for a processor with outputs")
	}
	for _, gt := range info.Globals {
		if cfg.Globals[gt.Store] == nil {
			return info, fmt.Errorf("task: processor %q reads global table %q, and the task was given no store %q for it", info.Name, gt.Topic, gt.Store)
		}
	}
	if cfg.DeadLetterTopic == "" {
		cfg.DeadLetterTopic = cfg.Topology.DeadLetterTopic()
	}
	if len(cfg.Skip) > 0 && cfg.DeadLetterTopic == "" {
		return info, errors.New("task: skipping a record needs a dead-letter topic")
	}
	return info, nil
}

// newNode builds the task's gate with the topology's options for its
// processor and the task's own (gate off, claims checked on the inputs
// where causality enters the topology).
func newNode(cfg Config, info framework.ProcessorInfo) (*causal.Node[int32], error) {
	opts, err := cfg.Topology.NodeOptions(cfg.Processor)
	if err != nil {
		return nil, fmt.Errorf("task: %w", err)
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
	return node, nil
}

// wireTopics sets up the task's outputs, the logical names of its inputs,
// its dead-letter output and the global tables it reads.
func (t *Task) wireTopics() {
	cfg, info := &t.cfg, t.info
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
	if cfg.DeadLetterTopic != "" {
		t.dlq = &output{topic: cfg.DeadLetterTopic}
	}
	for _, gt := range info.Globals {
		if t.globals == nil {
			t.globals, t.globalTopics = map[string]store.KeyValue{}, map[string]bool{}
		}
		t.globals[gt.Store], t.globalTopics[gt.Topic] = store.ReadOnly(cfg.Globals[gt.Store]), true
	}
}

// openStores opens the processor's stores in the task's set (a set of its
// own in memory when it was given none).
func (t *Task) openStores() error {
	if t.set == nil {
		t.set, t.ownSet = store.NewMemorySet(), true
	}
	for _, s := range t.info.Stores {
		m, err := t.set.Store(s.Name)
		if err != nil {
			return errors.Join(fmt.Errorf("task %s: store %q: %w", t.id, s.Name, err), t.closeSet())
		}
		m = store.Limit(m, s.Name, t.cfg.MaxRecordBytes)
		t.kv[s.Name], t.specs[s.Name] = m, s
		switch s.Kind {
		case framework.WindowKind:
			t.windows[s.Name] = store.NewWindow(m, store.SegmentFor(s.Retention))
		case framework.VersionedKind:
			t.versioned[s.Name] = store.NewVersioned(m, s.Retention)
		}
	}
	return nil
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
