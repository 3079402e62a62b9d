package connectworker

import (
	"context"
	"fmt"
	"time"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/runtime/internal/transport"
	"github.com/causeway-stream/causeway/runtime/internal/txn"
)

// sourceWriter is how the connect worker's sources write to Kafka, the
// source runner and the HTTP source alike: each write is one transaction
// of the source's producer, every record is placed by its key and stamped
// with a causal session's clock, and once the transaction commits the
// session claims the end of every partition it wrote, so that whatever
// the session writes next claims all of it. The claims are made here and
// nowhere else.
//
//causeway:owned
type sourceWriter struct {
	producer *txn.Producer
	admin    transport.Admin
	// creation says how the topics it makes are made.
	creation topicCreation
	// counts are the partition counts of the cluster's topics, as last
	// read.
	counts map[string]int32
	// used is told each topic a committed write wrote to.
	used func(topic string)
}

// newSourceWriter writes through producer, and makes the topics it
// writes as creation says when they do not exist.
func newSourceWriter(producer *txn.Producer, admin transport.Admin, creation topicCreation, used func(topic string)) sourceWriter {
	return sourceWriter{producer: producer, admin: admin, creation: creation, used: used}
}

// readCounts reads the cluster's partition counts.
func (sw *sourceWriter) readCounts(ctx context.Context) error {
	counts, err := sw.admin.PartitionCounts(ctx)
	if err != nil {
		return err
	}
	sw.counts = counts
	return nil
}

// ensureTopic makes topic when it does not exist.
func (sw *sourceWriter) ensureTopic(ctx context.Context, topic string) error {
	if _, ok := sw.counts[topic]; ok {
		return nil
	}
	g := sw.creation.spec(topic)
	counts, err := createTopic(ctx, sw.admin, topic, g.partitions, g.configs)
	if err != nil {
		return err
	}
	sw.counts = counts
	return nil
}

// sourceTxn is the open transaction of one write.
type sourceTxn struct {
	sw      *sourceWriter
	session *causal.Session
	send    func(*transport.Message) error
	header  []byte
	written map[causal.Channel]bool
	// last is the partition the last record went to, in written.
	last causal.Channel
}

// settle waits until every record sent so far has reached the broker, and
// makes the session claim the end of every partition they went to: each
// record sent after claims them, though they are all in one transaction
// (a reader under read_committed gets them together, and each partition
// in the order written). A reader that takes the records sent after only
// once their claims are met takes them after the ones settled.
func (tx *sourceTxn) settle(ctx context.Context) error {
	if err := tx.sw.producer.Flush(ctx); err != nil {
		return err
	}
	chs := make([]causal.Channel, 0, len(tx.written))
	for ch := range tx.written {
		chs = append(chs, ch)
	}
	if err := tx.sw.claim(ctx, tx.session, chs); err != nil {
		return err
	}
	// A header of its own: the client may read the one before until the
	// transaction ends.
	tx.header = tx.session.AppendHeader(nil)
	return nil
}

// record sends a record to topic (which must exist: ensureTopic), in the
// partition its key falls in, with headers, then extra, then the
// session's clock, and returns that partition.
func (tx *sourceTxn) record(topic string, key, value []byte, ts time.Time, headers []framework.Header, extra ...framework.Header) (int32, error) {
	p := framework.PartitionFor(key, tx.sw.counts[topic])
	if ch := (causal.Channel{Topic: topic, Partition: p}); ch != tx.last {
		tx.written[ch] = true
		tx.last = ch
	}
	// A list of its own: a client may hold it until the transaction ends.
	hs := make([]framework.Header, 0, len(headers)+len(extra)+1)
	hs = append(append(append(hs, headers...), extra...), framework.Header{Key: causal.HeaderKey, Value: tx.header})
	m := transport.Message{Topic: topic, Partition: p, Key: key, Value: value, Timestamp: ts, Headers: hs}
	return p, tx.send(&m)
}

// raw sends m as it is: no stamp, and no claim of it after the commit
// (the source's offset record).
func (tx *sourceTxn) raw(m *transport.Message) error { return tx.send(m) }

// write runs fill in one transaction, in which each record fill sends is
// stamped with session's clock as it was before the write, or before the
// last settle; after the commit the session claims every partition
// written. It reports whether the transaction committed: an error with
// true is the claim's. A write that fails leaves the session claiming
// what it may not hold (records settled in an aborted transaction): its
// caller gives the session up.
func (sw *sourceWriter) write(ctx context.Context, session *causal.Session, fill func(tx *sourceTxn) error) (bool, error) {
	// A header of its own for each write: a client may read it until the
	// transaction ends.
	tx := &sourceTxn{sw: sw, session: session, header: session.AppendHeader(nil), written: map[causal.Channel]bool{}}
	err := sw.producer.Do(func(send func(*transport.Message) error) error {
		tx.send = send
		return fill(tx)
	})
	if err != nil {
		return false, err
	}
	chs := make([]causal.Channel, 0, len(tx.written))
	for ch := range tx.written {
		chs = append(chs, ch)
		if sw.used != nil {
			sw.used(ch.Topic)
		}
	}
	return true, sw.claim(ctx, session, chs)
}

// claimTopics makes session claim the end of every partition of topics:
// what sources before wrote there.
func (sw *sourceWriter) claimTopics(ctx context.Context, session *causal.Session, topics []string) error {
	var chs []causal.Channel
	for _, t := range topics {
		for p := range sw.counts[t] {
			chs = append(chs, causal.Channel{Topic: t, Partition: p})
		}
	}
	return sw.claim(ctx, session, chs)
}

// claim makes session claim the ends of chs: every record there before
// now.
func (sw *sourceWriter) claim(ctx context.Context, session *causal.Session, chs []causal.Channel) error {
	if len(chs) == 0 {
		return nil
	}
	ends, err := sw.admin.Ends(ctx, chs)
	if err != nil {
		return fmt.Errorf("ends of the partitions written: %w", err)
	}
	for ch, end := range ends {
		if end > 0 {
			session.Produced(ch, end-1)
		}
	}
	return nil
}
