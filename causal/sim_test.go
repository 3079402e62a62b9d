package causal

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"slices"
	"strconv"
)

// This file is a seeded, deterministic simulation of many gates wired into a
// random topology over an in-memory imitation of Kafka: partitioned logs with
// read_committed visibility, transactions that commit or abort (leaving
// markers and aborted records as offset gaps), holes as left by compaction,
// lagging channels, and tasks that crash and restart from their last
// committed checkpoint and offsets.
//
// Its oracle is its own record of real ancestry: every record carries the set
// of records that causally precede it, built from what was actually
// delivered and emitted (a task's history is everything it has delivered; a
// producer's is everything it produced or read). The clocks under test are
// never consulted by the checks.

// bitset is a set of record ids.
type bitset []uint64

func (b *bitset) set(i int) {
	for i/64 >= len(*b) {
		*b = append(*b, 0)
	}
	(*b)[i/64] |= 1 << (i % 64)
}

func (b *bitset) or(o bitset) {
	for len(*b) < len(o) {
		*b = append(*b, 0)
	}
	for i, w := range o {
		(*b)[i] |= w
	}
}

func (b bitset) clone() bitset { return slices.Clone(b) }

// highestIn returns the highest id in b ∩ in that is not in without, or -1.
func (b bitset) highestIn(in, without bitset) int {
	for i := min(len(b), len(in)) - 1; i >= 0; i-- {
		w := b[i] & in[i]
		if i < len(without) {
			w &^= without[i]
		}
		if w != 0 {
			return i*64 + 63 - bits.LeadingZeros64(w)
		}
	}
	return -1
}

type txnState int

const (
	txnOpen txnState = iota
	txnCommitted
	txnAborted
)

type simTxn struct{ state txnState }

type simRec struct {
	id        int
	ch        Channel
	off       int64
	header    []byte
	hasHeader bool
	anc       bitset // the oracle: every record that really precedes this one
	txn       *simTxn
}

type simEntry struct {
	off    int64
	rec    *simRec // nil for a transaction marker
	txn    *simTxn
	marker bool
}

// simLog is one partition.
type simLog struct {
	ch      Channel
	entries []simEntry
	end     int64  // next offset to assign
	ids     bitset // ids of the records in this log
}

func (l *simLog) append(e simEntry) int64 {
	e.off = l.end
	l.end++
	l.entries = append(l.entries, e)
	if e.rec != nil {
		l.ids.set(e.rec.id)
	}
	return e.off
}

func (l *simLog) index(pos int64) int {
	i, _ := slices.BinarySearchFunc(l.entries, pos, func(e simEntry, p int64) int { return int(e.off - p) })
	return i
}

// read returns what a read_committed consumer at pos sees: the next visible
// business record and the position after it, or nil and the position it
// stops at (an open transaction, or the end of the log).
func (l *simLog) read(pos int64) (*simRec, int64) {
	for i := l.index(pos); i < len(l.entries); i++ {
		e := l.entries[i]
		switch {
		case e.txn != nil && e.txn.state == txnOpen:
			return nil, e.off
		case e.marker, e.txn != nil && e.txn.state == txnAborted:
			continue
		default:
			return e.rec, e.off + 1
		}
	}
	return nil, l.end
}

// visibleBetween returns the first visible business record with lo <= off < hi.
func (l *simLog) visibleBetween(lo, hi int64) *simRec {
	for i := l.index(lo); i < len(l.entries) && l.entries[i].off < hi; i++ {
		e := l.entries[i]
		if !e.marker && (e.txn == nil || e.txn.state == txnCommitted) {
			return e.rec
		}
	}
	return nil
}

type simTopic struct {
	name   string
	logs   []*simLog
	source bool
}

type simProc struct {
	name    string
	inputs  []*simTopic
	outputs []*simTopic
	prune   map[string][]string // output -> topics to keep, when pruning
	tasks   []*simTask
}

type simProducer struct {
	session       Session
	hist          bitset
	transactional bool
	txn           *simTxn
	touched       []*simLog
}

type simCommitted struct {
	offsets    []int64
	checkpoint []byte
	history    bitset
	lastDel    []int64
}

type simTask struct {
	name      string
	proc      *simProc
	scope     []*simLog
	slow      []bool
	node      *Node[*simRec]
	pos       []int64
	lastDel   []int64 // per scope channel: last delivered offset in this epoch
	history   bitset
	txn       *simTxn
	touched   []*simLog
	txnRecs   []*simRec
	committed simCommitted
}

type simConfig struct {
	seed        uint64
	liveness    bool // after the faulty phase, stop faults and producers and drain
	gateOff     bool
	mutant      mutation
	skipRestore bool // restart tasks without their checkpoint (a negative control)
	// prefer ranks deliverable records by an arbitrary order (PreferBy),
	// which must not break causal order or liveness.
	prefer bool
	steps  int
}

type simResult struct {
	violations []string
	records    int
	delivered  int
	// deliveredNow counts the deliveries ReceiveNow made on arrival.
	deliveredNow int
	crashes      int
	aborted      int
	maxHeld      int
	topology     string
}

type sim struct {
	cfg      simConfig
	rng      *rand.Rand
	topics   []*simTopic
	procs    []*simProc
	tasks    []*simTask
	prods    []*simProducer
	recs     []*simRec
	aborted  bitset
	feedback bool // producers read committed outputs back
	res      simResult
}

func newSimRand(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

func runSim(cfg simConfig) simResult {
	s := &sim{cfg: cfg, rng: newSimRand(cfg.seed)}
	s.buildTopology()
	for _, t := range s.tasks {
		s.startTask(t)
	}
	for step := 0; step < cfg.steps && len(s.res.violations) == 0; step++ {
		s.step(true)
	}
	if cfg.liveness && len(s.res.violations) == 0 {
		s.drain()
	}
	s.res.records = len(s.recs)
	return s.res
}

func (s *sim) violate(format string, args ...any) {
	if len(s.res.violations) < 5 {
		s.res.violations = append(s.res.violations, fmt.Sprintf(format, args...))
	}
}

func (s *sim) newTopic(name string, parts int, source bool) *simTopic {
	t := &simTopic{name: name, source: source}
	for p := range parts {
		t.logs = append(t.logs, &simLog{ch: Channel{Topic: name, Partition: int32(p)}})
	}
	s.topics = append(s.topics, t)
	return t
}

// buildTopology draws a random DAG: sources, then processors whose inputs
// are co-partitioned existing topics and whose outputs are new topics.
func (s *sim) buildTopology() {
	base := 1 + s.rng.IntN(3)
	parts := func() int {
		if s.rng.IntN(10) < 7 {
			return base
		}
		return 1 + s.rng.IntN(3)
	}
	for i := range 1 + s.rng.IntN(3) {
		s.newTopic("src"+strconv.Itoa(i), parts(), true)
	}
	for i := range 2 + s.rng.IntN(4) {
		first := s.topics[s.rng.IntN(len(s.topics))]
		p := &simProc{name: "p" + strconv.Itoa(i), inputs: []*simTopic{first}}
		for _, t := range s.rng.Perm(len(s.topics)) {
			cand := s.topics[t]
			if len(p.inputs) < 3 && cand != first && len(cand.logs) == len(first.logs) && s.rng.IntN(2) == 0 {
				p.inputs = append(p.inputs, cand)
			}
		}
		for j := range 1 + s.rng.IntN(2) {
			p.outputs = append(p.outputs, s.newTopic(p.name+"-out"+strconv.Itoa(j), parts(), false))
		}
		s.procs = append(s.procs, p)
	}
	s.feedback = s.rng.IntN(2) == 0
	if !s.feedback {
		// Without readers outside the topology, outputs may be pruned to the
		// topics some gate downstream of them consumes.
		for _, p := range s.procs {
			p.prune = map[string][]string{}
			for _, o := range p.outputs {
				p.prune[o.name] = s.downstreamInputs(o)
			}
		}
	}
	for _, p := range s.procs {
		for part := range len(p.inputs[0].logs) {
			t := &simTask{name: p.name + "/" + strconv.Itoa(part), proc: p}
			for _, in := range p.inputs {
				t.scope = append(t.scope, in.logs[part])
				t.slow = append(t.slow, s.rng.IntN(10) < 3)
			}
			t.committed.offsets = make([]int64, len(t.scope))
			t.committed.lastDel = slices.Repeat([]int64{-1}, len(t.scope))
			p.tasks = append(p.tasks, t)
			s.tasks = append(s.tasks, t)
		}
	}
	for range 1 + s.rng.IntN(3) {
		s.prods = append(s.prods, &simProducer{transactional: s.rng.IntN(2) == 0})
	}
	var desc []string
	for _, p := range s.procs {
		var ins, outs []string
		for _, t := range p.inputs {
			ins = append(ins, fmt.Sprintf("%s(%d)", t.name, len(t.logs)))
		}
		for _, t := range p.outputs {
			outs = append(outs, fmt.Sprintf("%s(%d)", t.name, len(t.logs)))
		}
		desc = append(desc, fmt.Sprintf("%s: %v -> %v", p.name, ins, outs))
	}
	s.res.topology = fmt.Sprintf("%v feedback=%v", desc, s.feedback)
}

// downstreamInputs returns every topic consumed by a processor reachable
// from topic o.
func (s *sim) downstreamInputs(o *simTopic) []string {
	seen := map[string]bool{}
	var keep []string
	frontier := []*simTopic{o}
	for len(frontier) > 0 {
		t := frontier[0]
		frontier = frontier[1:]
		for _, p := range s.procs {
			if !slices.Contains(p.inputs, t) || seen[p.name] {
				continue
			}
			seen[p.name] = true
			for _, in := range p.inputs {
				if !slices.Contains(keep, in.name) {
					keep = append(keep, in.name)
				}
			}
			frontier = append(frontier, p.outputs...)
		}
	}
	return keep
}

// startTask builds the task's node from its committed state, as a restart
// after a crash does.
func (s *sim) startTask(t *simTask) {
	opts := []NodeOpt{withMutation(s.cfg.mutant)}
	if s.cfg.gateOff {
		opts = append(opts, DeliverOnArrival())
	}
	var ins []string
	for _, in := range t.proc.inputs {
		ins = append(ins, in.name)
	}
	opts = append(opts, Inputs(ins...))
	for _, o := range t.proc.outputs {
		if t.proc.prune != nil {
			opts = append(opts, Output(o.name, PruneTo(t.proc.prune[o.name]...)))
		} else {
			opts = append(opts, Output(o.name))
		}
	}
	n, err := NewNode[*simRec](opts...)
	if err != nil {
		s.violate("%s: new node: %v", t.name, err)
		return
	}
	if t.committed.checkpoint != nil && !s.cfg.skipRestore {
		if err := n.Restore(t.committed.checkpoint); err != nil {
			s.violate("%s: restore: %v", t.name, err)
		}
	}
	for i, l := range t.scope {
		if err := n.Seed(l.ch, t.committed.offsets[i]); err != nil {
			s.violate("%s: seed: %v", t.name, err)
		}
	}
	if s.cfg.prefer {
		// An order unrelated to arrival: by a hash of the record's id.
		n.PreferBy(func(a, b *simRec) bool { return uint32(a.id)*2654435761 < uint32(b.id)*2654435761 })
	}
	t.node = n
	t.pos = slices.Clone(t.committed.offsets)
	if s.rng.IntN(3) == 0 {
		// Re-read a little below the committed offsets, as a consumer that
		// resumes from an older position does: the replay guard must drop it.
		for i := range t.pos {
			t.pos[i] = max(0, t.pos[i]-int64(s.rng.IntN(6)))
		}
	}
	t.lastDel = slices.Clone(t.committed.lastDel)
	t.history = t.committed.history.clone()
	t.txn, t.touched, t.txnRecs = nil, nil, nil
}

func (s *sim) step(faults bool) {
	switch r := s.rng.IntN(100); {
	case r < 25:
		s.producerStep(s.prods[s.rng.IntN(len(s.prods))])
	case r < 82:
		t := s.tasks[s.rng.IntN(len(s.tasks))]
		i := s.rng.IntN(len(t.scope))
		if t.slow[i] && s.rng.IntN(8) != 0 {
			return
		}
		s.fetch(t, i, 1+s.rng.IntN(4))
	case r < 96:
		s.commit(s.tasks[s.rng.IntN(len(s.tasks))])
	default:
		if faults {
			s.crash(s.tasks[s.rng.IntN(len(s.tasks))])
		}
	}
}

func (s *sim) newRec(ch Channel, anc bitset, txn *simTxn) *simRec {
	r := &simRec{id: len(s.recs), ch: ch, anc: anc, txn: txn}
	s.recs = append(s.recs, r)
	return r
}

func (s *sim) endTxn(txn *simTxn, touched []*simLog, commit bool, recs []*simRec) {
	txn.state = txnAborted
	if commit {
		txn.state = txnCommitted
	}
	for _, l := range touched {
		l.append(simEntry{marker: true, txn: txn})
	}
	if !commit {
		for _, r := range recs {
			s.aborted.set(r.id)
		}
		s.res.aborted += len(recs)
	}
}

func (s *sim) producerStep(p *simProducer) {
	if p.txn != nil && s.rng.IntN(10) < 3 {
		var recs []*simRec
		for _, r := range s.recs {
			if r.txn == p.txn {
				recs = append(recs, r)
			}
		}
		s.endTxn(p.txn, p.touched, s.rng.IntN(10) < 7, recs)
		p.txn, p.touched = nil, nil
		return
	}
	if s.feedback && s.rng.IntN(6) == 0 {
		// Read a committed record back, as a client that reacts to outputs.
		t := s.topics[s.rng.IntN(len(s.topics))]
		l := t.logs[s.rng.IntN(len(t.logs))]
		if r, _ := l.read(int64(s.rng.IntN(int(l.end) + 1))); r != nil {
			var clock Clock
			if r.hasHeader {
				var err error
				if clock, err = DecodeClock(r.header); err != nil {
					s.violate("stamp of %s@%d does not decode: %v", r.ch, r.off, err)
				}
			}
			p.session.Consumed(r.ch, r.off, clock)
			p.hist.or(r.anc)
			p.hist.set(r.id)
		}
		return
	}
	var srcs []*simTopic
	for _, t := range s.topics {
		if t.source {
			srcs = append(srcs, t)
		}
	}
	t := srcs[s.rng.IntN(len(srcs))]
	l := t.logs[s.rng.IntN(len(t.logs))]
	if p.transactional && p.txn == nil && s.rng.IntN(2) == 0 {
		p.txn = &simTxn{}
	}
	if s.rng.IntN(10) == 0 {
		l.end += 1 + int64(s.rng.IntN(3)) // a hole, as compaction leaves
	}
	r := s.newRec(l.ch, p.hist.clone(), p.txn)
	if !p.session.Clock().IsEmpty() {
		r.header, r.hasHeader = p.session.AppendHeader(nil), true
	}
	r.off = l.append(simEntry{rec: r, txn: p.txn})
	if p.txn != nil && !slices.Contains(p.touched, l) {
		p.touched = append(p.touched, l)
	}
	p.session.Produced(l.ch, r.off)
	p.hist.set(r.id)
}

// fetch reads up to limit records of scope channel i, or reports the position
// when there is nothing to read, then drains the node.
func (s *sim) fetch(t *simTask, i, limit int) {
	l := t.scope[i]
	for range limit {
		r, next := l.read(t.pos[i])
		if r == nil {
			if err := t.node.Advance(l.ch, next); err != nil {
				s.violate("%s: advance %s: %v", t.name, l.ch, err)
			}
			t.pos[i] = next
			break
		}
		t.pos[i] = next
		// Half the records go through ReceiveNow, delivered at once when
		// they may be, as a task takes them.
		if s.rng.IntN(2) == 0 {
			_, now, err := t.node.ReceiveNow(l.ch, r.off, r.header, r.hasHeader, false, r)
			if err != nil {
				s.violate("%s: receive %s@%d: %v", t.name, l.ch, r.off, err)
				return
			}
			if now {
				s.res.deliveredNow++
				s.deliver(t, r)
			}
			continue
		}
		if _, err := t.node.ReceiveHeader(l.ch, r.off, r.header, r.hasHeader, r); err != nil {
			s.violate("%s: receive %s@%d: %v", t.name, l.ch, r.off, err)
			return
		}
	}
	s.res.maxHeld = max(s.res.maxHeld, t.node.Held())
	for {
		d, ok := t.node.Next()
		if !ok {
			return
		}
		s.deliver(t, d.Payload)
	}
}

func (s *sim) scopeIndex(t *simTask, ch Channel) int {
	return slices.IndexFunc(t.scope, func(l *simLog) bool { return l.ch == ch })
}

// deliver checks a delivery against the oracle and runs the processor.
func (s *sim) deliver(t *simTask, r *simRec) {
	s.res.delivered++
	i := s.scopeIndex(t, r.ch)
	switch {
	case r.off <= t.lastDel[i]:
		s.violate("%s delivered %s@%d again or out of order (last %d)", t.name, r.ch, r.off, t.lastDel[i])
	default:
		if skipped := t.scope[i].visibleBetween(t.lastDel[i]+1, r.off); skipped != nil {
			s.violate("%s delivered %s@%d but skipped %s@%d", t.name, r.ch, r.off, skipped.ch, skipped.off)
		}
	}
	for j, l := range t.scope {
		if a := r.anc.highestIn(l.ids, s.aborted); a >= 0 && s.recs[a].off > t.lastDel[j] {
			s.violate("causal: %s delivered %s@%d before its ancestor %s@%d (delivered up to %d)",
				t.name, r.ch, r.off, l.ch, s.recs[a].off, t.lastDel[j])
		}
	}
	t.lastDel[i] = r.off
	t.history.or(r.anc)
	t.history.set(r.id)
	for range s.rng.IntN(3) {
		o := t.proc.outputs[s.rng.IntN(len(t.proc.outputs))]
		l := o.logs[s.rng.IntN(len(o.logs))]
		if t.txn == nil {
			t.txn = &simTxn{}
		}
		stamp, err := t.node.AppendStamp(nil, o.name)
		if err != nil {
			s.violate("%s: stamp %s: %v", t.name, o.name, err)
			return
		}
		e := s.newRec(l.ch, t.history.clone(), t.txn)
		e.header, e.hasHeader = stamp, true
		e.off = l.append(simEntry{rec: e, txn: t.txn})
		if !slices.Contains(t.touched, l) {
			t.touched = append(t.touched, l)
		}
		t.txnRecs = append(t.txnRecs, e)
	}
}

// commit ends the task's transaction: outputs, offsets and checkpoint
// together. It first checks that no offset passes an undelivered record.
func (s *sim) commit(t *simTask) {
	offs := t.node.Committable()
	for _, e := range offs {
		i := s.scopeIndex(t, e.Channel)
		if r := t.scope[i].visibleBetween(t.lastDel[i]+1, e.Offset); r != nil {
			s.violate("%s commits %s at %d past undelivered %s@%d", t.name, e.Channel, e.Offset, r.ch, r.off)
		}
		t.committed.offsets[i] = e.Offset
	}
	if t.txn != nil {
		s.endTxn(t.txn, t.touched, true, t.txnRecs)
	}
	t.txn, t.touched, t.txnRecs = nil, nil, nil
	t.committed.checkpoint = t.node.Checkpoint()
	t.committed.history = t.history.clone()
	t.committed.lastDel = slices.Clone(t.lastDel)
}

// crash aborts the open transaction and restarts the task from what it
// committed.
func (s *sim) crash(t *simTask) {
	s.res.crashes++
	if t.txn != nil {
		s.endTxn(t.txn, t.touched, false, t.txnRecs)
	}
	s.startTask(t)
}

// drain stops faults and producers and runs every task to quiescence; then
// nothing may be held and every visible record must have been delivered.
func (s *sim) drain() {
	for _, p := range s.prods {
		if p.txn != nil {
			var recs []*simRec
			for _, r := range s.recs {
				if r.txn == p.txn {
					recs = append(recs, r)
				}
			}
			s.endTxn(p.txn, p.touched, s.rng.IntN(2) == 0, recs)
			p.txn, p.touched = nil, nil
		}
	}
	for round := 0; ; round++ {
		before := len(s.recs)
		progress := false
		for _, t := range s.tasks {
			for i := range t.scope {
				for {
					old := t.pos[i]
					s.fetch(t, i, 64)
					if t.pos[i] == old {
						break
					}
					progress = true
				}
			}
			s.commit(t)
		}
		if !progress && len(s.recs) == before {
			break
		}
		if round > 10_000 {
			s.violate("liveness: no quiescence after %d rounds", round)
			return
		}
	}
	for _, t := range s.tasks {
		if held := t.node.Held(); held > 0 {
			s.violate("liveness: %s still holds %d records after the drain: %+v", t.name, held, t.node.Status())
		}
		for i, l := range t.scope {
			if r := l.visibleBetween(t.lastDel[i]+1, l.end); r != nil {
				s.violate("liveness: %s never delivered %s@%d", t.name, r.ch, r.off)
			}
		}
	}
}
