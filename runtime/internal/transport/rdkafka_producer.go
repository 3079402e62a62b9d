//go:build cgo

package transport

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"go.uber.org/zap"

	"github.com/causeway-stream/causeway/causal"
)

// rdkProducer is the transactional producer on librdkafka. It asks for no
// delivery reports while all goes well, since each costs a call across
// cgo: only while watched do they come, to a goroutine of its own that
// keeps the refused records.
//
//causeway:owned
type rdkProducer struct {
	p   *kafka.Producer
	log *zap.Logger
	// topics holds a stable pointer to each output topic's name, which
	// kafka.Message wants; last is the one the last record went to.
	topics map[string]*string
	last   *string
	// out and outHeaders are reused for every record produced: Produce
	// copies the message before it returns.
	out        kafka.Message
	outHeaders []kafka.Header

	watching bool
	// reports carries watched delivery reports to the goroutine, which
	// keeps the failed ones in failed. A barrier sent after them tells
	// when the goroutine has seen everything sent before it. watched
	// counts the records produced while watching, reported (under mu)
	// their reports the goroutine has seen: librdkafka hands a report to
	// the client's poller before a failed commit returns, but the poller
	// may pass it on after.
	reports  chan kafka.Event
	watched  int64
	mu       sync.Mutex
	reported int64
	failed   []RefusedRecord
	started  bool
	stop     chan struct{}
	done     chan struct{}
	// drained is closed when drainEvents has returned.
	drained chan struct{}
}

// barrier is sent through reports after the delivery reports to wait for.
type barrier chan struct{}

func (barrier) String() string { return "barrier" }

// reportsBuffer is how many delivery reports may wait for the goroutine;
// more make librdkafka's poller wait, never lose them.
const reportsBuffer = 1 << 14

func newRdkProducer(p *kafka.Producer, log *zap.Logger) *rdkProducer {
	if log == nil {
		log = zap.NewNop()
	}
	r := &rdkProducer{p: p, log: log, topics: map[string]*string{}, reports: make(chan kafka.Event, reportsBuffer),
		stop: make(chan struct{}), done: make(chan struct{}), drained: make(chan struct{})}
	go r.drainEvents()
	return r
}

// drainEvents reads the client's event channel until Close closes it: a
// channel nothing read would fill with the client's errors, and then hold
// up its poller. The errors are logged; a fatal one also comes back from
// the calls that follow it (FatalError).
func (r *rdkProducer) drainEvents() {
	defer close(r.drained)
	for ev := range r.p.Events() {
		if e, ok := ev.(kafka.Error); ok {
			r.log.Debug("producer error event", zap.Error(e))
		}
	}
}

func (r *rdkProducer) InitTransactions(ctx context.Context) error {
	return rdkError(r.p.InitTransactions(ctx))
}
func (r *rdkProducer) BeginTransaction() error { return rdkError(r.p.BeginTransaction()) }

// Released is always true: librdkafka copies a record's key, value and
// headers when it is produced (RD_KAFKA_MSG_F_COPY).
func (r *rdkProducer) Released() bool { return true }

func (r *rdkProducer) Produce(m *Message) error {
	topic := r.last
	if topic == nil || *topic != m.Topic {
		var ok bool
		if topic, ok = r.topics[m.Topic]; !ok {
			name := m.Topic
			topic = &name
			r.topics[name] = topic
		}
		r.last = topic
	}
	r.outHeaders = r.outHeaders[:0]
	for _, h := range m.Headers {
		r.outHeaders = append(r.outHeaders, kafka.Header{Key: h.Key, Value: h.Value})
	}
	r.out = kafka.Message{TopicPartition: kafka.TopicPartition{Topic: topic, Partition: m.Partition},
		Key: m.Key, Value: m.Value, Headers: r.outHeaders, Timestamp: m.Timestamp}
	var reports chan kafka.Event
	if r.watching {
		reports = r.reports
		r.watched++
	}
	var err error
	for {
		if err = r.p.Produce(&r.out, reports); err == nil || errorCode(err) != kafka.ErrQueueFull {
			break
		}
		r.p.Flush(100)
	}
	r.out = kafka.Message{}
	clear(r.outHeaders)
	return rdkError(err)
}

// Flush calls the client's Flush for 2 ms at a time until nothing it
// produced is on its way. Each call waits for an event on the client's
// main queue, which the client's own poller may take first, so a longer
// call could wait its whole length after the last delivery; a shorter one
// returns at once without flushing (it counts whole milliseconds left).
// The client's count of what is outstanding includes the events on its
// channel, which drainEvents empties: those are left out.
func (r *rdkProducer) Flush(ctx context.Context) error {
	for {
		r.p.Flush(2)
		if r.p.Len()-len(r.p.Events()) <= 0 {
			return nil
		}
		if err := r.p.GetFatalError(); err != nil {
			return rdkError(err)
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("flush: %w", err)
		}
	}
}

func (r *rdkProducer) SendOffsetsToTransaction(ctx context.Context, offsets map[causal.Channel]int64, md GroupMetadata) error {
	tps := make([]kafka.TopicPartition, 0, len(offsets))
	for ch, off := range offsets {
		topic := ch.Topic
		tps = append(tps, kafka.TopicPartition{Topic: &topic, Partition: ch.Partition, Offset: kafka.Offset(off)})
	}
	cgm, _ := md.(*kafka.ConsumerGroupMetadata)
	return rdkError(r.p.SendOffsetsToTransaction(ctx, tps, cgm))
}

func (r *rdkProducer) CommitTransaction(ctx context.Context) error {
	return rdkError(r.p.CommitTransaction(ctx))
}

func (r *rdkProducer) AbortTransaction(ctx context.Context) error {
	if err := r.p.AbortTransaction(ctx); err != nil && errorCode(err) != kafka.ErrState {
		return rdkError(err)
	}
	return nil
}

func (r *rdkProducer) FatalError() error { return rdkError(r.p.GetFatalError()) }

func (r *rdkProducer) Watch() {
	r.watching = true
	if !r.started {
		r.started = true
		go r.collect()
	}
}

func (r *rdkProducer) Unwatch() { r.watching = false }

// collect keeps the refused records among the delivery reports.
func (r *rdkProducer) collect() {
	defer close(r.done)
	for {
		select {
		case <-r.stop:
			return
		case ev := <-r.reports:
			switch e := ev.(type) {
			case barrier:
				close(e)
			case *kafka.Message:
				r.mu.Lock()
				r.reported++
				if tp := e.TopicPartition; tp.Error != nil && tp.Topic != nil {
					r.failed = append(r.failed, RefusedRecord{
						Msg: Message{Topic: *tp.Topic, Partition: tp.Partition, Key: e.Key, Value: e.Value},
						Err: rdkError(tp.Error)})
				}
				r.mu.Unlock()
			}
		}
	}
}

func (r *rdkProducer) Refused() []RefusedRecord {
	if !r.started {
		return nil
	}
	// Every report of the records produced while watching, or 5 s.
	deadline := time.Now().Add(5 * time.Second)
	for {
		b := make(barrier)
		select {
		case r.reports <- b:
			select {
			case <-b:
			case <-time.After(time.Until(deadline)):
			}
		case <-time.After(time.Until(deadline)):
		}
		r.mu.Lock()
		all := r.reported >= r.watched
		r.mu.Unlock()
		if all || !time.Now().Before(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	failed := r.failed
	r.failed = nil
	return failed
}

func (r *rdkProducer) Close() error {
	r.p.Close()
	<-r.drained
	if r.started {
		close(r.stop)
		<-r.done
	}
	return nil
}
