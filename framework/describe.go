package framework

import (
	"fmt"
	"strings"
)

// Describe returns a readable description of the topology, in the manner of
// Kafka Streams' Topology.describe().
func (t *Topology) Describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Topology: %s\n", t.name)
	fmt.Fprintf(&b, "  Sources: %s\n", strings.Join(t.SourceTopics(), ", "))
	for _, p := range t.procs {
		fmt.Fprintf(&b, "  Processor: %s (one task per partition of %s)\n", p.Name, strings.Join(p.Inputs, ", "))
		for _, in := range p.Inputs {
			fmt.Fprintf(&b, "    <-- %s%s\n", in, t.topicNote(in))
		}
		for _, o := range p.Outputs {
			note := t.topicNote(o.Topic)
			if o.FedBy != nil {
				note += " fed by " + strings.Join(o.FedBy, ", ")
			}
			if o.Prune {
				note += " (clocks pruned)"
			}
			if o.KeepPartition {
				note += " (input partition kept)"
			}
			fmt.Fprintf(&b, "    --> %s%s\n", o.Topic, note)
		}
		for _, s := range p.Stores {
			fmt.Fprintf(&b, "    store: %s (%s)\n", s.Name, s.Kind)
		}
		if p.processingSet {
			fmt.Fprintf(&b, "    on processing error: %s\n", p.processingErrors)
		}
		if p.ProductionErrors != FailTask {
			fmt.Fprintf(&b, "    on production error: %s\n", p.ProductionErrors)
		}
	}
	if t.badInput != FailTask {
		fmt.Fprintf(&b, "  Bad input: %s\n", t.badInput)
	}
	if t.deadLetter != "" {
		fmt.Fprintf(&b, "  Dead letters to: %s\n", t.deadLetter)
	}
	return b.String()
}

func (t *Topology) topicNote(name string) string {
	ti := t.topics[name]
	var parts []string
	if ti.Internal {
		parts = append(parts, "internal")
	}
	switch {
	case ti.Partitions > 0:
		parts = append(parts, fmt.Sprintf("%d partitions", ti.Partitions))
	case ti.PartitionsLike != "":
		parts = append(parts, "partitions as "+ti.PartitionsLike)
	}
	if len(parts) == 0 {
		return ""
	}
	return " [" + strings.Join(parts, ", ") + "]"
}

// Mermaid returns the topology as a Mermaid flowchart: topics as cylinders,
// processors as boxes, stores as notes on their processor.
func (t *Topology) Mermaid() string {
	var b strings.Builder
	b.WriteString("flowchart LR\n")
	id := func(prefix, name string) string {
		r := strings.NewReplacer(".", "_", "-", "_")
		return prefix + "_" + r.Replace(name)
	}
	for _, ti := range t.Topics() {
		fmt.Fprintf(&b, "  %s[(%s)]\n", id("t", ti.Name), ti.Name)
	}
	for _, p := range t.procs {
		label := p.Name
		for _, s := range p.Stores {
			label += "<br/>store: " + s.Name
		}
		fmt.Fprintf(&b, "  %s[%q]\n", id("p", p.Name), label)
		for _, in := range p.Inputs {
			fmt.Fprintf(&b, "  %s --> %s\n", id("t", in), id("p", p.Name))
		}
		for _, o := range p.Outputs {
			fmt.Fprintf(&b, "  %s --> %s\n", id("p", p.Name), id("t", o.Topic))
		}
	}
	return b.String()
}
