package sinkworker

import (
	"time"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/connect"
	"go.uber.org/zap"
)

// Config is what a Worker runs.
type Config struct {
	// Connector names the connector: its consumer group is
	// "connect-<Connector>", and the sink keeps its positions under it.
	// Required.
	Connector string
	// TaskID and Class name the connector's task and its class (the
	// connector.class setting) in dead letters' headers.
	TaskID int
	Class  string
	// Topics are the topics the connector writes. Required.
	Topics []string
	// Task is the sink task, open. The worker closes it when it stops.
	// Required.
	Task connect.SinkTask
	// Bootstrap are the Kafka bootstrap servers. Required.
	Bootstrap string
	// Client is the Kafka client library: "librdkafka" or "franz".
	// Default: the first built in (transport.Clients).
	Client string
	// Kafka are librdkafka-style client settings (security and the like).
	Kafka map[string]string
	// InstanceID tells this worker from the connector's others; it makes
	// the dead-letter producer's transactional id. Default: "0".
	InstanceID string
	// Channels, when set, are read without a consumer group: this worker
	// is their only reader. Default: the group assigns.
	Channels []causal.Channel
	// GateOff writes records in the order they arrive, ignoring clocks:
	// only to show what the gate prevents.
	GateOff bool
	// DeadLetterTopic is where records the sink's system refuses go, with
	// the reason in their headers, when ToleranceAll. Kafka Connect's
	// errors.deadletterqueue.topic.name.
	DeadLetterTopic string
	// ToleranceAll sends refused records, and records whose clock header
	// is corrupt, to the dead-letter topic and goes on; without it the
	// first such record stops the worker, naming it. Kafka Connect's
	// errors.tolerance=all.
	ToleranceAll bool
	// NoContextHeaders writes dead letters as the records came, without
	// the headers that say where and why they failed: Kafka Connect's
	// errors.deadletterqueue.context.headers.enable=false. Default: the
	// headers are written.
	NoContextHeaders bool
	// ConnectTimeout bounds how long Run keeps trying to reach the cluster
	// as it starts (with backoff, each failure logged with the address
	// and the cause) before it gives up with ErrKafkaUnreachable. Refused
	// credentials and a broker certificate that does not verify end it
	// at once. Default: 30s.
	ConnectTimeout time.Duration
	// CommitInterval is the longest a delivered record waits to be
	// committed. Default: 100ms.
	CommitInterval time.Duration
	// BatchSize is how many delivered records trigger a commit before the
	// interval is over. Default: 5000.
	BatchSize int
	// RefreshInterval is how often a worker whose records wait on another
	// task's channels reads the positions again. Default: 50ms.
	RefreshInterval time.Duration
	// Skip names records, by channel and offset, that go to the
	// dead-letter topic instead of the sink, claiming nothing: what an
	// operator skips once a RefusedError stopped the worker. Needs
	// DeadLetterTopic. Default: none.
	Skip map[causal.Channel]int64
	// Convert, when set, changes each record before the task writes it
	// (converters and transforms). A record it fails on is refused, as
	// one the sink's system refuses is: it goes to the dead-letter topic
	// with ToleranceAll, or stops the worker. Default: none.
	Convert func(connect.Record) (connect.Record, error)
	// TopicUsed, when set, is told the topic of each record handed to
	// the task (once a batch for each topic): Kafka Connect's active
	// topics (KIP-558).
	TopicUsed func(topic string)
	// TransactionTopic, when set, is one of Topics where a source writes
	// the ends of its transactions (connect.TxnEndHeader), whose other
	// records carry connect.TxnHeader: the worker writes none of its
	// records, and commits only where every source transaction it has
	// begun to write is ended, so that each lands whole in one commit of
	// the sink's system. Needs the gate, and a worker that reads every
	// channel of the connector. Default: records are committed as they
	// come.
	TransactionTopic string
	// MaxRetries is how many times a commit that failed on a transient
	// error of the sink's system (connect.RetriableError) is tried again,
	// RetryBackoff apart, before the worker stops on it: the records and
	// positions of the commit are put and committed again, the Kafka
	// consumer reading on meanwhile. Confluent's JDBC sink's max.retries
	// and retry.backoff.ms. Default: 0, none (the connect worker passes
	// the connector's settings, 10 and 3 s by default).
	MaxRetries   int
	RetryBackoff time.Duration
	// MaxRecordBytes is the most key and value bytes of a dead letter: a
	// larger one is cut to fit (framework.FitDeadLetter), so that a
	// refused or skipped record always reaches the dead-letter topic.
	// Default: 0, no bound (the connect worker passes 999000, under
	// librdkafka's message.max.bytes).
	MaxRecordBytes int
	// Log hears the worker. Default: none.
	Log *zap.Logger
}
