package runtime

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/runtime/internal/upstream"
	"go.uber.org/zap"
)

// The worker talks to Kafka through the interfaces in this file, each
// listing only the calls one part makes, in the worker's own types. A
// transport implements them with one client library: librdkafka through
// confluent-kafka-go (transport_rdkafka.go, built with cgo) or franz-go
// (transport_franz.go). The unit tests put in-process fakes in their
// place, so the task manager and the failure policy are tested without a
// broker.

// message is a Kafka record as the worker's parts see it: one a consumer
// fetched, or one the producer sends (Offset unused). It is a
// framework.Record, so that a fetched message is handed to a task, and a
// task's output to the producer, as it is (a pointer conversion), without
// copying.
type message framework.Record

// channel is the channel the message belongs to.
func (m *message) channel() causal.Channel {
	return causal.Channel{Topic: m.Topic, Partition: m.Partition}
}

// eventKind is what a consumerEvent reports.
type eventKind uint8

const (
	// eventRecord: msg is a fetched record.
	eventRecord eventKind = iota + 1
	// eventPosition: the partition msg names has been read up to
	// msg.Offset, the next offset to read, past what records the consumer
	// handed out (transaction markers, the end of the partition).
	eventPosition
	// eventPartitionError: err is an error of the partition msg names.
	eventPartitionError
	// eventError: err is the client's, and it goes on.
	eventError
	// eventFatal: err is the client's, and it cannot go on.
	eventFatal
)

// consumerEvent is one thing the group consumer reports from Poll.
type consumerEvent struct {
	kind eventKind
	msg  message
	err  error
}

// pollFunc takes up to max events into batch, waiting up to timeout for
// the first, and returns how many it took. A rebalance the consumer
// reports during the call runs its handler before Poll returns.
type pollFunc func(timeout time.Duration, max int, batch *[]consumerEvent) int

// rebalanceHandler is what the group consumer tells of the group's
// rebalances. It calls them while the pump is inside Poll: on the pump's
// goroutine, or on the client's while the pump waits for it.
type rebalanceHandler interface {
	// assigned is called with a new assignment; it calls Assign with the
	// offsets to read the partitions from.
	assigned(chs []causal.Channel) error
	// revoked is called before the assignment is taken away; lost says it
	// already was (the member fell out of the group), so that nothing can
	// be committed for it.
	revoked(chs []causal.Channel, lost bool)
}

// offsetSource is what the task manager asks of the cluster to decide where
// a task resumes: the group's committed offsets and a partition's bounds.
type offsetSource interface {
	// Committed returns the group's committed offsets (the next offset to
	// read) of chs; a channel with none is left out.
	Committed(chs []causal.Channel) (map[causal.Channel]int64, error)
	// Watermarks asks the broker for ch's low and high watermarks; the
	// high one counts the records of open transactions.
	Watermarks(ch causal.Channel) (low, high int64, err error)
}

// groupMetadata is the consumer's group membership as a transactional
// commit of offsets needs it (KIP-447); each transport has its own.
type groupMetadata any

// groupConsumer is the worker's member of the consumer group.
type groupConsumer interface {
	offsetSource
	// Subscribe joins the group for topics; h hears of rebalances.
	Subscribe(topics []string, h rebalanceHandler) error
	// Poll is a pollFunc.
	Poll(timeout time.Duration, max int, batch *[]consumerEvent) int
	// Assign starts reading the assigned partitions at the given offsets;
	// it is called from the assigned handler.
	Assign(starts map[causal.Channel]int64) error
	Seek(ch causal.Channel, offset int64) error
	Pause(chs []causal.Channel) error
	Resume(chs []causal.Channel) error
	// Position returns where the consumer reads each of chs next, for
	// those it knows.
	Position(chs []causal.Channel) (map[causal.Channel]int64, error)
	// CachedWatermarks is the consumer's own view of a partition's bounds,
	// from its fetches: no request to the broker. ok is false when it has
	// none.
	CachedWatermarks(ch causal.Channel) (low, high int64, ok bool)
	GroupMetadata() (groupMetadata, error)
	Close() error
}

// producerClient is the transactional producer.
type producerClient interface {
	InitTransactions(ctx context.Context) error
	BeginTransaction() error
	// Produce queues m into the open transaction, waiting for room when
	// the local queue is full. m may be reused once it returns; the key
	// and value it points to stay unchanged until the transaction ends (a
	// client may send them later, as they are), and its header list, with
	// the header values, until Released reports true.
	Produce(m *message) error
	SendOffsetsToTransaction(ctx context.Context, offsets map[causal.Channel]int64, md groupMetadata) error
	CommitTransaction(ctx context.Context) error
	// AbortTransaction aborts the open transaction; with none open it
	// returns nil.
	AbortTransaction(ctx context.Context) error
	// FatalError is the producer's fatal error, if it has one.
	FatalError() error
	// Released reports whether the client holds on to no header list (or
	// header value) of the records produced so far: it copied each, or it
	// is done with each (their outcomes are known). The worker then lets
	// its tasks write over the memory of the headers they emitted.
	Released() bool
	// Watch makes the producer keep, until Refused, the records of this
	// and later transactions that the broker refuses (see refusals).
	// Unwatch stops it.
	Watch()
	Unwatch()
	// Refused returns the refused records kept since Watch, once every
	// record sent before has its outcome (or a few seconds passed).
	Refused() []refusedRecord
	Close() error
}

// refusedRecord is a record the broker refused, with its error.
type refusedRecord struct {
	msg message
	err error
}

// topicSpec is a topic to create.
type topicSpec struct {
	name       string
	partitions int32
	configs    map[string]string
}

// clusterAdmin is what the worker asks of the cluster besides its group:
// the topic manager (topics.go) and following clocks upstream
// (upstream.go).
type clusterAdmin interface {
	upstream.Cluster
	// PartitionCounts returns the partition count of every topic of the
	// cluster.
	PartitionCounts(ctx context.Context) (map[string]int32, error)
	// CreateTopics creates the topics; one that exists already is no
	// error.
	CreateTopics(ctx context.Context, specs []topicSpec) error
	Close()
}

// clientRole is which kind of client a configuration is for.
type clientRole int

const (
	consumerRole clientRole = iota
	producerRole
)

// transport makes a worker's Kafka clients with one client library.
// clientSettings is what a transport makes its clients from: the
// worker's configuration, the bootstrap servers it connects to (the
// embedded broker's when none were given) and its instance id.
type clientSettings struct {
	cfg        Config
	bootstrap  string
	instanceID string
	log        *zap.Logger
}

type transport interface {
	// producer returns the worker's transactional producer (transactions
	// not yet initialised) and an admin client.
	producer(s clientSettings) (producerClient, clusterAdmin, error)
	// consumer returns the worker's group consumer.
	consumer(s clientSettings) (groupConsumer, error)
	// pollBatch is the most events the pump takes from the consumer
	// before it handles them.
	pollBatch() int
}

// errorKind names the few Kafka errors the worker tells apart beyond their
// class.
type errorKind uint8

const (
	kindOther errorKind = iota
	// kindTooLarge: a record too large for its topic.
	kindTooLarge
	// kindOffsetOutOfRange: a fetch position outside the partition, with
	// no reset allowed.
	kindOffsetOutOfRange
	// kindUnknownPartition: a topic or partition that does not exist.
	kindUnknownPartition
)

// clientError is a Kafka client's error as its transport sorted it.
type clientError struct {
	class errorClass
	kind  errorKind
	err   error
}

func (e *clientError) Error() string { return e.err.Error() }
func (e *clientError) Unwrap() error { return e.err }

// classify sorts err into the worker's error classes. An error that no
// transport sorted is abortable: the transaction is the unit the worker
// can undo.
func classify(err error) errorClass {
	var ce *clientError
	if errors.As(err, &ce) {
		return ce.class
	}
	return classAbortable
}

// kindOf is the kind of Kafka error err is, possibly wrapped.
func kindOf(err error) errorKind {
	var ce *clientError
	if err != nil && errors.As(err, &ce) {
		return ce.kind
	}
	return kindOther
}

// tooLarge reports whether err refused a record for its size.
func tooLarge(err error) bool { return kindOf(err) == kindTooLarge }

// transportNamed returns the transport called name.
func transportNamed(name string) (transport, error) {
	if t, ok := transports[name]; ok {
		return t, nil
	}
	return nil, fmt.Errorf("%w: client %q is not built into this binary", ErrInvalidConfig, name)
}

// transports are the transports built in, by name; the files that
// implement them add themselves.
var transports = map[string]transport{}

// Clients returns the Kafka client libraries built into this binary, the
// default first: librdkafka when built with cgo, then franz.
func Clients() []string {
	var out []string
	for _, c := range []string{ClientLibrdkafka, ClientFranz} {
		if _, ok := transports[c]; ok {
			out = append(out, c)
		}
	}
	return out
}

// partitionString names a partition as the logs do: topic/partition.
func partitionString(topic string, p int32) string {
	return topic + "/" + strconv.FormatInt(int64(p), 10)
}
