package causal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strings"
)

// Delivery is a record the gate has released to the processor. By the time
// Next returns it, the frontier of its channel already covers its offset, so
// stamps taken while processing it claim it.
type Delivery[P any] struct {
	Channel Channel
	Offset  int64
	Payload P
}

// ChannelStatus is what a node can say about one consumed channel.
type ChannelStatus struct {
	Channel Channel
	// Frontier is the highest offset at or below which every business record
	// has been delivered; -1 when nothing is accounted for yet.
	Frontier int64
	// Held is the number of received records not yet delivered.
	Held int
	// Blocked reports that the head of the queue waits on a claim; WaitingFor
	// and WaitingOffset name the claim (frontier of WaitingFor must reach
	// WaitingOffset).
	Blocked       bool
	WaitingFor    Channel
	WaitingOffset int64
	// HeadOffset is the offset of the record at the head of the queue, the
	// one that waits when Blocked; -1 when nothing is held.
	HeadOffset int64
}

// Node is the delivery gate of one task: one processor instance and the
// channels it consumes. It is a deterministic state machine: it does no I/O,
// starts no goroutines and reads no clock. Its methods must not be called
// concurrently. See the package documentation for the caller's duties.
//
// P is the payload type the caller wants back with each delivery (for
// example the Kafka message); the node never looks inside it.
type Node[P any] struct {
	gateOff bool
	mutant  mutation
	// less, when set, ranks the records deliverable at once (PreferBy).
	less func(a, b P) bool

	// Topic interning: every topic the node has seen in its configuration or
	// in a folded clock has a small integer id. Clocks are grouped by topic, so
	// resolving a clock costs one map lookup per topic, not per entry.
	ids    map[string]int32
	topics []topicState
	sorted []int32 // topic ids in name order, for building stamps

	chans   []*chanState[P] // the scope, by channel index
	outputs []outputState
	outIdx  map[string]int

	ready     []int32 // channel indexes whose head is deliverable, FIFO
	readyHead int

	stampParts []partOffset // reused to merge a topic's stamp entries

	// Reused while receiving: the decoded header, and the claims of the
	// record being received. Claims are copied to the channel's queue only
	// when the record has to wait.
	rawGroups []rawGroup
	rawParts  []partOffset
	claims    []claim
	// groupTopics remembers the topic id of each group position of the last
	// header received (-1: none). Headers in a row mostly name the same
	// topics in the same places, and comparing a name costs less than
	// hashing it for the ids map.
	groupTopics []int32
	// lastIdx is the scope index + 1 of the channel last looked up (0:
	// none): records mostly come in runs from one channel.
	lastIdx int32
	// lastOut is the index + 1 of the output last stamped for (0: none).
	lastOut int
	// lastHeader is the channel that last took in a header; only the
	// mutationReuseAcrossChannels defect reads it.
	lastHeader *chanState[P]

	err error
}

// claim is one entry of a held record's clock that the gate must check: a
// partition of an input topic other than the record's own channel. Entries
// for topics the node does not consume are dropped on receipt (restrict).
type claim struct {
	tid  int32
	part int32
	off  int64
}

type topicState struct {
	name  string
	input bool
	// checked: the claims of records received on this input are checked
	// against ends (CheckClaims).
	checked bool
	// ends holds, by partition, what SetEnd reported: the end + 1 (0: not
	// reported; -1: the channel does not exist).
	ends  []int64
	feeds []int32 // outputs this input topic feeds
	// parts maps partition -> channel index + 1 for channels in scope
	// (0: not in scope). It only grows to the largest seeded partition.
	parts []int32
}

// chanIndex returns the scope index of (topic, partition), or -1.
func (t *topicState) chanIndex(p int32) int32 {
	if p < 0 || int(p) >= len(t.parts) {
		return -1
	}
	return t.parts[p] - 1
}

// span is where a topic group lies in an encoded clock: bytes start to end.
type span struct{ start, end int }

type partOffset struct {
	part int32
	off  int64
}

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

type held[P any] struct {
	off     int64
	claims  int // how many of the channel's queued claims are this record's
	payload P
}

type waiter struct {
	off int64 // the frontier this head waits for
	ch  int32 // the waiting head's channel index
}

type chanState[P any] struct {
	ch       Channel
	tid      int32
	frontier int64
	q        queue[held[P]]
	claims   queue[claim] // the claims of the held records, in their order
	waiters  []waiter     // min-heap by off: heads waiting on this channel's frontier

	lastRecv int64 // offset of the last record received, -1 before any

	// last is the clock header of the last record taken in on this channel
	// with one, and lastGroups where its topic groups lie in it (see
	// receiveHeader).
	last       []byte
	lastGroups []span

	// State of the head, if any.
	cursor    int   // clock entries before it are known satisfied
	waitOn    int32 // channel index the head waits on, -1 if none
	waitOnOff int64
}

// NewNode returns a node with the given inputs and outputs and no channel in
// scope. Defaults: the gate is on, every input feeds every output, no
// pruning. It returns an error matching ErrInvalidConfig when no input is
// declared, a name is empty or too long or declared twice, or an output is
// fed by a topic that is not an input.
func NewNode[P any](opts ...NodeOpt) (*Node[P], error) {
	var cfg nodeConfig
	for _, o := range opts {
		o.apply(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	n := &Node[P]{
		gateOff: cfg.gateOff,
		mutant:  cfg.mutant,
		ids:     map[string]int32{},
		outIdx:  map[string]int{},
	}
	for _, oc := range cfg.outputs {
		o := outputState{name: oc.topic, keepAll: !oc.pruned, rebuild: true}
		if oc.pruned {
			o.keepSet = map[string]bool{}
			for _, k := range oc.keep {
				o.keepSet[k] = true
			}
		}
		n.outIdx[oc.topic] = len(n.outputs)
		n.outputs = append(n.outputs, o)
	}
	for _, in := range cfg.inputs {
		tid := n.intern(in)
		n.topics[tid].input = true
		n.topics[tid].checked = slices.Contains(cfg.checked, in)
		for oi, oc := range cfg.outputs {
			if oc.feeds(in) {
				n.topics[tid].feeds = append(n.topics[tid].feeds, int32(oi))
			}
		}
	}
	return n, nil
}

// intern returns the id of topic, adding it if new.
func (n *Node[P]) intern(topic string) int32 {
	if id, ok := n.ids[topic]; ok {
		return id
	}
	id := int32(len(n.topics))
	n.ids[topic] = id
	n.topics = append(n.topics, topicState{name: topic})
	pos, _ := slices.BinarySearchFunc(n.sorted, topic, func(a int32, t string) int {
		return strings.Compare(n.topics[a].name, t)
	})
	n.sorted = slices.Insert(n.sorted, pos, id)
	for i := range n.outputs {
		o := &n.outputs[i]
		o.adv = append(o.adv, nil)
		o.groupEnc = append(o.groupEnc, nil)
		o.groupFresh = append(o.groupFresh, false)
		o.groupAt = append(o.groupAt, 0)
		o.rebuild = true
		if !o.keepAll {
			o.keep = append(o.keep, o.keepSet[topic])
		}
	}
	return id
}

// Err returns the failure that stopped the node, or nil.
func (n *Node[P]) Err() error { return n.err }

// Seed brings a channel into scope with the offset the consumer starts
// reading it at: the committed offset, or, with none, the offset the reset
// policy chose. Everything below next counts as delivered (frontier next-1).
// The channel's topic must be an input. Seed every channel of the task before
// the first Receive: heads evaluated before a channel enters the scope have
// ignored claims on it.
func (n *Node[P]) Seed(ch Channel, next int64) error {
	if n.err != nil {
		return n.err
	}
	tid, ok := n.ids[ch.Topic]
	if !ok || !n.topics[tid].input {
		return fmt.Errorf("causal: seed %s: topic is not an input: %w", ch, ErrNotInScope)
	}
	if ch.Partition < 0 || next < 0 {
		return fmt.Errorf("causal: seed %s at %d: negative partition or offset: %w", ch, next, ErrInvalidConfig)
	}
	t := &n.topics[tid]
	if t.chanIndex(ch.Partition) >= 0 {
		return fmt.Errorf("causal: seed %s: %w", ch, ErrAlreadyInScope)
	}
	if int(ch.Partition) >= len(t.parts) {
		t.parts = append(t.parts, make([]int32, int(ch.Partition)+1-len(t.parts))...)
	}
	idx := int32(len(n.chans))
	t.parts[ch.Partition] = idx + 1
	n.chans = append(n.chans, &chanState[P]{ch: ch, tid: tid, frontier: next - 1, lastRecv: next - 1, waitOn: -1})
	for _, oi := range t.feeds {
		o := &n.outputs[oi]
		if int(tid) >= len(o.inputsOf) {
			o.inputsOf = append(o.inputsOf, make([][]int32, int(tid)+1-len(o.inputsOf))...)
		}
		same := o.inputsOf[tid]
		at, _ := slices.BinarySearchFunc(same, ch.Partition, func(ci int32, p int32) int { return int(n.chans[ci].ch.Partition) - int(p) })
		o.inputsOf[tid] = slices.Insert(same, at, idx)
		o.staleGroup(tid)
	}
	return nil
}

// stampedInputs returns output o's input channels of topic tid, sorted by
// partition.
func (o *outputState) stampedInputs(tid int32) []int32 {
	if int(tid) >= len(o.inputsOf) {
		return nil
	}
	return o.inputsOf[tid]
}

func (n *Node[P]) lookup(ch Channel) (int32, error) {
	if n.lastIdx > 0 && n.chans[n.lastIdx-1].ch == ch {
		return n.lastIdx - 1, nil
	}
	if tid, ok := n.ids[ch.Topic]; ok {
		if idx := n.topics[tid].chanIndex(ch.Partition); idx >= 0 {
			n.lastIdx = idx + 1
			return idx, nil
		}
	}
	return -1, fmt.Errorf("causal: %s: %w", ch, ErrNotInScope)
}

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
		if n.topics[cs.tid].checked {
			// Every claim is checked against the ends: decoded in full.
			n.rawGroups, n.rawParts, err = decodeRaw(header, n.rawGroups[:0], n.rawParts[:0])
		} else {
			n.rawGroups, n.rawParts, err = decodeRawAfter(header, prev.last, prev.lastGroups, n.rawGroups[:0], n.rawParts[:0])
		}
		if err != nil {
			return false, false, &ClockError{Channel: ch, Offset: off, Err: err}
		}
		if n.topics[cs.tid].checked {
			if err := n.checkRaw(ch, off); err != nil {
				return false, false, err
			}
		}
	}
	if err := n.inOrder(idx, off); err != nil {
		return false, false, err
	}
	n.claims = n.claims[:0]
	if present && !same {
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
	if n.hold(idx, off, payload, mayDeliver) {
		return false, true, nil
	}
	return true, false, nil
}

// checkRaw checks every claim of the header just decoded against the
// reported ends (CheckClaims).
func (n *Node[P]) checkRaw(ch Channel, off int64) error {
	for i, g := range n.rawGroups {
		tid, ok := n.groupTopic(i, g.name)
		if !ok {
			tid = n.intern(string(g.name))
			n.groupTopics[i] = tid
		}
		for _, p := range n.rawParts[g.from:g.to] {
			if err := n.checkClaim(ch, off, tid, p); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkClaim checks one claim (topic tid) of the record at off on ch.
func (n *Node[P]) checkClaim(ch Channel, off int64, tid int32, p partOffset) error {
	ends := n.topics[tid].ends
	end := int64(0) // end + 1, as stored
	if int(p.part) < len(ends) {
		end = ends[p.part]
	}
	if end > p.off+1 { // the claimed offset lies below the end
		return nil
	}
	e := &ClaimError{Channel: ch, Offset: off, Claim: Entry{Channel: Channel{Topic: n.topics[tid].name, Partition: p.part}, Offset: p.off}}
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
		for _, e := range clock.entries {
			if err := n.checkClaim(ch, off, n.intern(e.Channel.Topic), partOffset{part: e.Channel.Partition, off: e.Offset}); err != nil {
				return false, err
			}
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
// report carries nothing the bridge has not already applied.
func (n *Node[P]) Advance(ch Channel, position int64) error {
	if n.err != nil {
		return n.err
	}
	idx, err := n.lookup(ch)
	if err != nil {
		return err
	}
	if n.chans[idx].q.len() == 0 {
		n.raise(idx, position-1)
	}
	return nil
}

// PreferBy makes Next hand out, of the records deliverable at the same
// time (their channels' heads, every claim met), the one less ranks first,
// instead of the one that became deliverable first; ties keep that order.
// With less comparing timestamps, a caller delivers as Kafka Streams
// chooses among its partitions, smallest timestamp first, wherever causal
// order leaves a choice: only records whose claims are all met compete, so
// no ranking can break causal order. nil restores first-come order.
func (n *Node[P]) PreferBy(less func(a, b P) bool) { n.less = less }

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
		n.raise(idx, h.off)
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

// Committable returns, for every channel in scope, the offset to commit with
// the consumer group: frontier+1, the first record not yet accounted for.
// Held records lie above it and are read again after a crash.
func (n *Node[P]) Committable() []Entry {
	out := make([]Entry, 0, len(n.chans))
	for _, cs := range n.chans {
		out = append(out, Entry{Channel: cs.ch, Offset: cs.frontier + 1})
	}
	slices.SortFunc(out, func(a, b Entry) int { return compareChannels(a.Channel, b.Channel) })
	return out
}

// Held returns the number of records received and not yet delivered.
func (n *Node[P]) Held() int {
	total := 0
	for _, cs := range n.chans {
		total += cs.q.len()
	}
	return total
}

// Status describes every channel in scope, sorted by channel.
func (n *Node[P]) Status() []ChannelStatus {
	out := make([]ChannelStatus, 0, len(n.chans))
	for _, cs := range n.chans {
		st := ChannelStatus{Channel: cs.ch, Frontier: cs.frontier, Held: cs.q.len(), HeadOffset: -1}
		if cs.q.len() > 0 {
			st.HeadOffset = cs.q.first().off
		}
		if cs.waitOn >= 0 {
			st.Blocked = true
			st.WaitingFor = n.chans[cs.waitOn].ch
			st.WaitingOffset = cs.waitOnOff
		}
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b ChannelStatus) int { return compareChannels(a.Channel, b.Channel) })
	return out
}
