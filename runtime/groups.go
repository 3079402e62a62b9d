package runtime

// The co-partitioned groups of input topics: which processors' tasks go
// together, and which keep state a standby could copy.

import (
	"slices"

	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/runtime/internal/assign"
)

// topicGroups are a topology's co-partitioned groups of input topics, and
// for each processor its group's first topic (its lead), which names the
// processor's tasks to the group's balancer. It does not change once
// built.
type topicGroups struct {
	topo   *framework.Topology
	groups [][]string
	leads  map[string]string
	// onDisk says whether a store keeps its state on disk.
	onDisk func(framework.StoreSpec) bool
}

// newTopicGroups groups topo's input topics (copartitioned) and finds each
// processor's lead.
func newTopicGroups(topo *framework.Topology, onDisk func(framework.StoreSpec) bool) topicGroups {
	g := topicGroups{topo: topo, groups: copartitioned(topo), leads: map[string]string{}, onDisk: onDisk}
	for _, pi := range topo.Processors() {
		for _, group := range g.groups {
			if slices.Contains(group, pi.Inputs[0]) {
				g.leads[pi.Name] = group[0]
			}
		}
	}
	return g
}

// lead is the first topic of processor's group.
func (g topicGroups) lead(processor string) string { return g.leads[processor] }

// stateProcessorsOf returns the processors of the co-partitioned group
// whose first topic is lead that keep stores on disk.
func (g topicGroups) stateProcessorsOf(lead string) []string {
	var out []string
	for _, pi := range g.topo.Processors() {
		if g.leads[pi.Name] == lead && slices.ContainsFunc(pi.Stores, g.onDisk) {
			out = append(out, pi.Name)
		}
	}
	return out
}

// stateless are the first topics of the co-partitioned groups whose tasks
// keep nothing on disk: no copies, no warm-ups.
func (g topicGroups) stateless() map[string]bool {
	out := map[string]bool{}
	for _, group := range g.groups {
		if len(g.stateProcessorsOf(group[0])) == 0 {
			out[group[0]] = true
		}
	}
	return out
}

// copartitioned groups the topology's input topics whose partitions of one
// index must be read by one worker: a processor's inputs, joined over the
// topics processors share.
func copartitioned(topo *framework.Topology) [][]string {
	var sets [][]string
	for _, pi := range topo.Processors() {
		sets = append(sets, pi.Inputs)
	}
	return assign.Groups(sets)
}
