package transport

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
)

// The franz transport: franz-go's kgo, pure Go (--client franz).
//
// The group consumer and the transactional producer are two clients, as
// with librdkafka. kgo commits offsets inside a transaction only through
// GroupTransactSession, which commits the consumer's own positions; the
// worker commits offsets of its choosing (each channel's lowest next
// offset over the tasks reading it), so the producer adds them to the
// transaction itself: AddOffsetsToTxn, then TxnOffsetCommit carrying the
// consumer's generation, member id and instance id (KIP-447). The
// producer speaks the transaction protocol of Kafka before 4.0, where
// ending a transaction keeps the producer epoch, so that an EndTxn the
// transport sends itself (for a transaction that holds offsets and no
// record, which kgo would not end) leaves kgo's view of the producer
// right.
//
// kgo runs the rebalance callbacks on a goroutine of its own, at any
// moment. The consumer lets them run the worker's handler only while the
// pump waits inside kgo's poll: the pump holds the consumer's turn lock at
// every other moment, and a callback takes it. So the handler never runs
// beside the pump's own work, as inside librdkafka's Poll. kgo also holds
// a rebalance back until the pump has handled what it polled
// (BlockRebalanceOnPoll), so that the assignment does not change under
// records already taken.

func init() { transports[Franz] = franzTransport{} }

type franzTransport struct{}

// PollBatch is how many events the pump takes at a time of what the
// consumer read ahead (see franzConsumer.Poll).
func (franzTransport) PollBatch() int { return 512 }

// kgo's record header and the framework's are the same struct: the
// conversion below compiles only while their fields are alike in name,
// type and order, which makes their layouts alike too. So a fetched
// record's header list is viewed as the framework's instead of copied,
// and goes to the task as it is (kgo does not write it). An output's
// headers go the other way by copy (recordSlab.copyHeaders).
var _ = framework.Header(kgo.RecordHeader{})

// frameworkHeaders views hs as the framework's headers.
func frameworkHeaders(hs []kgo.RecordHeader) []framework.Header {
	return unsafe.Slice((*framework.Header)(unsafe.Pointer(unsafe.SliceData(hs))), len(hs))
}

// franzRequestTimeout bounds the admin requests of the franz clients.
const franzRequestTimeout = 10 * time.Second

// franzBase is the options every franz client of w starts from: the
// brokers and what --kafka says about connecting and tuning.
func (s Settings) franzBase(role clientRole) ([]kgo.Opt, error) {
	conn, err := FranzConnection(s.Kafka)
	if err != nil {
		return nil, err
	}
	tuning, err := franzTuning(s.Kafka, role)
	if err != nil {
		return nil, err
	}
	opts := []kgo.Opt{kgo.SeedBrokers(strings.Split(s.Bootstrap, ",")...), kgo.ClientID(s.ApplicationID + "-" + s.InstanceID),
		kgo.RetryBackoffFn(franzBackoff)}
	return append(append(opts, conn...), tuning...), nil
}

// franzBackoff is how long a franz client waits before retrying a request
// for the tries-th time: 100 ms doubling up to 1 s, as librdkafka's
// retry.backoff.ms and retry.backoff.max.ms do by default. kgo's own
// default grows to 5 s, and a few such waits inside one commit outlast the
// transaction's timeout.
func franzBackoff(tries int) time.Duration {
	return min(100*time.Millisecond<<min(max(tries-1, 0), 4), time.Second)
}

func (franzTransport) Producer(s Settings) (Producer, Admin, error) {
	base, err := s.franzBase(producerRole)
	if err != nil {
		return nil, nil, fmt.Errorf("producer: %w", err)
	}
	txnID := s.ApplicationID + "-" + s.InstanceID
	opts := append([]kgo.Opt{
		kgo.TransactionalID(txnID), kgo.TransactionTimeout(10 * time.Second),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5 * time.Millisecond),
		kgo.MaxBufferedRecords(franzMaxBufferedRecords), kgo.ProducerBatchMaxBytes(1 << 20),
		// A produce error that asks for new metadata (not enough replicas,
		// a leader moving) is retried after it: kgo's default of 5 s
		// between refreshes would hold a transaction open for longer than
		// its timeout after a few retries, as librdkafka's 100 ms does not.
		kgo.MetadataMinAge(100 * time.Millisecond),
		// The transaction protocol before KIP-890 part 2: see the top of
		// this file.
		kgo.MaxVersions(kversion.V3_9_0()),
	}, base...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("producer: %w", err)
	}
	return newFranzProducer(cl, txnID, s.ApplicationID), &franzAdmin{adm: kadm.NewClient(cl), group: s.ApplicationID}, nil
}

// newFranzProducer is the transactional producer on cl, with the
// transactional id txnID, committing offsets for group.
func newFranzProducer(cl *kgo.Client, txnID, group string) *franzProducer {
	p := &franzProducer{cl: cl, txnID: txnID, group: group}
	p.promise = p.delivered
	return p
}

func (franzTransport) Consumer(s Settings) (Consumer, error) {
	base, err := s.franzBase(consumerRole)
	if err != nil {
		return nil, fmt.Errorf("consumer: %w", err)
	}
	// Offsets and watermarks are asked with a client outside the group.
	admin, err := kgo.NewClient(base...)
	if err != nil {
		return nil, fmt.Errorf("consumer: %w", err)
	}
	return newFranzConsumer(s, base, kadm.NewClient(admin)), nil
}

// newFranzConsumer is the group consumer for s, made of base options,
// asking adm for offsets and watermarks.
func newFranzConsumer(s Settings, base []kgo.Opt, adm *kadm.Client) *franzConsumer {
	c := &franzConsumer{base: base, adm: adm, group: s.ApplicationID,
		positions: map[causal.Channel]int64{}, highs: map[causal.Channel]int64{}, paused: map[causal.Channel]bool{}}
	if s.StaticMembership {
		c.instanceID = s.ApplicationID + "-" + s.InstanceID
	}
	// The range balancer gives one member the same partition index of
	// every topic, so co-partitioned topics go together there too.
	c.balancer = kgo.RangeBalancer()
	if s.Rebalance == RebalanceCooperative {
		c.balancer = &franzBalancer{groups: s.Copartitioned, replicas: s.Replicas}
	}
	// Every assigned partition starts at an explicit offset; a fetch that
	// falls out of range is an error on that partition unless the
	// application opted into resets.
	c.reset = kgo.NoResetOffset()
	if s.AllowOffsetReset {
		c.reset = kgo.NewOffset().AtStart()
		if s.AutoOffsetReset == "latest" {
			c.reset = kgo.NewOffset().AtEnd()
		}
	}
	return c
}

// franzError sorts a franz-go error into the worker's classes and kinds.
func franzError(err error) error {
	if err == nil {
		return nil
	}
	var ce *ClientError
	if errors.As(err, &ce) {
		return err
	}
	kind := KindOther
	switch {
	case errors.Is(err, kerr.MessageTooLarge), errors.Is(err, kerr.RecordListTooLarge):
		kind = KindTooLarge
	case errors.Is(err, kerr.OffsetOutOfRange):
		kind = KindOffsetOutOfRange
	case errors.Is(err, kerr.UnknownTopicOrPartition):
		kind = KindUnknownPartition
	}
	return &ClientError{Class: classifyFranz(err), Kind: kind, Err: err}
}

// classifyFranz sorts a franz-go error into the worker's error classes, as
// classifyRdk does librdkafka's.
func classifyFranz(err error) Class {
	switch {
	case errors.Is(err, kerr.ProducerFenced), errors.Is(err, kerr.InvalidProducerEpoch), errors.Is(err, kerr.FencedInstanceID),
		errors.Is(err, kerr.TransactionalIDAuthorizationFailed), errors.Is(err, kerr.ClusterAuthorizationFailed),
		errors.Is(err, kerr.SaslAuthenticationFailed), errors.Is(err, kerr.InvalidProducerIDMapping):
		return ClassFatal
	case errors.Is(err, kerr.MessageTooLarge), errors.Is(err, kerr.RecordListTooLarge), errors.Is(err, kerr.InvalidRecord),
		errors.Is(err, kerr.CorruptMessage), errors.Is(err, kerr.UnknownTopicOrPartition), errors.Is(err, kerr.InvalidTopicException),
		errors.Is(err, kerr.TopicAuthorizationFailed), errors.Is(err, kerr.PolicyViolation):
		return ClassRecord
	case errors.Is(err, kerr.RequestTimedOut), errors.Is(err, kerr.NotEnoughReplicas), errors.Is(err, kerr.NotEnoughReplicasAfterAppend),
		errors.Is(err, kerr.LeaderNotAvailable), errors.Is(err, kerr.NotLeaderForPartition), errors.Is(err, kerr.CoordinatorNotAvailable),
		errors.Is(err, kerr.NotCoordinator), errors.Is(err, kerr.CoordinatorLoadInProgress), errors.Is(err, kerr.ConcurrentTransactions),
		errors.Is(err, context.DeadlineExceeded):
		return ClassRetriable
	}
	return ClassAbortable
}
