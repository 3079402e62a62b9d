package transporttest

import (
	"context"
	"errors"
	"fmt"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/runtime/internal/transport"
)

// ErrFenced is the fatal error of a producer another one with its
// transactional id fenced.
var ErrFenced = errors.New("producer fenced by a newer instance with the same transactional id")

// producer is a transactional producer on the cluster. Like a client's,
// it is used from one goroutine at a time.
type producer struct {
	c  *Cluster
	id string
	// epoch is the one InitTransactions got; 0 before.
	epoch int
	open  bool
	// pending are the open transaction's records and offsets; flushed
	// are where its records Flush appended lie.
	pending []transport.Message
	flushed []flushedEntry
	offsets map[string]map[causal.Channel]int64
	// refused are the open transaction's records over their topic's
	// limit; watching keeps them for Refused.
	refused  []transport.RefusedRecord
	watching bool
	kept     []transport.RefusedRecord
	fatal    error
}

var _ transport.Producer = (*producer)(nil)

// InitTransactions takes the transactional id, fencing the producer
// that held it, and aborts what that producer flushed into a transaction
// it left open, as the broker does: readers then pass those records.
func (p *producer) InitTransactions(context.Context) error {
	p.c.mu.Lock()
	defer p.c.mu.Unlock()
	p.c.epochs[p.id]++
	p.epoch = p.c.epochs[p.id]
	if old := p.c.holders[p.id]; old != nil && old != p && len(old.flushed) > 0 {
		old.settleLocked(aborted, map[causal.Channel]bool{})
		old.flushed = nil
		p.c.broadcastLocked()
	}
	p.c.holders[p.id] = p
	return nil
}

// fencedLocked reports, and remembers, whether a newer producer took the
// transactional id.
func (p *producer) fencedLocked() error {
	if p.fatal == nil && p.c.epochs[p.id] != p.epoch {
		p.fatal = &transport.ClientError{Class: transport.ClassFatal, Err: fmt.Errorf("%s: %w", p.id, ErrFenced)}
	}
	return p.fatal
}

func (p *producer) BeginTransaction() error {
	p.c.mu.Lock()
	defer p.c.mu.Unlock()
	if err := p.fencedLocked(); err != nil {
		return err
	}
	if p.epoch == 0 || p.open {
		return &transport.ClientError{Class: transport.ClassFatal, Err: errors.New("begin: transactions not initialised, or one already open")}
	}
	p.open = true
	return nil
}

func (p *producer) Produce(m *transport.Message) error {
	p.c.mu.Lock()
	defer p.c.mu.Unlock()
	if err := p.fencedLocked(); err != nil {
		return err
	}
	if !p.open {
		return &transport.ClientError{Class: transport.ClassFatal, Err: errors.New("produce outside a transaction")}
	}
	if _, err := p.c.partitionLocked(m.Channel()); err != nil {
		return err
	}
	msg := copyMessage(*m)
	if size := recordSize(msg); size > p.c.topics[m.Topic].maxBytes {
		p.refused = append(p.refused, transport.RefusedRecord{Msg: msg, Err: &transport.ClientError{Class: transport.ClassRecord, Kind: transport.KindTooLarge,
			Err: fmt.Errorf("record of %d bytes is larger than the %d bytes %s takes", size, p.c.topics[m.Topic].maxBytes, m.Topic)}})
		return nil
	}
	p.pending = append(p.pending, msg)
	return nil
}

// flushedEntry is where a record of the open transaction lies.
type flushedEntry struct {
	ch causal.Channel
	at int
}

// Flush appends the open transaction's records to their partitions, where
// they wait, unread, for the transaction's end.
func (p *producer) Flush(context.Context) error {
	p.c.mu.Lock()
	defer p.c.mu.Unlock()
	if err := p.fencedLocked(); err != nil {
		return err
	}
	for _, m := range p.pending {
		log, _ := p.c.partitionLocked(m.Channel())
		m.Offset = int64(len(*log))
		p.flushed = append(p.flushed, flushedEntry{ch: m.Channel(), at: len(*log)})
		*log = append(*log, entry{msg: m, state: open})
	}
	p.pending = nil
	return nil
}

// settleLocked gives the records Flush appended state, and appends a
// marker to each partition they, or the records in written, lie in.
func (p *producer) settleLocked(state entryState, written map[causal.Channel]bool) {
	for _, f := range p.flushed {
		log, _ := p.c.partitionLocked(f.ch)
		(*log)[f.at].state = state
		written[f.ch] = true
	}
	for _, ch := range sortedChannels(written) {
		log, _ := p.c.partitionLocked(ch)
		*log = append(*log, entry{marker: true, msg: transport.Message{Topic: ch.Topic, Partition: ch.Partition, Offset: int64(len(*log))}})
	}
}

// recordSize is about what a record takes in a batch.
func recordSize(m transport.Message) int {
	n := len(m.Key) + len(m.Value) + 21
	for _, h := range m.Headers {
		n += len(h.Key) + len(h.Value) + 2
	}
	return n
}

func (p *producer) SendOffsetsToTransaction(_ context.Context, offsets map[causal.Channel]int64, md transport.GroupMetadata) error {
	p.c.mu.Lock()
	defer p.c.mu.Unlock()
	if err := p.fencedLocked(); err != nil {
		return err
	}
	group, ok := md.(string)
	if !ok || !p.open {
		return &transport.ClientError{Class: transport.ClassFatal, Err: fmt.Errorf("send offsets with group metadata %v outside a transaction", md)}
	}
	if p.offsets == nil {
		p.offsets = map[string]map[causal.Channel]int64{}
	}
	mergeOffsets(p.offsets, group, offsets)
	return nil
}

// mergeOffsets sets group's offsets in into to offs.
func mergeOffsets(into map[string]map[causal.Channel]int64, group string, offs map[causal.Channel]int64) {
	if into[group] == nil {
		into[group] = map[causal.Channel]int64{}
	}
	for ch, o := range offs {
		into[group][ch] = o
	}
}

func (p *producer) CommitTransaction(context.Context) error {
	p.c.mu.Lock()
	defer p.c.mu.Unlock()
	if err := p.fencedLocked(); err != nil {
		return err
	}
	if !p.open {
		return &transport.ClientError{Class: transport.ClassFatal, Err: errors.New("commit without an open transaction")}
	}
	if p.c.failCommits > 0 {
		p.c.failCommits--
		return &transport.ClientError{Class: transport.ClassRetriable, Err: errors.New("coordinator not available (transporttest)")}
	}
	if len(p.refused) > 0 {
		if p.watching {
			p.kept = append(p.kept, p.refused...)
		}
		err := p.refused[0].Err
		p.refused = nil
		return &transport.ClientError{Class: transport.ClassAbortable, Err: fmt.Errorf("transaction failed: %w", err)}
	}
	written := map[causal.Channel]bool{}
	for _, m := range p.pending {
		log, _ := p.c.partitionLocked(m.Channel())
		m.Offset = int64(len(*log))
		*log = append(*log, entry{msg: m})
		written[m.Channel()] = true
	}
	p.settleLocked(committed, written)
	for group, offs := range p.offsets {
		mergeOffsets(p.c.offsets, group, offs)
	}
	p.endLocked()
	p.c.broadcastLocked()
	return nil
}

func (p *producer) AbortTransaction(context.Context) error {
	p.c.mu.Lock()
	defer p.c.mu.Unlock()
	if err := p.fencedLocked(); err != nil {
		return err
	}
	if p.open && p.watching {
		p.kept = append(p.kept, p.refused...)
	}
	if len(p.flushed) > 0 {
		p.settleLocked(aborted, map[causal.Channel]bool{})
		p.c.broadcastLocked()
	}
	p.endLocked()
	return nil
}

// endLocked forgets the open transaction.
func (p *producer) endLocked() {
	p.open, p.pending, p.flushed, p.offsets, p.refused = false, nil, nil, nil, nil
}

func (p *producer) FatalError() error {
	p.c.mu.Lock()
	defer p.c.mu.Unlock()
	return p.fencedLocked()
}

// Released: the producer copies what it is given.
func (p *producer) Released() bool { return true }

func (p *producer) Watch() {
	p.c.mu.Lock()
	defer p.c.mu.Unlock()
	p.watching = true
}

func (p *producer) Unwatch() {
	p.c.mu.Lock()
	defer p.c.mu.Unlock()
	p.watching, p.kept = false, nil
}

func (p *producer) Refused() []transport.RefusedRecord {
	p.c.mu.Lock()
	defer p.c.mu.Unlock()
	out := p.kept
	p.kept = nil
	return out
}

func (p *producer) Close() error { return nil }

// admin answers for the cluster; group is its application's.
type admin struct {
	c     *Cluster
	group string
}

var _ transport.Admin = admin{}

func (a admin) PartitionCounts(context.Context) (map[string]int32, error) {
	a.c.mu.Lock()
	defer a.c.mu.Unlock()
	return a.c.countsLocked(), nil
}

// ClusterID is the in-process cluster's id (Cluster.ID).
func (a admin) ClusterID(context.Context) (string, error) { return a.c.ID(), nil }

func (a admin) CreateTopics(_ context.Context, specs []transport.TopicSpec) error {
	a.c.mu.Lock()
	defer a.c.mu.Unlock()
	for _, s := range specs {
		if err := a.c.createLocked(s); err != nil {
			return err
		}
	}
	return nil
}

func (a admin) GroupCommitted(_ context.Context, chs []causal.Channel) (map[causal.Channel]int64, error) {
	a.c.mu.Lock()
	defer a.c.mu.Unlock()
	return committedLocked(a.c, a.group, chs), nil
}

func (a admin) Ends(_ context.Context, chs []causal.Channel) (map[causal.Channel]int64, error) {
	a.c.mu.Lock()
	defer a.c.mu.Unlock()
	out := make(map[causal.Channel]int64, len(chs))
	for _, ch := range chs {
		out[ch] = a.c.endLocked(ch)
	}
	return out, nil
}

func (a admin) Close() {}

// committedLocked is group's committed offsets of chs.
func committedLocked(c *Cluster, group string, chs []causal.Channel) map[causal.Channel]int64 {
	out := map[causal.Channel]int64{}
	for _, ch := range chs {
		if o, ok := c.offsets[group][ch]; ok {
			out[ch] = o
		}
	}
	return out
}
