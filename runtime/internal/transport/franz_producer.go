package transport

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/causeway-stream/causeway/framework"
	"github.com/twmb/franz-go/pkg/kgo"
)

// franzProducer is the transactional producer on kgo.
//
//causeway:owned
type franzProducer struct {
	cl      *kgo.Client
	txnID   string
	group   string
	promise func(*kgo.Record, error)

	// cur is the slab the records produced are carved from; kgo holds a
	// record until it has run its promise. A full slab is sealed and
	// comes back, through done, once the promises of all its records have
	// run, to be written over instead of allocated again: a record slab is
	// most of what the producer allocates, and one written over soon after
	// kgo let go of it is still in the processor's caches. taken counts
	// the slabs cur was given since the last commit or abort. produced
	// counts the records produced (the pump's alone), and finished those
	// whose promise ran (the promises' alone), so that a record costs the
	// pump no atomic operation.
	cur      *recordSlab
	taken    int
	produced int64
	finished atomic.Int64
	// doneMu guards done, the sealed slabs whose records kgo is done with,
	// which the promises add to.
	doneMu sync.Mutex
	done   []*recordSlab
	// sent counts the records of the open transaction, and offsetsAdded
	// says its offsets were added.
	sent         int
	offsetsAdded bool

	// mu guards what the promises write: the first record refused in the
	// open transaction, and, while watched, every one.
	mu       sync.Mutex
	failed   error
	watching bool
	refused  []RefusedRecord
}

// franzMaxBufferedRecords is how many produced records the franz producer
// holds at most before Produce waits for kgo to finish some: franz-go's
// own default. Each record held keeps its slab slot and the fetch its key
// and value came from; with no bound the pump ran a whole fetch ahead of
// the broker, and the worker's heap, and the fresh memory every burst
// faulted in, grew with it (docs/benchmarks.md). Ten thousand records keep
// a local broker busy; against a distant cluster, raise it with
// --kafka queue.buffering.max.messages.
const franzMaxBufferedRecords = 10000

// recordSlabLen is how many records one slab of produced records holds
// (about 160 KB), and maxSpareSlabs how many slabs the producer keeps for
// reuse at most: about 16 MB, a transaction of 100,000 records, what a
// thread producing a million records a second sends between two commits
// at the default interval, should kgo hold on to all of them.
const (
	recordSlabLen = 1024
	maxSpareSlabs = 96
)

// recordSlab is a slab of produced records, and the context each of them
// carries: kgo hands a record's Context through untouched (it fills in
// only a nil one), so the promise finds the slab of the record it
// finishes without a lookup, and a slot keeps it from one use to the
// next. As a context it is context.Background().
type recordSlab struct {
	context.Context
	records []kgo.Record
	// headers and values hold copies of the records' header lists and
	// header values, reused with the slab.
	headers []kgo.RecordHeader
	values  []byte
	// pending is how many of the records carved from the slab kgo has not
	// run the promise of, less the number carved until the slab is sealed:
	// each promise subtracts one, and sealing adds the number carved. The
	// promise or the seal that brings it to zero hands the slab back.
	pending atomic.Int64
}

func (p *franzProducer) InitTransactions(ctx context.Context) error {
	// kgo initialises the producer id on first use: ask for it now, so
	// that a previous incarnation is fenced before the worker reads.
	if _, _, err := p.cl.ProducerID(ctx); err != nil {
		return franzError(err)
	}
	return nil
}

func (p *franzProducer) BeginTransaction() error {
	p.mu.Lock()
	p.failed = nil
	p.mu.Unlock()
	p.sent, p.offsetsAdded = 0, false
	return franzError(p.cl.BeginTransaction())
}

func (p *franzProducer) Produce(m *Message) error {
	if p.cur == nil || len(p.cur.records) == cap(p.cur.records) {
		p.nextSlab()
	}
	s := p.cur
	s.records = s.records[:len(s.records)+1]
	r := &s.records[len(s.records)-1]
	// Every field, as the slot may hold a record kgo finished with
	// (TestFranzRecordFields fails when kgo adds one). One at a time, and
	// those holding pointers only when they change: copying a whole
	// record into the slab costs a barrier on each of its pointers while
	// the collector marks.
	r.Key, r.Value, r.Headers = m.Key, m.Value, s.copyHeaders(m.Headers)
	if r.Timestamp != m.Timestamp {
		r.Timestamp = m.Timestamp
	}
	if r.Topic != m.Topic {
		r.Topic = m.Topic
	}
	if r.Context != context.Context(s) {
		r.Context = s
	}
	r.Partition, r.Attrs, r.ProducerEpoch, r.ProducerID, r.LeaderEpoch, r.Offset = m.Partition, kgo.RecordAttrs{}, 0, 0, 0, 0
	p.produced++
	p.sent++
	p.cl.Produce(context.Background(), r, p.promise)
	return nil
}

// copyHeaders copies hs, and the values they hold, into the slab, and
// returns the copy: kgo reads a record's headers until its promise runs,
// and the task writes over the memory of the headers it emitted once they
// are produced (task.Task.ReuseCarved). A nil value stays nil, an empty
// one empty.
func (s *recordSlab) copyHeaders(hs []framework.Header) []kgo.RecordHeader {
	if len(hs) == 0 {
		return nil
	}
	at := len(s.headers)
	for _, h := range hs {
		v := h.Value
		if len(v) > 0 { // an empty one, nil or not, has no bytes to copy
			from := len(s.values)
			// Growing the slice leaves the records carved before pointing
			// into the array it had: they keep it alive, and read it as it
			// was.
			s.values = append(s.values, v...)
			v = s.values[from:len(s.values):len(s.values)]
		}
		s.headers = append(s.headers, kgo.RecordHeader{Key: h.Key, Value: v})
	}
	return s.headers[at:len(s.headers):len(s.headers)]
}

// reset empties the slab for records to be carved from it again.
func (s *recordSlab) reset() {
	s.records, s.headers, s.values = s.records[:0], s.headers[:0], s.values[:0]
}

// nextSlab seals the full current slab and takes one kgo is done with, or
// a new one if none is. A sealed slab whose promises have all run already
// is taken again at once.
func (p *franzProducer) nextSlab() {
	p.taken++
	if s := p.cur; s != nil {
		if s.pending.Add(int64(len(s.records))) == 0 {
			s.reset()
			return
		}
	}
	p.doneMu.Lock()
	if n := len(p.done); n > 0 {
		p.cur = p.done[n-1]
		p.done[n-1] = nil
		p.done = p.done[:n-1]
		p.doneMu.Unlock()
		p.cur.reset()
		return
	}
	p.doneMu.Unlock()
	p.cur = &recordSlab{Context: context.Background(), records: make([]kgo.Record, 0, recordSlabLen)}
}

// Released is true: the producer keeps copies of the headers it is given,
// and nothing else of a task's outputs that the task writes over.
func (p *franzProducer) Released() bool { return true }

// outstanding is how many records produced kgo has not run the promise of.
func (p *franzProducer) outstanding() int64 { return p.produced - p.finished.Load() }

// recycle, once kgo has run the promise of every record produced, empties
// the current slab for the next transaction and lets go of the slabs done
// beyond what the last transaction took and maxSpareSlabs, so that a
// producer whose load fell does not keep what it no longer needs.
func (p *franzProducer) recycle() {
	if p.outstanding() != 0 {
		return
	}
	if s := p.cur; s != nil {
		// Not sealed: its promises took its count below zero.
		s.pending.Store(0)
		s.reset()
	}
	p.doneMu.Lock()
	if n := min(p.taken+1, maxSpareSlabs); len(p.done) > n {
		clear(p.done[n:])
		p.done = p.done[:n]
	}
	p.doneMu.Unlock()
	p.taken = 0
}

// delivered is every record's promise. What it reads of r comes first:
// once r's slab is handed back, the pump may write over r.
func (p *franzProducer) delivered(r *kgo.Record, err error) {
	if err != nil {
		p.refuse(r, franzError(err))
	}
	if s, ok := r.Context.(*recordSlab); ok && s.pending.Add(-1) == 0 {
		p.doneMu.Lock()
		p.done = append(p.done, s)
		p.doneMu.Unlock()
	}
	// Counted last: recycle empties the current slab once every promise
	// has counted, and so is done with its record.
	p.finished.Add(1)
}

// refuse notes r, which Kafka refused with err.
func (p *franzProducer) refuse(r *kgo.Record, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.failed == nil {
		p.failed = fmt.Errorf("produce to %s: %w", PartitionString(r.Topic, r.Partition), err)
	}
	if p.watching {
		p.refused = append(p.refused, RefusedRecord{Msg: Message{Topic: r.Topic, Partition: r.Partition, Key: r.Key, Value: r.Value}, Err: err})
	}
}

// FatalError is nil: kgo reports a fenced producer through the calls
// themselves, which classify sorts as fatal.
func (p *franzProducer) FatalError() error { return nil }

func (p *franzProducer) Watch() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.watching = true
}

func (p *franzProducer) Unwatch() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.watching = false
	p.refused = nil
}

func (p *franzProducer) Refused() []RefusedRecord {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = p.cl.Flush(ctx) // every record's outcome is known after it
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.refused
	p.refused = nil
	return out
}

func (p *franzProducer) Close() error {
	p.cl.Close()
	return nil
}
