package runtime

import (
	"hash/maphash"
	"sync"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"go.uber.org/zap"

	"github.com/causeway-stream/causeway/framework/task"
)

// refusals learns which records the broker refused after they were sent.
// librdkafka refuses a record too large for its topic, or one the broker
// finds invalid, only in that record's delivery report, and then fails the
// whole transaction. The worker asks for no delivery reports while all
// goes well: each costs a call across cgo. So after a transaction fails,
// the next ones are watched: their records' delivery reports come to a
// goroutine of refusals, and a record refused for good is remembered. When
// the rebuilt task emits it again, it goes to the processor's production
// error policy before it is sent, and the transaction can commit.
//
// This relies on processors emitting the same record again when they
// process the same input again, as deterministic processors do. A processor
// that puts the time or a random number into its output defeats it: its
// refused output keeps failing transactions, and the worker keeps reporting
// that in /status and /readyz.
type refusals struct {
	log *zap.Logger
	// watching: the open transaction is watched.
	watching bool
	// known holds the refused records, by fingerprint, with their errors.
	known map[fingerprint]error
	seed  maphash.Seed

	// reports carries watched delivery reports to the goroutine, which
	// keeps the failed ones in failed. A barrier sent after them tells
	// when the goroutine has seen everything sent before it.
	reports chan kafka.Event
	mu      sync.Mutex
	failed  []*kafka.Message
	started bool
	stop    chan struct{}
	done    chan struct{}
}

// fingerprint names an output record by where it goes and what it holds.
type fingerprint struct {
	topic      string
	partition  int32
	key, value uint64
}

// barrier is sent through reports after the delivery reports to wait for.
type barrier chan struct{}

func (barrier) String() string { return "barrier" }

// reportsBuffer is how many delivery reports may wait for the goroutine;
// more make librdkafka's poller wait, never lose them.
const reportsBuffer = 1 << 14

func newRefusals(log *zap.Logger) *refusals {
	return &refusals{log: log, known: map[fingerprint]error{}, seed: maphash.MakeSeed(),
		reports: make(chan kafka.Event, reportsBuffer), stop: make(chan struct{}), done: make(chan struct{})}
}

func (r *refusals) fingerprintOf(topic string, partition int32, key, value []byte) fingerprint {
	return fingerprint{topic: topic, partition: partition, key: maphash.Bytes(r.seed, key), value: maphash.Bytes(r.seed, value)}
}

// deliveryChan is the channel to send a record's delivery report to: nil
// (none) unless the transaction is watched.
func (r *refusals) deliveryChan() chan kafka.Event {
	if !r.watching {
		return nil
	}
	if !r.started {
		r.started = true
		go r.collect()
	}
	return r.reports
}

// collect keeps the refused records among the delivery reports.
func (r *refusals) collect() {
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
				if e.TopicPartition.Error != nil {
					r.mu.Lock()
					r.failed = append(r.failed, e)
					r.mu.Unlock()
				}
			}
		}
	}
}

// refused returns the error the broker refused o with before, if it did.
func (r *refusals) refused(o task.Output) (error, bool) {
	if len(r.known) == 0 {
		return nil, false
	}
	err, ok := r.known[r.fingerprintOf(o.Topic, o.Partition, o.Record.Key, o.Record.Value)]
	return err, ok
}

// transactionFailed learns the refusals among the delivery reports of a
// watched transaction that failed, and watches the next.
func (r *refusals) transactionFailed() {
	if r.started {
		b := make(barrier)
		select {
		case r.reports <- b:
			select {
			case <-b:
			case <-time.After(5 * time.Second):
			}
		case <-time.After(5 * time.Second):
		}
		r.mu.Lock()
		failed := r.failed
		r.failed = nil
		r.mu.Unlock()
		for _, m := range failed {
			err := m.TopicPartition.Error
			if classify(err) != classRecord || m.TopicPartition.Topic == nil {
				continue
			}
			r.known[r.fingerprintOf(*m.TopicPartition.Topic, m.TopicPartition.Partition, m.Key, m.Value)] = err
			r.log.Warn("the broker refused a record for good; when it is emitted again it goes to its processor's production error policy",
				zap.String("topic", *m.TopicPartition.Topic), zap.Int32("partition", m.TopicPartition.Partition), zap.Error(err))
		}
	}
	r.watching = true
}

// committed ends watching once a transaction went through.
func (r *refusals) committed() {
	r.watching = false
	clear(r.known)
}

// close stops the goroutine, once the producer is closed.
func (r *refusals) close() {
	if r.started {
		close(r.stop)
		<-r.done
	}
}
