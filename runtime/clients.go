package runtime

import (
	"context"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// The worker talks to Kafka through these interfaces, each listing only the
// calls one part makes. librdkafka's clients satisfy them as they are; the
// unit tests put in-process fakes in their place, so the task manager and
// the failure policy are tested without a broker.

// offsetSource is what the task manager asks of the cluster to decide where
// a task resumes: the group's committed offsets and a partition's bounds.
type offsetSource interface {
	Committed(partitions []kafka.TopicPartition, timeoutMs int) ([]kafka.TopicPartition, error)
	QueryWatermarkOffsets(topic string, partition int32, timeoutMs int) (low, high int64, err error)
}

// groupConsumer is the worker's member of the consumer group.
type groupConsumer interface {
	offsetSource
	Poll(timeoutMs int) kafka.Event
	Assign(partitions []kafka.TopicPartition) error
	Unassign() error
	Seek(partition kafka.TopicPartition, ignoredTimeoutMs int) error
	Pause(partitions []kafka.TopicPartition) error
	Resume(partitions []kafka.TopicPartition) error
	Position(partitions []kafka.TopicPartition) ([]kafka.TopicPartition, error)
	// GetWatermarkOffsets is the consumer's cached view of a partition's
	// bounds: no request to the broker.
	GetWatermarkOffsets(topic string, partition int32) (low, high int64, err error)
	GetConsumerGroupMetadata() (*kafka.ConsumerGroupMetadata, error)
	AssignmentLost() bool
	Close() error
}

// producerClient is the transactional producer.
type producerClient interface {
	Produce(msg *kafka.Message, deliveryChan chan kafka.Event) error
	Flush(timeoutMs int) int
	BeginTransaction() error
	SendOffsetsToTransaction(ctx context.Context, offsets []kafka.TopicPartition, md *kafka.ConsumerGroupMetadata) error
	CommitTransaction(ctx context.Context) error
	AbortTransaction(ctx context.Context) error
	GetFatalError() error
}

var (
	_ groupConsumer  = (*kafka.Consumer)(nil)
	_ producerClient = (*kafka.Producer)(nil)
)
