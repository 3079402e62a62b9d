// Package txn is a worker's transactional producer and the one way its
// transactions go: begin, send, commit (with the consumer's offsets, for
// a group member), abort. Every kind of worker (stream threads, sink and
// source tasks, the connect worker's state topic) writes to Kafka through
// it, so they share one discipline: a transaction begun is always ended,
// a retriable commit failure is retried with backoff, errors come back
// sorted into transport's classes, and a record the broker refused for
// good in a failed transaction is known when it is sent again (refusals).
//
// What to do about an error is the caller's: abort and rebuild, fail a
// task, or stop the worker.
package txn

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/runtime/internal/transport"
)

// Options are a Producer's settings; the zero value of each is usable.
type Options struct {
	// Log is where retries and refusals are logged. Default: no logging.
	Log *zap.Logger
	// Stop cuts a commit retry's backoff short when closed. Default: never.
	Stop <-chan struct{}
	// OnCommit is told of each commit that went through, and OnCommitted
	// then of each topic that got records in it through Send, with how
	// many. Default: nothing.
	OnCommit    func()
	OnCommitted func(topic string, records int)
	// OnAbort is told of each abort that went through. Default: nothing.
	OnAbort func()
	// CommitTimeout bounds the sending of offsets and the commit, retries
	// included, an abort, and a flush. Default: 30 s.
	CommitTimeout time.Duration
	// CommitAttempts is how many times a retriable commit failure is
	// tried. Default: 5.
	CommitAttempts int
}

// Producer owns a transactional client and the life of its transactions.
// It is used from one goroutine at a time.
//
//causeway:owned
type Producer struct {
	client transport.Producer
	opts   Options
	// open is set while a transaction is open.
	open bool
	// produced counts, per topic, the records Send put into the open
	// transaction; last is the topic the last one went to, which the next
	// mostly goes to too.
	produced map[string]*topicCount
	last     *topicCount
	// out is reused for records SendCopy produces: the client is done with
	// the Message itself when Produce returns.
	out transport.Message
	// refusals learns which records the broker refused after a failed
	// transaction.
	refusals *refusals
}

// topicCount is how many records Send put into the open transaction for
// one topic.
type topicCount struct {
	name    string
	records int
}

// New returns a producer over client; Init readies its transactions.
func New(client transport.Producer, opts Options) *Producer {
	if opts.Log == nil {
		opts.Log = zap.NewNop()
	}
	if opts.CommitTimeout <= 0 {
		opts.CommitTimeout = 30 * time.Second
	}
	if opts.CommitAttempts <= 0 {
		opts.CommitAttempts = 5
	}
	return &Producer{client: client, opts: opts, produced: map[string]*topicCount{}, refusals: newRefusals(opts.Log)}
}

// Init readies the client's transactions (fencing an earlier producer
// with the same transactional id, and ending what it left open).
func (p *Producer) Init(ctx context.Context) error { return p.client.InitTransactions(ctx) }

// Open reports whether a transaction is open.
func (p *Producer) Open() bool { return p.open }

// Begin opens a transaction if none is open.
func (p *Producer) Begin() error {
	if p.open {
		return nil
	}
	if err := p.client.BeginTransaction(); err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	p.open = true
	return nil
}

// Send produces m into the open transaction, opening one if needed, and
// counts it for OnCommit. A record the broker refused for good in a
// failed transaction before is not sent: its error is returned, for the
// caller's error policy.
func (p *Producer) Send(m *transport.Message) error {
	if err, ok := p.refusals.refused(m.Topic, m.Partition, m.Key, m.Value); ok {
		return err
	}
	if err := p.Begin(); err != nil {
		return err
	}
	c := p.last
	if c == nil || c.name != m.Topic {
		var ok bool
		if c, ok = p.produced[m.Topic]; !ok {
			c = &topicCount{name: m.Topic}
			p.produced[m.Topic] = c
		}
		p.last = c
	}
	if err := p.produce(m); err != nil {
		return err
	}
	c.records++
	return nil
}

// SendCopy is Send without the count, for records the worker writes
// beside its outputs (store changes, checkpoints) into a transaction
// already open. m is copied into the producer, so that passing it to the
// client does not make it escape.
func (p *Producer) SendCopy(m transport.Message) error {
	if err, ok := p.refusals.refused(m.Topic, m.Partition, m.Key, m.Value); ok {
		return err
	}
	p.out = m
	return p.produce(&p.out)
}

func (p *Producer) produce(m *transport.Message) error {
	if err := p.client.Produce(m); err != nil {
		return fmt.Errorf("produce to %s: %w", transport.PartitionString(m.Topic, m.Partition), err)
	}
	return nil
}

// Flush waits until every record sent into the open transaction has
// reached the broker (transport.Producer's Flush), for at most
// CommitTimeout, as a commit's own flush does.
func (p *Producer) Flush(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, p.opts.CommitTimeout)
	defer cancel()
	if err := p.client.Flush(ctx); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	return nil
}

// Commit sends offsets with the group metadata md (KIP-447), when there
// are any, and commits the open transaction (opening one if none is), a
// retriable failure tried again with backoff.
func (p *Producer) Commit(offsets map[causal.Channel]int64, md transport.GroupMetadata) error {
	if err := p.Begin(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.opts.CommitTimeout)
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
		if transport.Classify(err) != transport.ClassRetriable || attempt >= p.opts.CommitAttempts {
			return fmt.Errorf("commit transaction: %w", err)
		}
		p.opts.Log.Warn("commit failed, retrying", zap.Int("attempt", attempt), zap.Error(err))
		select {
		case <-time.After(backoff):
		case <-p.opts.Stop:
			return fmt.Errorf("commit transaction: %w", err)
		}
		backoff *= 2
	}
	p.open = false
	p.refusals.committed(p.client)
	if p.opts.OnCommit != nil {
		p.opts.OnCommit()
	}
	for _, c := range p.produced {
		if c.records > 0 && p.opts.OnCommitted != nil {
			p.opts.OnCommitted(c.name, c.records)
		}
		c.records = 0
	}
	return nil
}

// Abort aborts the open transaction, if any. It returns an error only
// when the producer can no longer be used (a fatal one).
func (p *Producer) Abort() error {
	if !p.open {
		return nil
	}
	p.open = false
	for _, c := range p.produced {
		c.records = 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.opts.CommitTimeout)
	defer cancel()
	if err := p.client.AbortTransaction(ctx); err != nil {
		if transport.Classify(err) == transport.ClassFatal {
			return fmt.Errorf("abort transaction: %w", err)
		}
		p.opts.Log.Warn("abort transaction", zap.Error(err))
		return nil
	}
	if p.opts.OnAbort != nil {
		p.opts.OnAbort()
	}
	return nil
}

// Failed is told that the open transaction failed: the records the broker
// refused in it for good are learned, and the next transactions watched.
// The caller then aborts.
func (p *Producer) Failed() { p.refusals.transactionFailed(p.client) }

// Do writes what write sends in one transaction of its own: it begins
// one, commits it when write returns nil, and aborts it otherwise, so a
// transaction begun is always ended. write's errors come back as they
// are, with the abort's beside them when it failed too.
func (p *Producer) Do(write func(send func(m *transport.Message) error) error) error {
	if err := p.Begin(); err != nil {
		return err
	}
	if err := write(p.Send); err != nil {
		return errors.Join(err, p.Abort())
	}
	if err := p.Commit(nil, nil); err != nil {
		p.Failed()
		return errors.Join(err, p.Abort())
	}
	return nil
}

// Fatal reports whether err, or the client's own state, means the
// producer cannot go on.
func (p *Producer) Fatal(err error) bool {
	return transport.Classify(err) == transport.ClassFatal || p.client.FatalError() != nil
}

// Released reports whether the client holds on to none of the header
// lists produced so far (transport.Producer's Released).
func (p *Producer) Released() bool { return p.client.Released() }

// Close closes the client.
func (p *Producer) Close() error { return p.client.Close() }
