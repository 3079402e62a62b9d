// Stamps: the clock each output advertises, folded from what the node
// received, encoded once and patched as frontiers move.

package causal

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"
)

type outputState struct {
	name    string
	keepAll bool
	keepSet map[string]bool
	keep    []bool         // by topic id, when !keepAll
	adv     [][]partOffset // advertised clock, by topic id, sorted by partition
	// inputsOf holds, by topic id, the channel indexes whose frontier is
	// stamped on this output, each list sorted by partition, so a stamp
	// merges them with the advertised entries without sorting.
	inputsOf [][]int32

	// The stamp as last encoded, and each of its topic groups, so that a
	// stamp re-encodes only the groups whose entries changed since. A group
	// of topic tid goes stale when adv[tid] changes or the frontier of a
	// channel in inputsOf[tid] moves (staleGroup); enc is up to date when
	// no group is stale and no rebuild is due. A stale group whose encoding
	// keeps its length is written over its old bytes in enc, at groupAt;
	// any other change (a topic added, a group growing, shrinking,
	// appearing or emptying) builds enc again from the groups.
	groupEnc   [][]byte // by topic id; empty when the stamp has no such group
	groupFresh []bool   // by topic id; false when stale or a rebuild is due
	groupAt    []int    // by topic id: where the group starts in enc
	stale      []int32  // the topics whose groups went stale since enc was made
	enc        []byte
	rebuild    bool // enc has to be built from the groups (true until first built)

	// A moved frontier changes one entry's offset and nothing else, so
	// it is written over the old varint where the two have the same
	// length, in the group's encoding and in enc, without encoding the
	// group again. spots says, by channel index, where each stamped
	// frontier's varint lies; patches lists the channels whose frontier
	// moved since enc was made (see frontierMoved and encodeStamp).
	spots   []stampSpot
	patches []int32
}

// stampSpot is where the offset of one input channel's entry lies in its
// topic group's encoding (groupEnc), as last encoded.
type stampSpot struct {
	at     int32 // where the offset varint starts in the group's encoding
	size   uint8 // its length in bytes; 0 when the stamp has no entry of the channel
	queued bool  // listed in patches
	// off is the offset written: the frontier joined with the advertised
	// entry of the same partition. The advertised entry cannot change
	// while the group stays fresh (a fold marks it stale), so the offset
	// after the frontier moves to f is max(f, off).
	off int64
}

// frontierMoved notes that the frontier of channel ci, of topic tid, moved:
// its entry is written in place by the next encodeStamp, or, where the
// group has no such entry yet, the group goes stale.
func (o *outputState) frontierMoved(tid, ci int32) {
	if !o.groupFresh[tid] {
		return // encoded again anyway
	}
	if int(ci) >= len(o.spots) || o.spots[ci].size == 0 {
		o.staleGroup(tid)
		return
	}
	if sp := &o.spots[ci]; !sp.queued {
		sp.queued = true
		o.patches = append(o.patches, ci)
	}
}

// uvarintLen is the length of the minimal uvarint encoding of v.
func uvarintLen(v uint64) int { return (bits.Len64(v|1) + 6) / 7 }

// putUvarintAt writes the uvarint encoding of v over b from at, as far as
// b reaches (it reaches far enough unless a mutant writes a longer one).
func putUvarintAt(b []byte, at int, v uint64) {
	for ; at < len(b); at++ {
		if v < 0x80 {
			b[at] = byte(v)
			return
		}
		b[at] = byte(v) | 0x80
		v >>= 7
	}
}

// staleGroup marks the stamp group of topic tid, and so the stamp, as
// needing to be encoded again.
func (o *outputState) staleGroup(tid int32) {
	if o.groupFresh[tid] {
		o.groupFresh[tid] = false
		o.stale = append(o.stale, tid)
	}
}

// stampedInputs returns output o's input channels of topic tid, sorted by
// partition.
func (o *outputState) stampedInputs(tid int32) []int32 {
	if int(tid) >= len(o.inputsOf) {
		return nil
	}
	return o.inputsOf[tid]
}

// foldGroupInto joins parts, the entries of topic et, into the advertised
// clocks of the outputs in feeds.
func (n *Node[P]) foldGroupInto(feeds []int32, et int32, parts []partOffset) {
	for _, oi := range feeds {
		o := &n.outputs[oi]
		if o.keepAll || o.keep[et] {
			o.foldGroup(et, parts)
		}
	}
}

// foldGroup joins parts, entries of topic tid sorted by partition, into the
// advertised clock, and marks the stamp group stale if that raised or added
// an entry.
func (o *outputState) foldGroup(tid int32, parts []partOffset) {
	dst, k, changed := o.adv[tid], 0, false
	for _, e := range parts {
		for k < len(dst) && dst[k].part < e.part {
			k++
		}
		if k < len(dst) && dst[k].part == e.part {
			if e.off > dst[k].off {
				dst[k].off, changed = e.off, true
			}
			continue
		}
		dst, changed = slices.Insert(dst, k, e), true
	}
	o.adv[tid] = dst
	if changed {
		o.staleGroup(tid)
	}
}

// Stamp returns the clock to write on a record emitted to output: its
// advertised clock joined with the frontiers of the inputs that feed it.
func (n *Node[P]) Stamp(output string) (Clock, error) {
	oi, ok := n.outIdx[output]
	if !ok {
		return Clock{}, fmt.Errorf("causal: stamp %q: %w", output, ErrUnknownOutput)
	}
	o := &n.outputs[oi]
	var es []Entry
	for _, tid := range n.sorted {
		name := n.topics[tid].name
		for _, p := range n.stampGroup(o, tid) {
			es = append(es, Entry{Channel: Channel{Topic: name, Partition: p.part}, Offset: p.off})
		}
	}
	return Clock{entries: es}, nil
}

// AppendStamp appends the encoded stamp for output to dst, ready to be the
// value of the HeaderKey header: the encoding of what Stamp returns. It
// keeps the last encoding of each output's stamp, and of each topic group in
// it, and encodes again only the groups whose entries changed since; it does
// not allocate when dst has room and the node is warm.
func (n *Node[P]) AppendStamp(dst []byte, output string) ([]byte, error) {
	oi, ok := n.output(output)
	if !ok {
		return dst, fmt.Errorf("causal: stamp %q: %w", output, ErrUnknownOutput)
	}
	o := &n.outputs[oi]
	if o.rebuild || len(o.stale) > 0 || len(o.patches) > 0 {
		n.encodeStamp(o)
	}
	return append(dst, o.enc...), nil
}

// encodeStamp brings o.enc up to date. First the moved frontiers of fresh
// groups are written over their old offsets where the new one has the same
// length; a group where one does not goes stale. Then the stale groups are
// encoded again and, where each kept its length, written over their old
// bytes; otherwise enc is built again from all the groups.
func (n *Node[P]) encodeStamp(o *outputState) {
	for _, ci := range o.patches {
		sp := &o.spots[ci]
		sp.queued = false
		tid := n.chans[ci].tid
		if !o.groupFresh[tid] {
			continue // encoded again below
		}
		off := max(n.chans[ci].frontier, sp.off)
		if mutantsBuilt && n.mutant == mutationPatchFrontierOnly {
			off = n.chans[ci].frontier
		}
		if uvarintLen(uint64(off)) != int(sp.size) && (!mutantsBuilt || n.mutant != mutationPatchAnyLength) {
			o.staleGroup(tid)
			continue
		}
		sp.off = off
		putUvarintAt(o.groupEnc[tid], int(sp.at), uint64(off))
		if !o.rebuild {
			putUvarintAt(o.enc, o.groupAt[tid]+int(sp.at), uint64(off))
		}
	}
	o.patches = o.patches[:0]
	if !o.rebuild && len(o.stale) == 0 {
		return
	}
	inPlace := !o.rebuild
	for _, tid := range o.stale {
		had := len(o.groupEnc[tid])
		o.groupEnc[tid] = n.appendStampGroup(o.groupEnc[tid][:0], o, tid)
		o.groupFresh[tid] = true
		if g := o.groupEnc[tid]; inPlace && len(g) == had {
			copy(o.enc[o.groupAt[tid]:], g)
		} else {
			inPlace = false
		}
	}
	o.stale = o.stale[:0]
	if inPlace {
		return
	}
	groups := 0
	for _, tid := range n.sorted {
		if !o.groupFresh[tid] {
			o.groupEnc[tid] = n.appendStampGroup(o.groupEnc[tid][:0], o, tid)
			o.groupFresh[tid] = true
		}
		if len(o.groupEnc[tid]) > 0 {
			groups++
		}
	}
	o.enc = append(o.enc[:0], EncodingVersion)
	o.enc = binary.AppendUvarint(o.enc, uint64(groups))
	for _, tid := range n.sorted {
		o.groupAt[tid] = len(o.enc)
		o.enc = append(o.enc, o.groupEnc[tid]...)
	}
	o.rebuild = false
}

// appendStampGroup appends the encoding of the group of topic tid in output
// o's stamp to dst; a topic the stamp has no entry of appends nothing.
//
// It also notes, in o.spots, where the entry of each input channel of
// tid that o stamps lies, for frontierMoved; dst must hold only the
// group's own encoding (start empty).
func (n *Node[P]) appendStampGroup(dst []byte, o *outputState, tid int32) []byte {
	parts := n.stampGroup(o, tid)
	ins := o.stampedInputs(tid)
	for _, ci := range ins {
		if int(ci) >= len(o.spots) {
			o.spots = append(o.spots, make([]stampSpot, len(n.chans)-len(o.spots))...)
		}
		o.spots[ci] = stampSpot{}
	}
	if len(parts) == 0 {
		return dst
	}
	name := n.topics[tid].name
	dst = binary.AppendUvarint(dst, uint64(len(name)))
	dst = append(dst, name...)
	dst = binary.AppendUvarint(dst, uint64(len(parts)))
	prev := int64(-1)
	k := 0 // the next of ins to look for among parts
	for _, p := range parts {
		dst = binary.AppendUvarint(dst, uint64(int64(p.part)-prev-1))
		// A channel whose frontier is still below 0 has no entry of
		// its own; its partition may still have an advertised one.
		for k < len(ins) && n.chans[ins[k]].ch.Partition < p.part {
			k++
		}
		if k < len(ins) && n.chans[ins[k]].ch.Partition == p.part && n.chans[ins[k]].frontier >= 0 {
			o.spots[ins[k]] = stampSpot{at: int32(len(dst)), size: uint8(uvarintLen(uint64(p.off))), off: p.off}
		}
		dst = binary.AppendUvarint(dst, uint64(p.off))
		prev = int64(p.part)
	}
	return dst
}

// output returns the index of the output named name. Stamps mostly go to
// the output the last one went to, which is compared first.
func (n *Node[P]) output(name string) (int, bool) {
	if n.lastOut > 0 && n.outputs[n.lastOut-1].name == name {
		return n.lastOut - 1, true
	}
	oi, ok := n.outIdx[name]
	if ok {
		n.lastOut = oi + 1
	}
	return oi, ok
}

// stampAdvertised returns the advertised entries of topic tid that output
// o's stamp carries.
func (n *Node[P]) stampAdvertised(o *outputState, tid int32) []partOffset {
	if (!o.keepAll && !o.keep[tid]) || mutantsBuilt && n.mutant == mutationStampFrontierOnly {
		return nil
	}
	return o.adv[tid]
}

// stampGroup returns the entries of topic tid in output o's stamp, sorted by
// partition: the advertised ones joined with the frontiers of o's inputs of
// that topic.
func (n *Node[P]) stampGroup(o *outputState, tid int32) []partOffset {
	if !o.keepAll && !o.keep[tid] {
		return nil
	}
	adv := n.stampAdvertised(o, tid)
	ins := o.stampedInputs(tid)
	if len(ins) == 0 {
		return adv
	}
	// Both lists are sorted by partition, the advertised one without
	// repeats: merge them, keeping the larger offset of a partition in both.
	parts := n.stampParts[:0]
	k := 0
	for _, ci := range ins {
		cs := n.chans[ci]
		if cs.frontier < 0 {
			continue
		}
		for k < len(adv) && adv[k].part < cs.ch.Partition {
			parts = append(parts, adv[k])
			k++
		}
		off := cs.frontier
		if k < len(adv) && adv[k].part == cs.ch.Partition {
			off = max(off, adv[k].off)
			k++
		}
		parts = append(parts, partOffset{part: cs.ch.Partition, off: off})
	}
	parts = append(parts, adv[k:]...)
	n.stampParts = parts
	return parts
}
