package taskmgr

import (
	"fmt"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/store"
)

// Globals is a worker's copy of the topology's global tables: one store
// per table, shared by every task that reads it, and how far each
// partition of their topics has been applied. Its owner applies the
// tables' records (Apply) and tells the manager (AdvanceGlobal); the
// tasks only read.
type Globals struct {
	set     store.Set
	stores  map[string]store.KeyValue // by store name
	byTopic map[string]store.KeyValue
	next    map[causal.Channel]int64
}

// NewGlobals makes empty copies of the topology's global tables, whose
// topics have the given partition counts, kept in memory.
func NewGlobals(topo *framework.Topology, partitions map[string]int32) (*Globals, error) {
	g := &Globals{set: store.NewMemorySet(), stores: map[string]store.KeyValue{}, byTopic: map[string]store.KeyValue{},
		next: map[causal.Channel]int64{}}
	for _, gt := range topo.GlobalTables() {
		n, ok := partitions[gt.Topic]
		if !ok {
			return nil, fmt.Errorf("global table %q: partition count unknown", gt.Topic)
		}
		kv, err := g.set.Store(gt.Store)
		if err != nil {
			return nil, fmt.Errorf("global table %q: %w", gt.Topic, err)
		}
		g.stores[gt.Store], g.byTopic[gt.Topic] = kv, kv
		for p := range n {
			g.next[causal.Channel{Topic: gt.Topic, Partition: p}] = 0
		}
	}
	return g, nil
}

// Channels lists the partitions of every global table, with the offset
// after the last record applied.
func (g *Globals) Channels() map[causal.Channel]int64 {
	out := make(map[causal.Channel]int64, len(g.next))
	for ch, n := range g.next {
		out[ch] = n
	}
	return out
}

// Apply writes a record of a global table's topic into its copy: its
// value under its key, or a deletion for a nil value.
func (g *Globals) Apply(rec framework.Record) error {
	kv, ok := g.byTopic[rec.Topic]
	if !ok {
		return fmt.Errorf("%s is not a global table", rec.Topic)
	}
	var err error
	if rec.Value == nil {
		err = kv.Delete(rec.Key)
	} else {
		err = kv.Put(rec.Key, rec.Value)
	}
	if err != nil {
		return fmt.Errorf("global table %s/%d@%d: %w", rec.Topic, rec.Partition, rec.Offset, err)
	}
	if err := g.set.Commit(nil); err != nil {
		return fmt.Errorf("global table %s: %w", rec.Topic, err)
	}
	g.SetNext(causal.Channel{Topic: rec.Topic, Partition: rec.Partition}, rec.Offset+1)
	return nil
}

// SetNext records that everything of ch before next is applied (past
// transaction markers, say). It never moves a position back.
func (g *Globals) SetNext(ch causal.Channel, next int64) {
	if next > g.next[ch] {
		g.next[ch] = next
	}
}

// Next is the offset after the last applied record of ch.
func (g *Globals) Next(ch causal.Channel) int64 { return g.next[ch] }

// AdvanceGlobal tells the running tasks that read ch's global table how
// far it is applied, and runs what that releases. It reports whether the
// open transaction must abort (see Fail).
func (m *Manager) AdvanceGlobal(ch causal.Channel) (mustAbort bool) {
	if m.cfg.Globals == nil {
		return false
	}
	next := m.cfg.Globals.Next(ch)
	for _, t := range m.tasks {
		if t.state != Running || !t.ReadsGlobal(ch.Topic) {
			continue
		}
		if err := t.task.AdvanceGlobal(ch, next); err != nil && m.Fail(t, err) {
			mustAbort = true
		}
	}
	return mustAbort
}
