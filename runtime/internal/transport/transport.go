// Package transport is how a stream thread talks to Kafka: the
// interfaces each of its parts calls (the group consumer, the
// transactional producer, the admin client, the changelog readers), in
// the runtime's own types, and their two implementations, each on one
// client library: librdkafka through confluent-kafka-go (rdkafka*.go,
// built with cgo) and franz-go (franz*.go). A Supplier makes the clients
// from Settings, a small configuration of its own. Errors come back
// sorted into the Classes the runtime acts on (Classify).
//
// The runtime's unit tests put in-process fakes in place of these
// clients, so that the task manager and the failure policy are tested
// without a broker; this package's tests run the clients on an embedded
// broker.
package transport

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/runtime/internal/upstream"
	"go.uber.org/zap"
)

// Message is a Kafka record as the worker's parts see it: one a consumer
// fetched, or one the producer sends (Offset unused). It is a
// framework.Record, so that a fetched message is handed to a task, and a
// task's output to the producer, as it is (a pointer conversion), without
// copying.
type Message framework.Record

// Channel is the channel the message belongs to.
func (m *Message) Channel() causal.Channel {
	return causal.Channel{Topic: m.Topic, Partition: m.Partition}
}

// EventKind is what an Event reports.
type EventKind uint8

const (
	// EventRecord: Msg is a fetched record.
	EventRecord EventKind = iota + 1
	// EventPosition: the partition Msg names has been read up to
	// Msg.Offset, the next offset to read, past what records the consumer
	// handed out (transaction markers, the end of the partition).
	EventPosition
	// EventPartitionError: Err is an error of the partition Msg names.
	EventPartitionError
	// EventError: Err is the client's, and it goes on.
	EventError
	// EventFatal: Err is the client's, and it cannot go on.
	EventFatal
)

// Event is one thing the group consumer reports from Poll.
type Event struct {
	Kind EventKind
	Msg  Message
	Err  error
}

// PollFunc takes up to max events into batch, waiting up to timeout for
// the first, and returns how many it took. A rebalance the consumer
// reports during the call runs its handler before Poll returns.
type PollFunc func(timeout time.Duration, max int, batch *[]Event) int

// RebalanceHandler is what the group consumer tells of the group's
// rebalances. It calls them while the pump is inside Poll: on the pump's
// goroutine, or on the client's while the pump waits for it.
type RebalanceHandler interface {
	// Assigned is called with a new assignment; it calls Assign with the
	// offsets to read the partitions from.
	Assigned(chs []causal.Channel) error
	// Revoked is called before the assignment is taken away; lost says it
	// already was (the member fell out of the group), so that nothing can
	// be committed for it.
	Revoked(chs []causal.Channel, lost bool)
}

// OffsetSource is what the task manager asks of the cluster to decide where
// a task resumes: the group's committed offsets and a partition's bounds.
type OffsetSource interface {
	// Committed returns the group's committed offsets (the next offset to
	// read) of chs; a channel with none is left out.
	Committed(chs []causal.Channel) (map[causal.Channel]int64, error)
	// Watermarks asks the broker for ch's low and high watermarks; the
	// high one counts the records of open transactions.
	Watermarks(ch causal.Channel) (low, high int64, err error)
}

// GroupMetadata is the consumer's group membership as a transactional
// commit of offsets needs it (KIP-447); each transport has its own.
type GroupMetadata any

// Consumer is the worker's member of the consumer group.
type Consumer interface {
	OffsetSource
	// Subscribe joins the group for topics; h hears of rebalances.
	Subscribe(topics []string, h RebalanceHandler) error
	// Poll is a pollFunc.
	Poll(timeout time.Duration, max int, batch *[]Event) int
	// Assign starts reading the assigned partitions at the given offsets;
	// it is called from the assigned handler, or instead of Subscribe by
	// a reader outside any group, the only one of its channels.
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
	GroupMetadata() (GroupMetadata, error)
	// Standbys is the standby and warm-up part of the member's last
	// assignment; none where the group's balancer places no copies.
	Standbys() StandbyAssignment
	// Probe asks the group to rebalance, so that tasks whose warm-ups
	// caught up move (a probing rebalance); a no-op where the group's
	// balancer places no copies.
	Probe()
	Close() error
}

// Producer is the transactional producer.
type Producer interface {
	InitTransactions(ctx context.Context) error
	BeginTransaction() error
	// Produce queues m into the open transaction, waiting for room when
	// the local queue is full. m may be reused once it returns; the key
	// and value it points to stay unchanged until the transaction ends (a
	// client may send them later, as they are), and its header list, with
	// the header values, until Released reports true.
	Produce(m *Message) error
	// Flush waits until every record produced into the open transaction
	// has reached the broker, or failed, so that the partitions' ends
	// (Admin.Ends) count the records that reached it. A failure it learns
	// of is returned; one it does not fails the commit.
	Flush(ctx context.Context) error
	SendOffsetsToTransaction(ctx context.Context, offsets map[causal.Channel]int64, md GroupMetadata) error
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
	Refused() []RefusedRecord
	Close() error
}

// RefusedRecord is a record the broker refused, with its error.
type RefusedRecord struct {
	Msg Message
	Err error
}

// TopicSpec is a topic to create.
type TopicSpec struct {
	Name       string
	Partitions int32
	Configs    map[string]string
}

// Admin is what the worker asks of the cluster besides its group:
// the topic manager (topics.go) and following clocks upstream
// (upstream.go).
type Admin interface {
	upstream.Cluster
	// PartitionCounts returns the partition count of every topic of the
	// cluster.
	PartitionCounts(ctx context.Context) (map[string]int32, error)
	// CreateTopics creates the topics; one that exists already is no
	// error.
	CreateTopics(ctx context.Context, specs []TopicSpec) error
	// ClusterID is the cluster's id as its brokers report it; empty when
	// they report none.
	ClusterID(ctx context.Context) (string, error)
	Close()
}

// clientRole is which kind of client a configuration is for.
type clientRole int

const (
	consumerRole clientRole = iota
	producerRole
)

// Settings is what a transport makes its clients from: the parts
// of the worker's configuration a Kafka client needs, the bootstrap
// servers it connects to (the embedded broker's when none were given) and
// the worker's instance id.
type Settings struct {
	// ApplicationID names the consumer group; with InstanceID it makes
	// the transactional id and the client ids.
	ApplicationID string
	// Kafka are the librdkafka-style settings given with --kafka.
	Kafka map[string]string
	// StaticMembership makes the consumer a static member of its group
	// (group.instance.id, KIP-345).
	StaticMembership bool
	// AllowOffsetReset lets a consumer without a committed offset start
	// at AutoOffsetReset ("earliest" or "latest"); without it, such a
	// start is an error.
	AllowOffsetReset bool
	AutoOffsetReset  string
	// Bootstrap are the bootstrap servers, comma-separated.
	Bootstrap string
	// InstanceID tells this worker from the others of the application.
	InstanceID string
	// Rebalance is the consumer group's rebalance protocol:
	// RebalanceCooperative, or RebalanceEager (also when empty: the sink
	// and connect workers' groups rebalance eagerly).
	Rebalance string
	// Copartitioned are the groups of topics whose partitions of one
	// index must go to one member together (the inputs of a processor,
	// joined over shared topics). The cooperative protocol needs them.
	Copartitioned [][]string
	// Replicas places copies of the tasks' state: standbys and warm-ups.
	// Only franz-go's cooperative balancer places them.
	Replicas Replicas
	// Log is where the clients log.
	Log *zap.Logger
}

// Supplier makes a worker's Kafka clients with one client library.
type Supplier interface {
	// Producer returns the worker's transactional producer (transactions
	// not yet initialised) and an admin client.
	Producer(s Settings) (Producer, Admin, error)
	// Consumer returns the worker's group consumer.
	Consumer(s Settings) (Consumer, error)
	// PollBatch is the most events the pump takes from the consumer
	// before it handles them.
	PollBatch() int
}

// ErrorKind names the few Kafka errors the worker tells apart beyond their
// class.
type ErrorKind uint8

const (
	KindOther ErrorKind = iota
	// KindTooLarge: a record too large for its topic.
	KindTooLarge
	// KindOffsetOutOfRange: a fetch position outside the partition, with
	// no reset allowed.
	KindOffsetOutOfRange
	// KindUnknownPartition: a topic or partition that does not exist.
	KindUnknownPartition
)

// ClientError is a Kafka client's error as its transport sorted it.
type ClientError struct {
	Class Class
	Kind  ErrorKind
	Err   error
}

func (e *ClientError) Error() string { return e.Err.Error() }
func (e *ClientError) Unwrap() error { return e.Err }

// Classify sorts err into the worker's error classes. An error that no
// transport sorted is abortable: the transaction is the unit the worker
// can undo.
func Classify(err error) Class {
	var ce *ClientError
	if errors.As(err, &ce) {
		return ce.Class
	}
	return ClassAbortable
}

// KindOf is the kind of Kafka error err is, possibly wrapped.
func KindOf(err error) ErrorKind {
	var ce *ClientError
	if err != nil && errors.As(err, &ce) {
		return ce.Kind
	}
	return KindOther
}

// TooLarge reports whether err refused a record for its size.
func TooLarge(err error) bool { return KindOf(err) == KindTooLarge }

// PartitionString names a partition as the logs do: topic/partition.
func PartitionString(topic string, p int32) string {
	return topic + "/" + strconv.FormatInt(int64(p), 10)
}

// Replicas is how the cooperative balancer places copies of the tasks'
// state (see assign.Options); every worker of an application must say the
// same.
type Replicas struct {
	// Standbys is how many members besides a task's active one keep a
	// copy of its state up to date.
	Standbys int
	// AcceptableLag is how far behind a member's copy may be for a task
	// to move to it at once; further behind, it warms up first. Negative
	// turns warm-ups off.
	AcceptableLag int64
	// MaxWarmups bounds the warm-ups of the group at once.
	MaxWarmups int
	// Stateless are the first topics of the co-partitioned groups whose
	// tasks keep no state.
	Stateless map[string]bool
	// Report tells, whenever the member joins the group, what state it
	// keeps. Nil: none.
	Report func() StateReport
}

// StateReport is what a member says of its state when it joins the group.
// A task is named by its group's first topic and its partition index.
type StateReport struct {
	// Process names the process the member runs in: standbys go to
	// members of other processes.
	Process string
	// Copies: for each task whose state the member keeps a copy of, how
	// many changelog records the copy is behind.
	Copies map[causal.Channel]int64
	// Sizes: for each task the member runs, how many changelog records a
	// full restore of its state would read.
	Sizes map[causal.Channel]int64
}

// StandbyAssignment is the standby and warm-up part of a member's
// assignment, tasks named as in StateReport. Version grows with every
// assignment received.
type StandbyAssignment struct {
	Standby, Warmup []causal.Channel
	Version         uint64
}

// The rebalance protocols, by the names --rebalance-protocol takes.
const (
	// RebalanceCooperative: a rebalance takes away only the partitions
	// that move (KIP-429); the member goes on with the others.
	RebalanceCooperative = "cooperative"
	// RebalanceEager: every rebalance takes every partition away and
	// hands the new assignment out whole.
	RebalanceEager = "eager"
)

// The client libraries, by the names --client takes.
const (
	Librdkafka = "librdkafka"
	Franz      = "franz"
)

// ErrInvalidConfig is returned for settings a client cannot be made from,
// and for a client library not built in.
var ErrInvalidConfig = errors.New("invalid configuration")

// ErrStopped is returned by a changelog read stopped before its end.
var ErrStopped = errors.New("worker stopped")

// FallbackReader is a Supplier that can read changelogs through its own
// client when franz-go cannot follow the connection settings (the
// librdkafka transport, for settings only librdkafka reads).
type FallbackReader interface {
	ChangelogFallback(s Settings, offsets OffsetSource) ChangelogSource
}
