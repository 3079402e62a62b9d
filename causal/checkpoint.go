package causal

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
)

// checkpointVersion is the first byte of every checkpoint this build writes.
const checkpointVersion byte = 1

// Checkpoint returns what the node must not lose across a crash, as bytes to
// write in the same transaction as the offsets from Committable: the
// advertised clock of every output. Frontiers are not in it; on a restart
// they are seeded from the committed offsets.
//
// Layout: version byte, uvarint number of outputs, then per output in name
// order: uvarint name length, name, uvarint clock length, encoded clock.
func (n *Node[P]) Checkpoint() []byte {
	order := make([]int, len(n.outputs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(n.outputs[a].name, n.outputs[b].name) })
	buf := []byte{checkpointVersion}
	buf = binary.AppendUvarint(buf, uint64(len(n.outputs)))
	var clock []byte
	for _, oi := range order {
		o := &n.outputs[oi]
		buf = binary.AppendUvarint(buf, uint64(len(o.name)))
		buf = append(buf, o.name...)
		clock = appendEntries(clock[:0], n.advertised(oi))
		buf = binary.AppendUvarint(buf, uint64(len(clock)))
		buf = append(buf, clock...)
	}
	return buf
}

// advertised returns the advertised clock of output oi as sorted entries.
func (n *Node[P]) advertised(oi int) []Entry {
	o := &n.outputs[oi]
	var es []Entry
	for _, tid := range n.sorted {
		for _, p := range o.adv[tid] {
			es = append(es, Entry{Channel: Channel{Topic: n.topics[tid].name, Partition: p.part}, Offset: p.off})
		}
	}
	return es
}

// Advertised returns the advertised clock of output: the join of the clocks
// of every record received on an input that feeds it.
func (n *Node[P]) Advertised(output string) (Clock, error) {
	oi, ok := n.outIdx[output]
	if !ok {
		return Clock{}, fmt.Errorf("causal: advertised %q: %w", output, ErrUnknownOutput)
	}
	return Clock{entries: n.advertised(oi)}, nil
}

// Restore joins a checkpoint into the node's advertised clocks. Call it on a
// new node, before seeding and receiving. Outputs in the checkpoint that the
// node no longer has are ignored. It fails with ErrBadCheckpoint when the
// bytes do not parse, or when the node has an output the checkpoint lacks:
// the records received before the checkpoint were never folded into such an
// output, so its stamps would claim too little.
func (n *Node[P]) Restore(b []byte) error {
	if n.err != nil {
		return n.err
	}
	bad := func(what string, err error) error {
		if err != nil {
			return fmt.Errorf("causal: restore: %s: %w: %w", what, ErrBadCheckpoint, err)
		}
		return fmt.Errorf("causal: restore: %s: %w", what, ErrBadCheckpoint)
	}
	d := decoder{b: b}
	if len(b) == 0 || b[0] != checkpointVersion {
		return bad("unknown version", nil)
	}
	d.pos = 1
	count, err := d.count(2)
	if err != nil {
		return bad("output count", err)
	}
	clocks := make(map[string]Clock, count)
	for range count {
		nameLen, err := d.count(1)
		if err != nil {
			return bad("output name", err)
		}
		name := string(b[d.pos : d.pos+nameLen])
		d.pos += nameLen
		clockLen, err := d.count(1)
		if err != nil {
			return bad("clock of "+name, err)
		}
		c, err := DecodeClock(b[d.pos : d.pos+clockLen])
		if err != nil {
			return bad("clock of "+name, err)
		}
		d.pos += clockLen
		clocks[name] = c
	}
	if d.pos != len(b) {
		return bad("trailing bytes", nil)
	}
	for _, o := range n.outputs {
		if _, ok := clocks[o.name]; !ok {
			return bad(fmt.Sprintf("no advertised clock for output %q", o.name), nil)
		}
	}
	for oi := range n.outputs {
		es := clocks[n.outputs[oi].name].entries
		for i := 0; i < len(es); {
			j := groupEnd(es, i)
			tid := n.intern(es[i].Channel.Topic)
			o := &n.outputs[oi]
			if o.keepAll || o.keep[tid] {
				o.foldGroup(tid, n.partsOf(es[i:j]))
			}
			i = j
		}
	}
	return nil
}
