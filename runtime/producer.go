package runtime

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework/task"
	"github.com/causeway-stream/causeway/runtime/internal/transport"
)

// txnProducer owns the worker's transactional producer and the life of its
// transactions: begin, send, commit with the consumer's offsets, abort. It
// counts what each transaction carried and hands errors back classified;
// what to do about them is the caller's (see classify).
//
//causeway:owned
type txnProducer struct {
	client  transport.Producer
	log     *zap.Logger
	metrics *Metrics
	// stop cuts a retry's backoff short when the worker stops.
	stop <-chan struct{}

	// open is set while a transaction is open: outputs stream into it as
	// tasks emit them, and commit closes it.
	open bool
	// topics holds what the producer keeps per output topic; last is the
	// one the last output went to, which the next mostly goes to too.
	topics map[string]*outTopic
	last   *outTopic
	// out is reused for every record produced: Produce is done with it
	// when it returns.
	out transport.Message
	// refusals watches the transactions after one failed, to learn which
	// records the broker refused.
	refusals *refusals
}

// outTopic is the producer's state for one output topic.
type outTopic struct {
	name string
	// produced counts the outputs in the open transaction.
	produced int
}

func newTxnProducer(client transport.Producer, log *zap.Logger, metrics *Metrics, stop <-chan struct{}) *txnProducer {
	return &txnProducer{client: client, log: log, metrics: metrics, stop: stop, topics: map[string]*outTopic{}, refusals: newRefusals(log)}
}

// begin opens a transaction if none is open.
func (p *txnProducer) begin() error {
	if p.open {
		return nil
	}
	if err := p.client.BeginTransaction(); err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	p.open = true
	return nil
}

// send produces one task output into the open transaction (opening one if
// needed). The output's record goes to the client as it is: it names its
// topic and partition itself (see task.Output).
func (p *txnProducer) send(o *task.Output) error {
	if err, ok := p.refusals.refused(o); ok {
		return err
	}
	if err := p.begin(); err != nil {
		return err
	}
	ot := p.last
	if ot == nil || ot.name != o.Topic {
		var ok bool
		if ot, ok = p.topics[o.Topic]; !ok {
			ot = &outTopic{name: o.Topic}
			p.topics[o.Topic] = ot
		}
		p.last = ot
	}
	if err := p.produceMessage((*transport.Message)(&o.Record)); err != nil {
		return err
	}
	ot.produced++
	return nil
}

// produce queues m into the open transaction. The message handed to the
// client lives in the producer, so that passing it by pointer through the
// client's interface does not allocate one per record; it keeps the last
// record's bytes reachable until the next, which costs less than clearing
// it every time.
func (p *txnProducer) produce(m transport.Message) error {
	p.out = m
	return p.produceMessage(&p.out)
}

// produceState queues m, a record of a task's state (a store change or
// a checkpoint), into the open transaction, unless the broker refused it
// for good in a transaction before (see refusals): its error then.
func (p *txnProducer) produceState(m transport.Message) error {
	if err, ok := p.refusals.refusedRecord(m.Topic, m.Partition, m.Key, m.Value); ok {
		return err
	}
	return p.produce(m)
}

// produceMessage queues m into the open transaction.
func (p *txnProducer) produceMessage(m *transport.Message) error {
	if err := p.client.Produce(m); err != nil {
		return fmt.Errorf("produce to %s: %w", transport.PartitionString(m.Topic, m.Partition), err)
	}
	return nil
}

// commit sends the consumer's offsets with the group metadata (KIP-447)
// and commits the open transaction, retrying a retriable failure a few
// times with backoff.
func (p *txnProducer) commit(offsets map[causal.Channel]int64, md transport.GroupMetadata) error {
	if err := p.begin(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if len(offsets) > 0 {
		if err := p.client.SendOffsetsToTransaction(ctx, offsets, md); err != nil {
			return fmt.Errorf("send offsets: %w", err)
		}
	}
	backoff := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := p.client.CommitTransaction(ctx)
		if err == nil {
			break
		}
		if transport.Classify(err) != transport.ClassRetriable || attempt == 5 {
			return fmt.Errorf("commit transaction: %w", err)
		}
		p.log.Warn("commit failed, retrying", zap.Int("attempt", attempt), zap.Error(err))
		select {
		case <-time.After(backoff):
		case <-p.stop:
			return fmt.Errorf("commit transaction: %w", err)
		}
		backoff *= 2
	}
	p.open = false
	p.refusals.committed(p.client)
	for _, ot := range p.topics {
		if ot.produced > 0 {
			p.metrics.RecordsOut.WithLabelValues(ot.name).Add(float64(ot.produced))
			ot.produced = 0
		}
	}
	p.metrics.Commits.Inc()
	return nil
}

// abort aborts the open transaction, if any. It returns an error only when
// the producer can no longer be used.
func (p *txnProducer) abort() error {
	if !p.open {
		return nil
	}
	p.open = false
	for _, ot := range p.topics {
		ot.produced = 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.client.AbortTransaction(ctx); err != nil {
		if transport.Classify(err) == transport.ClassFatal {
			return fmt.Errorf("abort transaction: %w", err)
		}
		p.log.Warn("abort transaction", zap.Error(err))
		return nil
	}
	p.metrics.Aborts.Inc()
	return nil
}

// fatal reports whether err, or the producer's own state, means the
// producer cannot go on.
func (p *txnProducer) fatal(err error) bool {
	return transport.Classify(err) == transport.ClassFatal || p.client.FatalError() != nil
}
