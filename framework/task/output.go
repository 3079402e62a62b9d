package task

// Outputs: what a processor emits, placed on a partition and stamped
// with the clock the task advertises for its topic.

import (
	"fmt"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
)

// Output is a record the task emitted, stamped and placed: Topic and
// Partition are where it goes, and its Record says the same in its own
// Topic and Partition (Offset 0), so that it is a record to produce as
// it is.
type Output struct {
	Topic     string
	Partition int32
	Record    framework.Record
	// From is the input record whose processing emitted it; the zero
	// Entry for an output of a punctuation.
	From causal.Entry
}

// output is one topic the task writes to.
type output struct {
	topic string
	// name is what the processor calls the topic (see
	// framework.Topology.ForApplication).
	name string
	// keep places every record on the task's partition instead of by key.
	keep bool
	// partitions is the topic's partition count, asked of
	// Config.OutputPartitions on the first record and kept: a topic's
	// partitions cannot change under a running task without breaking the
	// placement by key that the records already written follow.
	partitions int32
}

// partitionCount returns o's partition count.
func (t *Task) partitionCount(o *output) (int32, error) {
	if o.partitions > 0 {
		return o.partitions, nil
	}
	n, err := t.cfg.OutputPartitions(o.topic)
	if err != nil {
		return 0, fmt.Errorf("partitions of %q: %w", o.topic, err)
	}
	if n <= 0 {
		return 0, fmt.Errorf("output %q has %d partitions", o.topic, n)
	}
	o.partitions = n
	return n, nil
}

// emit stamps rec for output o and places it in the outbox.
func (t *Task) emit(o *output, rec framework.Record) error {
	stamp, err := t.appendStamp(o.topic)
	if err != nil {
		return err
	}
	rec.Headers = t.withClock(rec.Headers, stamp)
	return t.place(o, rec)
}

// place puts rec, headers as they are, in the outbox for output o.
func (t *Task) place(o *output, rec framework.Record) error {
	n, err := t.partitionCount(o)
	if err != nil {
		return err
	}
	part := t.cfg.Partition % n
	switch {
	case o.keep:
	case rec.PartitionKey != nil:
		part = framework.PartitionFor(rec.PartitionKey, n)
	case rec.Key != nil:
		part = framework.PartitionFor(rec.Key, n)
	}
	if rec.Timestamp.IsZero() {
		rec.Timestamp = t.stream
		if t.inRecord {
			rec.Timestamp = t.current.timestamp
		}
	}
	var from causal.Entry
	if t.inRecord {
		from = t.current.from
	}
	// Into a slot of the outbox one field at a time: copying a whole
	// output costs a barrier on each of its pointers while the collector
	// marks. The slot may hold an output taken before, mostly of the same
	// topic and input: the fields holding a topic or a timestamp's
	// location are written only when they change.
	if len(t.outbox) < cap(t.outbox) {
		t.outbox = t.outbox[:len(t.outbox)+1]
	} else {
		t.outbox = append(t.outbox, Output{})
	}
	out := &t.outbox[len(t.outbox)-1]
	r := &out.Record
	if out.Topic != o.topic {
		out.Topic = o.topic
	}
	if r.Topic != o.topic {
		r.Topic = o.topic
	}
	if out.From.Channel.Topic != from.Channel.Topic {
		out.From.Channel.Topic = from.Channel.Topic
	}
	if r.Timestamp != rec.Timestamp {
		r.Timestamp = rec.Timestamp
	}
	out.Partition, out.From.Channel.Partition, out.From.Offset = part, from.Channel.Partition, from.Offset
	r.Key, r.Value, r.Headers = rec.Key, rec.Value, rec.Headers
	r.Partition, r.Offset = part, 0
	return nil
}

// appendStamp encodes the stamp for output into the stamp slab.
func (t *Task) appendStamp(output string) ([]byte, error) {
	s := &t.stampSlabs
	s.room(stampSlabLen / 16)
	at := len(s.cur)
	b, err := t.node.AppendStamp(s.cur, output)
	if err != nil {
		return nil, err
	}
	// A stamp longer than the room left moved the slab to a larger array;
	// carving goes on there, which is as good.
	s.cur = b
	return b[at:len(b):len(b)], nil
}

// withClock returns hs without any clock header and with clock appended, in
// a list carved from the header slab; hs itself is never written.
func (t *Task) withClock(hs []framework.Header, clock []byte) []framework.Header {
	s := &t.headerSlabs
	if len(hs) == 0 || len(hs) == 1 && hs[0].Key == causal.HeaderKey {
		// The common case, a record whose only header is its clock: the
		// list is the new clock alone.
		s.room(1)
		at := len(s.cur)
		s.cur = s.cur[:at+1]
		h := &s.cur[at]
		if h.Key != causal.HeaderKey {
			h.Key = causal.HeaderKey
		}
		h.Value = clock
		return s.cur[at : at+1 : at+1]
	}
	n := 1
	for _, h := range hs {
		if h.Key != causal.HeaderKey {
			n++
		}
	}
	s.room(n)
	at := len(s.cur)
	// Lengthened in place, not appended to one header at a time: that
	// would store the slab's pointer again with each header.
	s.cur = s.cur[:at+n]
	list := s.cur[at : at+n : at+n]
	k := 0
	for _, h := range hs {
		if h.Key != causal.HeaderKey {
			list[k] = h
			k++
		}
	}
	list[k] = framework.Header{Key: causal.HeaderKey, Value: clock}
	return list
}

// TakeOutputs returns the records emitted since the last call. Outputs
// belong to the same transaction as the next Snapshot's offsets: produce
// them into the transaction that commits that snapshot (a runtime may
// stream them into the open transaction as they come). The returned slice
// is reused after the next call: copy out what must outlive it (the Output
// values themselves, and the records' bytes, stay valid until
// ReleaseOutputs).
//
// The outputs handed out before are not cleared, only written over: until
// ReleaseOutputs clears them, they keep the bytes they point to reachable,
// which costs less than clearing every batch.
func (t *Task) TakeOutputs() []Output {
	out := t.outbox
	t.outbox, t.spare = t.spare[:0], out
	return out
}

// ReleaseOutputs tells the task that every output it has emitted is done
// with: each was taken (TakeOutputs) and its client has sent it or copied
// it, so nothing reads the stamps and header lists the task carved for
// them any more. The task then carves the next ones from the same memory.
// With outputs not yet taken it does nothing. A caller that never calls it
// loses nothing but the reuse.
func (t *Task) ReleaseOutputs() {
	if len(t.outbox) > 0 {
		return
	}
	t.ReuseCarved()
	clear(t.outbox[:cap(t.outbox)])
	clear(t.spare[:cap(t.spare)])
	t.spare = t.spare[:0]
}

// ReuseCarved tells the task that nothing reads the stamps and header lists
// of the outputs it has emitted any more: each was taken (TakeOutputs) and
// its client has copied them. The task then carves the next ones from the
// same memory, while it is still in the processor's caches. Unlike
// ReleaseOutputs it leaves the taken outputs' records where they are,
// which costs nothing per output; a worker calls it after each batch of
// outputs it produces. With outputs not yet taken it does nothing.
func (t *Task) ReuseCarved() {
	if len(t.outbox) > 0 {
		return
	}
	t.stampSlabs.release()
	t.headerSlabs.release()
}

// The slabs' sizes, and how many ReleaseOutputs keeps for reuse: at most
// about 2 MB of stamps and 1.3 MB of header lists a task, what a task
// emitting some 20,000 records between two commits fills.
const (
	stampSlabLen    = 16 << 10
	headerSlabLen   = 256
	keptStampSlabs  = 128
	keptHeaderSlabs = 128
)
