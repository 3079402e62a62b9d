// What a node takes in: records with their clocks, the ends claims are
// checked against, and position advances; each record is held at the
// gate until what it claims is covered.

package causal

import (
	"errors"
	"fmt"
)

// ReceiveHeader is Receive for a record whose clock is still encoded. present
// tells whether the record carries the clock header at all: an absent header
// is the empty clock, a present one that does not decode fails the node with
// a *ClockError naming the channel and offset (fail closed). A replayed
// offset is dropped before its header is read. Once the node is warm it does
// not allocate.
func (n *Node[P]) ReceiveHeader(ch Channel, off int64, header []byte, present bool, payload P) (bool, error) {
	ok, _, err := n.receiveHeader(ch, off, header, present, false, payload)
	return ok, n.failOnCorrupt(err)
}

// failOnCorrupt fails the node if err says a header did not decode, and
// returns the error to report.
func (n *Node[P]) failOnCorrupt(err error) error {
	if err == nil {
		return nil
	}
	// Only a corrupt header fails the node; declared here, the target of
	// errors.As escapes to the heap on this path alone.
	var ce *ClockError
	if errors.As(err, &ce) {
		n.err = fmt.Errorf("causal: %w: %w", ErrNodeFailed, err)
		return n.err
	}
	return err
}

// ReceiveOrReject is ReceiveHeader for a caller that has a policy for
// corrupt headers other than failing: a present header that does not
// decode returns a *ClockError (matching ErrCorruptClock) and leaves the
// node exactly as it was. The caller then either fails the task itself or
// takes the record in with present false, as a record that claims nothing,
// to route it elsewhere (a dead-letter topic): that record alone loses its
// causal guarantee, and no claim it may have meant to make reaches any
// stamp.
func (n *Node[P]) ReceiveOrReject(ch Channel, off int64, header []byte, present bool, payload P) (bool, error) {
	ok, _, err := n.receiveHeader(ch, off, header, present, false, payload)
	return ok, err
}

// ReceiveNow is ReceiveHeader, or ReceiveOrReject with reject set, for a
// caller that processes a record as soon as it may. A record deliverable
// the moment it arrives (nothing held on its channel, every claim met, and
// no other record ready for Next) is not queued: now is true, the node has
// moved past it as Next would have, and the caller processes it before
// anything Next returns after. Any other record is queued with payload and
// taken is true, as ReceiveHeader would. Both are false for a replay or an
// error.
//
// It saves a caller that keeps its records apart from the gate (the gate
// queues a payload that names where) from storing, and fetching back, a
// record that is delivered at once: in a topology whose causes arrive
// first, almost every record.
func (n *Node[P]) ReceiveNow(ch Channel, off int64, header []byte, present, reject bool, payload P) (taken, now bool, err error) {
	taken, now, err = n.receiveHeader(ch, off, header, present, true, payload)
	if !reject {
		err = n.failOnCorrupt(err)
	}
	return taken, now, err
}

// receiveHeader takes in a record with its clock still encoded.
//
// A topic group of the header with the same bytes, at the same place, as in
// the last header taken in on the same channel adds nothing, and is not
// folded or claimed again: that earlier record claimed the same entries,
// and its fold into the advertised clocks is already there (a fold only
// raises). It also comes first out of the channel's queue, and so is
// delivered only once the frontiers cover those entries; frontiers never go
// down, so they cover them for this record too. A header equal to the last
// one as a whole is not even decoded, as it decoded then, and the groups
// before the first that differs are not decoded again (decodeRawAfter),
// unless the channel's claims are checked against ends (CheckClaims).
// Upstream stamps mostly change in one group from one record to the next
// (the frontier of the input the upstream task read), so most groups are
// skipped.
func (n *Node[P]) receiveHeader(ch Channel, off int64, header []byte, present, mayDeliver bool, payload P) (taken, now bool, err error) {
	idx, fresh, err := n.admit(ch, off)
	if !fresh || err != nil {
		return false, false, err
	}
	cs := n.chans[idx]
	prev := cs // whose last header this one is compared with
	if mutantsBuilt && n.mutant == mutationReuseAcrossChannels && n.lastHeader != nil {
		prev = n.lastHeader
	}
	same := present && !n.topics[cs.tid].checked && len(prev.last) > 0 && string(header) == string(prev.last)
	if present && !same {
		if err := n.decodeHeader(ch, off, cs, prev, header); err != nil {
			return false, false, err
		}
	}
	if err := n.inOrder(idx, off); err != nil {
		return false, false, err
	}
	n.claims = n.claims[:0]
	if present && !same {
		n.absorbHeader(idx, cs, prev, header)
	}
	if n.hold(idx, off, payload, mayDeliver) {
		return false, true, nil
	}
	return true, false, nil
}

// decodeHeader decodes the header of the record at off on ch into
// rawGroups and rawParts: in full when the channel's claims are checked
// against ends (and checks them), else only the groups after those it
// shares with prev's last header.
func (n *Node[P]) decodeHeader(ch Channel, off int64, cs, prev *chanState[P], header []byte) error {
	var err error
	checked := n.topics[cs.tid].checked
	if checked {
		n.rawGroups, n.rawParts, err = decodeRaw(header, n.rawGroups[:0], n.rawParts[:0])
	} else {
		n.rawGroups, n.rawParts, err = decodeRawAfter(header, prev.last, prev.lastGroups, n.rawGroups[:0], n.rawParts[:0])
	}
	if err != nil {
		return &ClockError{Channel: ch, Offset: off, Err: err}
	}
	if checked {
		return n.checkRaw(ch, off)
	}
	return nil
}

// absorbHeader folds the groups of the header just decoded that differ
// from prev's last header into the channel's claims, and keeps the header
// as the channel's last.
func (n *Node[P]) absorbHeader(idx int32, cs, prev *chanState[P], header []byte) {
	feeds := n.topics[cs.tid].feeds
	for i, g := range n.rawGroups {
		if g.kept {
			continue // the same bytes in the same place as in prev's header
		}
		if i < len(prev.lastGroups) {
			if was := prev.lastGroups[i]; string(header[g.start:g.end]) == string(prev.last[was.start:was.end]) {
				continue
			}
		}
		tid, ok := n.groupTopic(i, g.name)
		if !ok && len(feeds) > 0 {
			tid, ok = n.intern(string(g.name)), true
			n.groupTopics[i] = tid
		}
		if ok {
			n.absorb(idx, tid, n.rawParts[g.from:g.to])
		}
	}
	cs.last = append(cs.last[:0], header...)
	cs.lastGroups = cs.lastGroups[:0]
	for _, g := range n.rawGroups {
		cs.lastGroups = append(cs.lastGroups, span{start: g.start, end: g.end})
	}
	n.lastHeader = cs
}

// checkRaw checks every claim of the header just decoded against the
// reported ends (CheckClaims).
func (n *Node[P]) checkRaw(ch Channel, off int64) error {
	var bad *ClaimError
	for i, g := range n.rawGroups {
		tid, ok := n.groupTopic(i, g.name)
		if !ok {
			tid = n.intern(string(g.name))
			n.groupTopics[i] = tid
		}
		for _, p := range n.rawParts[g.from:g.to] {
			bad = n.checkClaim(bad, ch, off, tid, p)
		}
	}
	if bad != nil {
		return bad
	}
	return nil
}

// checkClaim checks one claim (topic tid) of the record at off on ch. A
// claim beyond its channel's known end is added to bad, which it makes
// for the first, and it returns bad.
func (n *Node[P]) checkClaim(bad *ClaimError, ch Channel, off int64, tid int32, p partOffset) *ClaimError {
	ends := n.topics[tid].ends
	end := int64(0) // end + 1, as stored
	if int(p.part) < len(ends) {
		end = ends[p.part]
	}
	if end > p.off+1 { // the claimed offset lies below the end
		return bad
	}
	claim := Entry{Channel: Channel{Topic: n.topics[tid].name, Partition: p.part}, Offset: p.off}
	if bad != nil {
		bad.Claims = append(bad.Claims, claim)
		return bad
	}
	e := &ClaimError{Channel: ch, Offset: off, Claim: claim, Claims: []Entry{claim}}
	switch {
	case end == 0:
		e.End = EndUnknown
	case end < 0:
		e.End = EndMissing
	default:
		e.End = end - 1
	}
	return e
}

// SetEnd reports a channel's end: the offset after its last record (its
// high watermark), or, with a negative end, that the channel does not
// exist. Ends only grow; a channel reported missing may be reported later
// with an end. Only a node with CheckClaims uses them.
func (n *Node[P]) SetEnd(ch Channel, end int64) {
	if ch.Partition < 0 || validTopic(ch.Topic) != nil {
		return
	}
	t := &n.topics[n.intern(ch.Topic)]
	for int(ch.Partition) >= len(t.ends) {
		t.ends = append(t.ends, 0)
	}
	switch cur := &t.ends[ch.Partition]; {
	case end < 0:
		if *cur <= 0 {
			*cur = -1
		}
	case end+1 > *cur:
		*cur = end + 1
	}
}

// groupTopic returns the id of name, the topic of group i of a received
// header, and whether the node knows the topic. It asks the ids map only
// when the last header's group i named another topic.
func (n *Node[P]) groupTopic(i int, name []byte) (int32, bool) {
	for len(n.groupTopics) <= i {
		n.groupTopics = append(n.groupTopics, -1)
	}
	if tid := n.groupTopics[i]; tid >= 0 && n.topics[tid].name == string(name) {
		return tid, true
	}
	tid, ok := n.ids[string(name)]
	if !ok {
		tid = -1
	}
	n.groupTopics[i] = tid
	return tid, ok
}

// Receive takes a record read from channel ch at offset off with its decoded
// clock. It returns false, with no effect, for a replay (off at or below the
// frontier). Otherwise it folds the clock into the advertised clock of every
// output the channel's topic feeds, queues the record and, if it is now the
// head of its queue, bridges the frontier to just below it and evaluates it.
// Deliverable records are then handed out by Next.
func (n *Node[P]) Receive(ch Channel, off int64, clock Clock, payload P) (bool, error) {
	idx, fresh, err := n.admit(ch, off)
	if !fresh || err != nil {
		return false, err
	}
	if err := n.inOrder(idx, off); err != nil {
		return false, err
	}
	if n.topics[n.chans[idx].tid].checked {
		var bad *ClaimError
		for _, e := range clock.entries {
			bad = n.checkClaim(bad, ch, off, n.intern(e.Channel.Topic), partOffset{part: e.Channel.Partition, off: e.Offset})
		}
		if bad != nil {
			return false, bad
		}
	}
	n.claims = n.claims[:0]
	feeds := n.topics[n.chans[idx].tid].feeds
	es := clock.entries
	for i := 0; i < len(es); {
		j := groupEnd(es, i)
		tid, ok := n.ids[es[i].Channel.Topic]
		if !ok && len(feeds) > 0 {
			tid, ok = n.intern(es[i].Channel.Topic), true
		}
		if ok {
			n.absorb(idx, tid, n.partsOf(es[i:j]))
		}
		i = j
	}
	n.hold(idx, off, payload, false)
	return true, nil
}

// admit finds the scope index of ch and reports whether off is new there
// (above the frontier); a replay is not new and not an error.
func (n *Node[P]) admit(ch Channel, off int64) (int32, bool, error) {
	if n.err != nil {
		return -1, false, n.err
	}
	idx, err := n.lookup(ch)
	if err != nil {
		return -1, false, err
	}
	return idx, off > n.chans[idx].frontier, nil
}

// inOrder refuses an offset above the frontier that is not above the last
// record received: only a rewound consumer does that (with nothing held,
// lastRecv <= frontier).
func (n *Node[P]) inOrder(idx int32, off int64) error {
	cs := n.chans[idx]
	if off <= cs.lastRecv {
		return fmt.Errorf("causal: %s: offset %d after %d: %w", cs.ch, off, cs.lastRecv, ErrOutOfOrder)
	}
	return nil
}

// partsOf copies the partitions and offsets of es, entries of one topic,
// into reused storage.
func (n *Node[P]) partsOf(es []Entry) []partOffset {
	n.rawParts = n.rawParts[:0]
	for _, e := range es {
		n.rawParts = append(n.rawParts, partOffset{part: e.Channel.Partition, off: e.Offset})
	}
	return n.rawParts
}

// absorb takes one topic group, tid, of a clock received on channel idx: it
// folds the group into the advertised clock of every output the channel's
// topic feeds, and collects in n.claims what the gate has to check, dropping
// the record's own channel (normalise) and topics the node does not consume
// (restrict).
func (n *Node[P]) absorb(idx, tid int32, parts []partOffset) {
	cs := n.chans[idx]
	n.foldGroupInto(n.topics[cs.tid].feeds, tid, parts)
	if n.gateOff || !n.topics[tid].input {
		return
	}
	for _, p := range parts {
		if tid == cs.tid && p.part == cs.ch.Partition {
			continue
		}
		n.claims = append(n.claims, claim{tid: tid, part: p.part, off: p.off})
	}
}

// hold queues the record with the claims absorb collected and, if it is the
// new head of its queue, bridges the frontier to just below it and
// evaluates it. The claims are kept (on the channel's claim queue) only if
// the record cannot be delivered at once: a deliverable head never needs
// them again.
func (n *Node[P]) hold(idx int32, off int64, payload P, mayDeliver bool) (now bool) {
	cs := n.chans[idx]
	cs.lastRecv = off
	if mayDeliver && (cs.q.len() == 0 || mutantsBuilt && n.mutant == mutationNowPastHeld) {
		// The bridge the record would get as the head of its queue; with
		// no other record ready after it and every claim met, the head
		// would be the next delivery, so it is delivered here, with what
		// Next does for a head it hands out.
		n.raise(idx, off-1)
		if n.readyHead == len(n.ready) && n.met(n.claims) {
			n.raise(idx, off)
			return true
		}
	}
	if cs.q.len() > 0 {
		cs.q.push(held[P]{off: off, claims: len(n.claims), payload: payload})
		cs.claims.pushAll(n.claims)
		return false
	}
	cs.q.push(held[P]{off: off, payload: payload})
	cs.cursor = 0
	n.raise(idx, off-1)
	if n.check(idx, n.claims) {
		cs.q.first().claims = len(n.claims)
		cs.claims.pushAll(n.claims)
	}
	return false
}

// met reports whether the frontiers meet every one of claims.
func (n *Node[P]) met(claims []claim) bool {
	if mutantsBuilt && n.mutant == mutationNowIgnoresClaims {
		return true
	}
	i, _ := n.firstUnmet(claims, 0)
	return i < 0
}

// Advance reports the consumer's position on ch: the offset of the next
// record it would return (at a partition EOF under read_committed, the last
// stable offset). When nothing is held for ch, everything below the position
// is accounted for and the frontier moves to position-1. With records held the
// position is kept: once the last of them is delivered, the frontier moves to
// it. A channel whose last records wait when the consumer reaches its end
// (and reports it once, as librdkafka reports a partition EOF) would
// otherwise keep its frontier below the transaction marker that ends it.
func (n *Node[P]) Advance(ch Channel, position int64) error {
	if n.err != nil {
		return n.err
	}
	idx, err := n.lookup(ch)
	if err != nil {
		return err
	}
	cs := n.chans[idx]
	cs.reported = max(cs.reported, position-1)
	if cs.q.len() == 0 {
		n.raise(idx, position-1)
	}
	return nil
}
