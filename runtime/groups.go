package runtime

// The co-partitioned groups of input topics: which processors' tasks go
// together, and which keep state a standby could copy.

import (
	"slices"

	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/runtime/internal/assign"
	"github.com/causeway-stream/causeway/runtime/internal/transport"
)

// stateProcessorsOf returns the processors of the co-partitioned group
// whose first topic is lead that keep stores on disk.
func (w *StreamThread) stateProcessorsOf(lead string) []string {
	var out []string
	for _, pi := range w.topo.Processors() {
		if w.leads[pi.Name] == lead && slices.ContainsFunc(pi.Stores, w.local.onDisk) {
			out = append(out, pi.Name)
		}
	}
	return out
}

// statelessGroups are the first topics of the co-partitioned groups whose
// tasks keep nothing on disk: no copies, no warm-ups.
func (w *StreamThread) statelessGroups() map[string]bool {
	out := map[string]bool{}
	for _, g := range w.groups {
		if len(w.stateProcessorsOf(g[0])) == 0 {
			out[g[0]] = true
		}
	}
	return out
}

// stateReport is what this thread tells the group of its state when it
// joins; see publishStatus.
func (w *StreamThread) stateReport() transport.StateReport {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.report
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
