package causal

import (
	"fmt"
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
//
//causeway:owned
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
	// reported is the highest position the consumer reported, less one:
	// every record below it was received. Once the queue is empty the
	// frontier reaches it (see Advance).
	reported int64

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
	n.chans = append(n.chans, &chanState[P]{ch: ch, tid: tid, frontier: next - 1, lastRecv: next - 1, reported: next - 1, waitOn: -1})
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

// PreferBy makes Next hand out, of the records deliverable at the same
// time (their channels' heads, every claim met), the one less ranks first,
// instead of the one that became deliverable first; ties keep that order.
// With less comparing timestamps, a caller delivers as Kafka Streams
// chooses among its partitions, smallest timestamp first, wherever causal
// order leaves a choice: only records whose claims are all met compete, so
// no ranking can break causal order. nil restores first-come order.
func (n *Node[P]) PreferBy(less func(a, b P) bool) { n.less = less }

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
