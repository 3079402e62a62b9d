// Delivery: frontiers move as records are processed, and a channel's head
// becomes ready once they cover everything it claims.

package causal

// Next hands out the next deliverable record, in an order that respects
// every claim, and reports false when none is deliverable. Before it returns,
// the record's channel frontier covers the record (and bridges to the next
// held record), and any heads this releases are queued for later calls: call
// Next until it reports false after every Receive or Advance.
func (n *Node[P]) Next() (Delivery[P], bool) {
	if n.err != nil || n.readyHead == len(n.ready) {
		return Delivery[P]{}, false
	}
	if n.less != nil && len(n.ready)-n.readyHead > 1 {
		best := n.readyHead
		for i := best + 1; i < len(n.ready); i++ {
			if n.less(n.chans[n.ready[i]].q.first().payload, n.chans[n.ready[best]].q.first().payload) {
				best = i
			}
		}
		n.ready[n.readyHead], n.ready[best] = n.ready[best], n.ready[n.readyHead]
	}
	idx := n.ready[n.readyHead]
	n.readyHead++
	if n.readyHead == len(n.ready) {
		n.ready, n.readyHead = n.ready[:0], 0
	}
	cs := n.chans[idx]
	h := cs.q.pop()
	cs.claims.drop(h.claims)
	if cs.q.len() > 0 {
		// Bridge: everything between h and the next head is not a business
		// record, or Kafka would have returned it in between.
		n.raise(idx, cs.q.first().off-1)
		n.headChanged(idx)
	} else {
		// Everything below a position reported while h was held was
		// received, so it has all been delivered now.
		n.raise(idx, max(h.off, cs.reported))
	}
	return Delivery[P]{Channel: cs.ch, Offset: h.off, Payload: h.payload}, true
}

// raise moves the frontier of channel idx up to f (never down) and wakes the
// heads that were waiting for it to reach at most f.
func (n *Node[P]) raise(idx int32, f int64) {
	cs := n.chans[idx]
	if f <= cs.frontier {
		return
	}
	cs.frontier = f
	for _, oi := range n.topics[cs.tid].feeds {
		n.outputs[oi].frontierMoved(cs.tid, idx)
	}
	for len(cs.waiters) > 0 && cs.waiters[0].off <= f {
		w := heapPop(&cs.waiters)
		n.chans[w.ch].waitOn = -1
		n.evaluate(w.ch)
	}
}

// headChanged is called when channel idx has a new head: it bridges the
// frontier to just below it and evaluates it from its first entry.
func (n *Node[P]) headChanged(idx int32) {
	cs := n.chans[idx]
	cs.cursor = 0
	n.raise(idx, cs.q.first().off-1)
	n.evaluate(idx)
}

// evaluate checks the claims of the head of channel idx from its cursor on.
// It either finds the first claim the frontier does not meet and registers
// the head as a waiter on that channel, or queues the head as deliverable.
// A claim on a partition outside the scope is ignored (restrict).
func (n *Node[P]) evaluate(idx int32) {
	cs := n.chans[idx]
	n.check(idx, cs.claims.front(cs.q.first().claims))
}

// check evaluates claims, those of the head of channel idx, from its cursor
// on, and reports whether the head now waits.
func (n *Node[P]) check(idx int32, claims []claim) bool {
	cs := n.chans[idx]
	i, j := n.firstUnmet(claims, cs.cursor)
	if i < 0 {
		n.markReady(idx)
		return false
	}
	c := &claims[i]
	cs.cursor = i
	cs.waitOn, cs.waitOnOff = j, c.off
	heapPush(&n.chans[j].waiters, waiter{off: c.off, ch: idx})
	return true
}

// firstUnmet returns the index, from on, of the first of claims the
// frontiers do not meet, and the index of the channel it claims; -1 when
// they meet every one.
func (n *Node[P]) firstUnmet(claims []claim, from int) (int, int32) {
	for i := from; i < len(claims); i++ {
		c := &claims[i]
		j := n.topics[c.tid].chanIndex(c.part)
		if j < 0 {
			continue
		}
		dep := n.chans[j]
		if dep.frontier >= c.off {
			continue
		}
		if mutantsBuilt && n.mutant == mutationRestrictIdle && dep.q.len() == 0 {
			continue
		}
		return i, j
	}
	return -1, -1
}

// groupEnd returns the end of the run of entries that share es[i]'s topic.
func groupEnd(es []Entry, i int) int {
	j := i + 1
	for j < len(es) && es[j].Channel.Topic == es[i].Channel.Topic {
		j++
	}
	return j
}

func (n *Node[P]) markReady(idx int32) {
	n.ready = append(n.ready, idx)
}
