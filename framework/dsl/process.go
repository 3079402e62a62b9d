package dsl

import (
	"fmt"
	"time"

	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/serde"
)

// Process puts a processor of the Processor API in the middle of a chain
// (Kafka Streams' KStream.process): each record of s reaches it with its
// key and value written by s's serdes, its timestamp and headers; what it
// forwards, from Process or from a punctuation, goes on read with codec.
// newProcessor makes one processor a task, which the task closes when it
// closes. The processor owns the stores given (framework.KeyValueStore,
// framework.WindowStore), which it opens from its Context as it would
// alone; Emit to a named output is refused (framework.ErrUnknownOutput):
// the chain after Process is its one output. Since the processor may
// change keys, a step after it that needs its records by key
// repartitions them first, as Kafka Streams does.
func Process[K, V, K2, V2 any](s Stream[K, V], name string, newProcessor func() framework.Processor, codec serde.Codec[K2, V2], stores ...framework.StoreSpec) Stream[K2, V2] {
	if codec.Key == nil || codec.Value == nil {
		s.b.fail("process %s: its codec needs a key and a value serde", name)
	}
	g := s.g.root()
	g.stores = append(g.stores, stores...)
	plays(s, roleProcess, "process-"+name)
	out := step(s, codec, func(t *task, next push[K2, V2]) (push[K, V], error) {
		pc := &processContext[K2, V2]{Context: t.ctx, name: name, codec: codec, next: next}
		p := newProcessor()
		if err := p.Init(pc); err != nil {
			return nil, fmt.Errorf("process %s: init: %w", name, err)
		}
		t.closers = append(t.closers, p.Close)
		return func(k K, v V, m *meta) error {
			rec := m.rec
			var err error
			if rec.Key, err = keyBytes(s, k, m); err != nil {
				return err
			}
			if m.tombstone || (s.rawValue && m.rec.Value == nil) {
				rec.Value = nil
			} else if rec.Value, err = s.codec.Value.Serialize(v); err != nil {
				return fmt.Errorf("process %s: serialize value: %w", name, err)
			}
			pc.in = m
			defer func() { pc.in = nil }()
			return p.Process(pc, rec)
		}, nil
	})
	out.rekeyed = true
	return out
}

// processContext is the Context of a processor put in a chain: what it
// forwards goes to the next step.
type processContext[K, V any] struct {
	framework.Context
	name  string
	codec serde.Codec[K, V]
	next  push[K, V]
	// in is the record being processed; nil in a punctuation.
	in *meta
}

// Forward hands rec to the next step of the chain.
func (c *processContext[K, V]) Forward(rec framework.Record) error {
	k, err := c.codec.Key.Deserialize(rec.Key)
	if err != nil {
		return fmt.Errorf("process %s: forwarded key: %w", c.name, err)
	}
	v, err := c.codec.Value.Deserialize(rec.Value)
	if err != nil {
		return fmt.Errorf("process %s: forwarded value: %w", c.name, err)
	}
	m := meta{rec: rec, tombstone: rec.Value == nil}
	if c.in != nil {
		// Where the record came from stays the input's, for the drop
		// reports and errors of the steps after.
		m.rec.Topic, m.rec.Partition, m.rec.Offset = c.in.rec.Topic, c.in.rec.Partition, c.in.rec.Offset
	}
	return c.next(k, v, &m)
}

// Emit refuses every named output: the chain is the processor's one
// output.
func (c *processContext[K, V]) Emit(output string, _ framework.Record) error {
	return fmt.Errorf("process %s: output %q: %w (forward to the chain)", c.name, output, framework.ErrUnknownOutput)
}

// Outputs lists none: see Emit.
func (c *processContext[K, V]) Outputs() []string { return nil }

// Schedule schedules fn with this Context, so that what it forwards goes
// on down the chain.
func (c *processContext[K, V]) Schedule(interval time.Duration, typ framework.PunctuationType, fn framework.Punctuator) (framework.Cancel, error) {
	return c.Context.Schedule(interval, typ, func(_ framework.Context, now time.Time) error { return fn(c, now) })
}
