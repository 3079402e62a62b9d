//go:build cgo

package transport

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
)

// The librdkafka transport: confluent-kafka-go's clients, which need cgo.
// It is the default (--client librdkafka).

func init() { transports[Librdkafka] = rdkafkaTransport{} }

type rdkafkaTransport struct{}

// PollBatch: librdkafka hands out one event per call, so a batch costs a
// call across cgo per record whatever its size; 64 keeps the code and
// data of each step in the processor's caches across a batch.
func (rdkafkaTransport) PollBatch() int { return 64 }

func (rdkafkaTransport) Producer(s Settings) (Producer, Admin, error) {
	p, err := kafka.NewProducer(ptr(s.producerConfigWithoutReports()))
	if err != nil {
		return nil, nil, fmt.Errorf("producer: %w", err)
	}
	a, err := kafka.NewAdminClientFromProducer(p)
	if err != nil {
		p.Close()
		return nil, nil, fmt.Errorf("admin client: %w", err)
	}
	return newRdkProducer(p, s.Log), &rdkAdmin{admin: a, group: s.ApplicationID}, nil
}

func (rdkafkaTransport) Consumer(s Settings) (Consumer, error) {
	c, err := kafka.NewConsumer(ptr(s.consumerConfig()))
	if err != nil {
		return nil, fmt.Errorf("consumer: %w", err)
	}
	a, err := kafka.NewAdminClientFromConsumer(c)
	if err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("consumer's admin client: %w", err)
	}
	cooperative, followers := s.Rebalance == RebalanceCooperative, map[string][]string{}
	if cooperative {
		for _, g := range s.Copartitioned {
			followers[g[0]] = g[1:]
		}
	}
	return &rdkConsumer{c: c, admin: a, cooperative: cooperative, followers: followers}, nil
}

// ChangelogFallback reads changelogs through librdkafka when franz-go
// cannot follow the connection settings.
func (rdkafkaTransport) ChangelogFallback(s Settings, offsets OffsetSource) ChangelogSource {
	return &kafkaChangelog{Watermarks: Watermarks{offsets}, config: s.restoreConsumerConfig(), log: s.Log}
}

func (s Settings) producerConfigWithoutReports() kafka.ConfigMap {
	cm := s.producerConfig()
	// Delivery failures surface through CommitTransaction; no report channel
	// to drain.
	cm["go.delivery.reports"] = false
	// The client's channels hold a million events and a million records
	// by default: 24 MB a producer, which the garbage collector scans on
	// every cycle. Records go through Produce, not the channel, and the
	// events left (the client's errors) are drained (drainEvents).
	cm["go.events.channel.size"] = 64
	cm["go.produce.channel.size"] = 0
	return cm
}

func ptr(cm kafka.ConfigMap) *kafka.ConfigMap { return &cm }

// rdkError sorts a librdkafka error into the worker's classes and kinds
// (see classifyRdk); an error that carries no librdkafka error code is
// returned as it is.
func rdkError(err error) error {
	var ke kafka.Error
	if err == nil || !errors.As(err, &ke) {
		return err
	}
	kind := KindOther
	switch ke.Code() {
	case kafka.ErrMsgSizeTooLarge, kafka.ErrRecordListTooLarge:
		kind = KindTooLarge
	case kafka.ErrAutoOffsetReset, kafka.ErrOffsetOutOfRange:
		kind = KindOffsetOutOfRange
	case kafka.ErrUnknownTopicOrPart, kafka.ErrUnknownTopic, kafka.ErrUnknownPartition:
		kind = KindUnknownPartition
	}
	return &ClientError{Class: classifyRdk(ke), Kind: kind, Err: err}
}

// classifyRdk sorts a librdkafka error into the worker's error classes.
func classifyRdk(ke kafka.Error) Class {
	switch ke.Code() {
	case kafka.ErrFenced, kafka.ErrProducerFenced, kafka.ErrInvalidProducerEpoch,
		kafka.ErrAuthentication, kafka.ErrSaslAuthenticationFailed, kafka.ErrClusterAuthorizationFailed,
		kafka.ErrTransactionalIDAuthorizationFailed:
		return ClassFatal
	case kafka.ErrMsgSizeTooLarge, kafka.ErrRecordListTooLarge, kafka.ErrInvalidRecord, kafka.ErrInvalidMsg,
		kafka.ErrUnknownTopic, kafka.ErrUnknownTopicOrPart, kafka.ErrTopicException, kafka.ErrTopicAuthorizationFailed,
		kafka.ErrPolicyViolation:
		return ClassRecord
	case kafka.ErrTimedOut, kafka.ErrRequestTimedOut, kafka.ErrNotEnoughReplicas, kafka.ErrNotEnoughReplicasAfterAppend,
		kafka.ErrLeaderNotAvailable, kafka.ErrNotLeaderForPartition, kafka.ErrCoordinatorNotAvailable,
		kafka.ErrNotCoordinator, kafka.ErrCoordinatorLoadInProgress, kafka.ErrConcurrentTransactions:
		if !ke.IsFatal() && !ke.TxnRequiresAbort() {
			return ClassRetriable
		}
	}
	switch {
	case ke.IsFatal():
		return ClassFatal
	case ke.TxnRequiresAbort():
		return ClassAbortable
	case ke.IsRetriable():
		return ClassRetriable
	}
	return ClassAbortable
}

// errorCode is the librdkafka error code err carries, possibly wrapped, or
// ErrNoError if it carries none (nil included).
func errorCode(err error) kafka.ErrorCode {
	var ke kafka.Error
	if err == nil || !errors.As(err, &ke) {
		return kafka.ErrNoError
	}
	return ke.Code()
}

func rdkPartitions(chs []causal.Channel) []kafka.TopicPartition {
	tps := make([]kafka.TopicPartition, len(chs))
	for i, ch := range chs {
		topic := ch.Topic
		tps[i] = kafka.TopicPartition{Topic: &topic, Partition: ch.Partition}
	}
	return tps
}

func rdkChannels(tps []kafka.TopicPartition) []causal.Channel {
	chs := make([]causal.Channel, len(tps))
	for i, tp := range tps {
		chs[i] = causal.Channel{Topic: *tp.Topic, Partition: tp.Partition}
	}
	return chs
}

// rdkTimeoutMs is how long the consumer's requests to the broker may take.
const rdkTimeoutMs = 10000

// timeoutMs is what is left of ctx's deadline, in milliseconds, for the
// librdkafka calls that take a timeout instead of a context; at most
// rdkTimeoutMs.
func timeoutMs(ctx context.Context) int {
	d, ok := ctx.Deadline()
	if !ok {
		return rdkTimeoutMs
	}
	return max(1, min(rdkTimeoutMs, int(time.Until(d).Milliseconds())))
}

// headerSlab carves the header lists of received records from slabs. A
// carved list is never written again, so records that a gate holds keep
// theirs.
type headerSlab struct{ buf []framework.Header }

// headerSlabLen is how many headers one slab holds.
const headerSlabLen = 1024

// carve returns a list of n headers to fill.
func (s *headerSlab) carve(n int) []framework.Header {
	if cap(s.buf)-len(s.buf) < n {
		s.buf = make([]framework.Header, 0, max(headerSlabLen, n))
	}
	at := len(s.buf)
	s.buf = s.buf[:at+n]
	return s.buf[at : at+n : at+n]
}
