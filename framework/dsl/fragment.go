package dsl

import (
	"errors"
	"fmt"

	"github.com/causeway-stream/causeway/framework"
)

// ErrNotOneProcessor is returned by Fragment for steps that do not fit in
// one processor.
var ErrNotOneProcessor = errors.New("dsl: the steps do not make one processor")

// Fragment makes steps of the fluent DSL into a processor for the
// processor-level builder, so that its operators (windows, sessions,
// joins) serve there too. build reads the processor's inputs with From,
// TableFrom or GlobalTableFrom on the builder it is given, and returns the
// stream whose records the processor forwards to every output it is given,
// serialized with that stream's serdes. Fragment returns the processor's
// constructor and the options that declare what the steps read and keep
// (inputs, stores, global tables); add the outputs with framework.To:
//
//	newProc, opts, err := dsl.Fragment(func(f *dsl.Builder) dsl.Stream[operators.Windowed[string], int64] {
//		return dsl.SessionWindowedBy(dsl.From(f, "clicks", text).GroupByKey(), gap).Count("sessions").ToStream()
//	})
//	b.Processor("sessions", newProc, append(opts, framework.To("session-counts"))...)
//
// Steps that need more than one processor (a stateful step after a key
// change, inputs nothing joins or merges together) or write to topics of
// their own (To) are refused with ErrNotOneProcessor: those take a
// topology of the DSL's own.
func Fragment[K, V any](build func(b *Builder) Stream[K, V]) (func() framework.Processor, []framework.ProcessorOpt, error) {
	b := NewBuilder("fragment")
	out := build(b)
	if len(b.errs) > 0 {
		return nil, nil, fmt.Errorf("%w: %w", framework.ErrInvalidTopology, errors.Join(b.errs...))
	}
	g := out.g.root()
	roots := 0
	for _, x := range b.groups {
		if x.parent == nil {
			roots++
		}
	}
	switch {
	case roots != 1:
		return nil, nil, fmt.Errorf("%w: they make %d (a repartition, or inputs nothing joins)", ErrNotOneProcessor, roots)
	case len(g.sinks) > 0:
		return nil, nil, fmt.Errorf("%w: they write to %s themselves; the processor's outputs are declared with framework.To", ErrNotOneProcessor, g.sinks[0].topic)
	}
	out.n.then(func(t *task) (push[K, V], error) {
		return out.writer("to forward", t.ctx.Forward), nil
	})
	opts := []framework.ProcessorOpt{framework.From(g.topics()...), framework.Stores(g.stores...)}
	for _, gt := range g.globals {
		opts = append(opts, framework.Global(gt.Topic, gt.Store))
	}
	return func() framework.Processor { return &fused{g: g} }, opts, nil
}
