package dsl

import (
	"fmt"
	"strings"
)

// A fused processor is named after what it does, so that the topology's
// diagram and the worker's tasks ("<processor>/<partition>") say it: its
// join or aggregation, else where it reads and writes. Named overrides
// that, as Kafka Streams' Named does.

// role is what a stateful step does in its processor.
type role struct {
	rank  int
	label string
}

// The ranks of roles: a processor is named after its highest-ranked one,
// the first added among equals.
const (
	roleTable     = iota + 1 // materializes a table read from a topic
	roleProcess              // a processor of the Processor API (Process)
	roleAggregate            // an aggregation, windowed or not
	roleJoin                 // a join
	roleConflict             // a second name given with Named
)

// plays notes that s's processor does what label says.
func plays[K, V any](s Stream[K, V], rank int, label string) {
	g := s.g.root()
	g.roles = append(g.roles, role{rank: rank, label: label})
}

// Named names the processor that runs s's steps (every step fused with
// them: one processor, one task per partition) in place of the name the
// builder derives from what it does. Names are the processor's tasks'
// and its checkpoint topic's: pin one to keep them when the topology
// changes. Two different names for one processor are an error of Build.
func (s Stream[K, V]) Named(name string) Stream[K, V] {
	g := s.g.root()
	switch {
	case !validName(name):
		s.b.fail("processor name %q: use letters, digits, '.', '_' and '-'", name)
	case g.named != "" && g.named != name:
		s.b.fail("processor named both %q and %q: steps fused in one processor take one name", g.named, name)
	default:
		g.named = name
	}
	return s
}

// Named names the processor that keeps t; see Stream.Named.
func (t Table[K, V]) Named(name string) Table[K, V] {
	t.s.Named(name)
	return t
}

// name is what s is called in the name of a join: the first topic its
// records come from.
func (s Stream[K, V]) name() string {
	if len(s.origins) > 0 {
		return s.origins[0]
	}
	return s.g.root().name
}

func validName(name string) bool {
	if name == "" {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// nameProcessors gives every processor its name: the one Named gave, or
// its highest-ranked role's, or "<input>-to-<output>" for a processor of
// stateless steps. A derived name another processor has already taken
// gets a number.
func (b *Builder) nameProcessors() {
	taken := map[string]bool{}
	for _, g := range b.groups {
		if g.parent == nil && g.named != "" {
			taken[g.named] = true
		}
	}
	for _, g := range b.groups {
		if g.parent != nil {
			continue
		}
		for _, r := range g.roles {
			if r.rank == roleConflict {
				b.fail("processor named both %q and %q: steps fused in one processor take one name", g.named, r.label)
			}
		}
		if g.named != "" {
			g.name = g.named
			continue
		}
		derived := g.derivedName()
		name := derived
		for i := 2; taken[name]; i++ {
			name = fmt.Sprint(derived, "-", i)
		}
		taken[name] = true
		g.name = name
	}
}

// derivedName is what g does, as a name.
func (g *group) derivedName() string {
	best := role{}
	for _, r := range g.roles {
		if r.rank > best.rank {
			best = r
		}
	}
	if best.rank > 0 {
		return best.label
	}
	in := g.name
	if len(g.sources) > 0 {
		in = g.sources[0].topic
	}
	if len(g.sinks) == 0 {
		return in + "-process"
	}
	outs := make([]string, 0, len(g.sinks))
	for _, s := range g.sinks {
		outs = append(outs, s.topic)
	}
	if len(outs) > 2 {
		outs = append(outs[:2], "more")
	}
	return in + "-to-" + strings.Join(outs, "-and-")
}
