// Package runtime runs a topology against Kafka: one worker process holds a
// consumer-group member and a transactional producer, runs one task per
// assigned (processor, partition index) with the causal gate in front of
// it, and commits outputs, store changes, gate checkpoints and offsets in one
// transaction (exactly-once, KIP-447). It serves health, readiness,
// Prometheus metrics and task status over HTTP. Module wires it with fx.
package runtime

import (
	"flag"
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/causeway-stream/causeway/runtime/internal/reach"
	"github.com/causeway-stream/causeway/runtime/internal/transport"
)

// ErrInvalidConfig is matched by every configuration error.
var ErrInvalidConfig = transport.ErrInvalidConfig

// ErrHelp is matched by the error Load returns when the arguments ask for
// help (-h, -help, --help). That error's text is the usage: the flags,
// their defaults and their environment variables.
var ErrHelp = flag.ErrHelp

// helpError carries the usage text when help was asked for.
type helpError struct{ usage string }

func (e *helpError) Error() string        { return e.usage }
func (e *helpError) Is(target error) bool { return target == ErrHelp }

// Config is what a worker needs to run. Load builds it from flags and
// environment; every field documents its flag, variable and default.
type Config struct {
	// ApplicationID names the application: the consumer group, the prefix
	// of internal topics and transactional ids. Required.
	// Flag --application-id, env CAUSEWAY_APPLICATION_ID.
	ApplicationID string
	// BootstrapServers lists Kafka brokers, comma-separated. Empty starts
	// the embedded broker instead. Flag --bootstrap-servers, env
	// CAUSEWAY_BOOTSTRAP_SERVERS.
	BootstrapServers string
	// CommitInterval is how often the worker commits a transaction. A
	// commit that falls due while the consumer still hands out records it
	// has fetched waits for them, up to a tenth of the interval.
	// Default 100ms. Flag --commit-interval, env CAUSEWAY_COMMIT_INTERVAL.
	CommitInterval time.Duration
	// StateDir holds the worker's instance id, its tasks' stores on disk
	// (see Stores) and the embedded broker's data. One worker per
	// directory. Default ./causeway-state. Flag --state-dir, env
	// CAUSEWAY_STATE_DIR.
	StateDir string
	// Stores is where tasks keep their stores: "pebble" (default), on
	// disk in StateDir, restored after a restart from where the local copy
	// stands; or "memory", restored in full from the changelog whenever a
	// task starts. A store declared InMemory stays in memory either way.
	// Flag --stores, env CAUSEWAY_STORES.
	Stores string
	// HTTPAddr is where /healthz, /readyz, /metrics and /status are
	// served. Default 127.0.0.1:8080; empty disables the server. Flag
	// --http-addr, env CAUSEWAY_HTTP_ADDR.
	HTTPAddr string
	// AdvertisedHTTPAddr is the host:port at which the application's other
	// workers reach this worker's HTTP server, to forward it the queries
	// for keys it holds. Default: the address the server listens on, which
	// suits workers on one host; set it when they run on several. Flag
	// --advertised-http-addr, env CAUSEWAY_ADVERTISED_HTTP_ADDR.
	AdvertisedHTTPAddr string
	// InstanceID names this worker among the application's workers; it
	// makes the transactional id, so a restarted worker fences its previous
	// incarnation at once. Default: a random id kept in StateDir. Flag
	// --instance-id, env CAUSEWAY_INSTANCE_ID.
	InstanceID string
	// StaticMembership joins the consumer group as a static member
	// (group.instance.id, KIP-345) named after the instance id: a worker
	// restarted with the same state dir takes its partitions back at once,
	// without a rebalance. The price: a worker that stops for good hands
	// its partitions over only after the session timeout. Default on. Flag
	// --static-membership.
	StaticMembership bool
	// RebalanceProtocol is how the consumer group moves partitions when
	// workers come and go: "cooperative" (default) takes away only the
	// tasks that move (KIP-429), and the worker goes on with the others;
	// "eager" takes every task away from every worker and hands the new
	// assignment out whole. The workers of one application must agree:
	// change it with all of them stopped. Flag --rebalance-protocol, env
	// CAUSEWAY_REBALANCE_PROTOCOL.
	RebalanceProtocol string
	// StandbyReplicas is how many workers besides the one that runs a
	// task keep a copy of its stores up to date, following its changelogs
	// into their own state dirs, so that a failover restores only what
	// the copy lacked. Needs the franz client (the balancer that places
	// the copies is Causeway's own), cooperative rebalancing and stores on
	// disk; with it set and no client chosen, the worker uses franz.
	// Default 0. Flag --standby-replicas.
	StandbyReplicas int
	// AcceptableRecoveryLag is how many changelog records a worker's copy
	// of a task's state may lack for the task to move to it at once; a
	// worker further behind warms a copy up first while the task runs on
	// where it is, and a probing rebalance moves it once the copy has
	// caught up (KIP-441). Negative turns warm-ups off. On the franz
	// client's cooperative balancer only. Default 10000. Flag
	// --acceptable-recovery-lag.
	AcceptableRecoveryLag int64
	// MaxWarmupReplicas bounds the warm-ups of the application at once.
	// Default 2. Flag --max-warmup-replicas.
	MaxWarmupReplicas int
	// ProbingRebalanceInterval is how often a worker that warms copies up
	// asks the group to rebalance, to move the tasks whose copies caught
	// up. Default 1m. Flag --probing-rebalance-interval.
	ProbingRebalanceInterval time.Duration
	// StatePositionsInterval is how often a worker learns where its
	// stores on disk stand in their changelogs: what a restart after a
	// crash replays is what was written since the last look, and the
	// state sizes the worker reports to the group (which decide
	// warm-ups) are as old as it. Default 10s. Flag
	// --state-positions-interval.
	StatePositionsInterval time.Duration
	// AutoOffsetReset is where a partition with no committed offset
	// starts: "earliest" (default) or "latest". Flag --auto-offset-reset.
	AutoOffsetReset string
	// AllowOffsetReset lets the worker go on when a committed offset is
	// out of range (data lost to retention). Off by default: the task
	// fails instead. Flag --allow-offset-reset.
	AllowOffsetReset bool
	// CreateTopics creates missing source and output topics with
	// DefaultPartitions partitions. Internal topics are always created.
	// Default: on with the embedded broker, off otherwise. Flag
	// --create-topics.
	CreateTopics bool
	// DefaultPartitions is the partition count of topics the worker
	// creates. Default 4. Flag --default-partitions.
	DefaultPartitions int
	// MaxHeldPerChannel bounds one channel's hold queue: above it the
	// partition is paused until the queue halves. Default 10000. Flag
	// --max-held-per-channel.
	MaxHeldPerChannel int
	// MaxRecordBytes is the most key and value bytes of a record the
	// worker writes of its own accord. A store write over it fails the
	// task on the input record that made it (which an operator can skip),
	// since its changelog record would be refused by Kafka in every
	// transaction; a dead letter over it is cut to fit, its headers
	// saying what was cut. Keep it under the topics' max.message.bytes
	// and the producer's message.max.bytes. Default 999000: librdkafka's
	// message.max.bytes (1000000) less room for the record's framing.
	// Flag --max-record-bytes; 0 turns both off.
	MaxRecordBytes int
	// ConnectTimeout bounds how long Start keeps trying to reach the
	// cluster (with backoff, each failed attempt logged with the address
	// and the cause) before it gives up with ErrKafkaUnreachable. Default
	// 30s. Flag --connect-timeout.
	ConnectTimeout time.Duration
	// TopicWaitTimeout is how long Start waits for input or output topics
	// that do not exist (and that the worker does not create, see
	// CreateTopics) to be created, looking every second; /status and
	// /readyz name them meanwhile. Then it gives up, naming them. Zero
	// gives up at once. Default 5m. Flag --topic-wait-timeout.
	TopicWaitTimeout time.Duration
	// TaskRestartBackoff turns on restarting FAILED tasks without an
	// operator, which Kafka Streams never does: a failed task is rebuilt
	// from its committed state TaskRestartBackoff after it failed, then
	// after twice that if it fails again, and so on, each wait at most
	// TaskRestartBackoffMax; a task that then runs TaskRestartBackoffMax
	// counts from the first attempt again. /status (restarts), the page
	// and causeway_task_restarts_total show what it does. Default 0: off.
	// Flags --task-restart-backoff and --task-restart-backoff-max
	// (default 5m).
	TaskRestartBackoff    time.Duration
	TaskRestartBackoffMax time.Duration
	// ReadyWithFailedTasks keeps /readyz at 200 while some tasks are
	// FAILED and the others run: for a deployment whose orchestrator
	// should not take the whole worker out for one bad task. Off by
	// default: a FAILED task makes the worker unready. /status and the
	// page say "degraded" either way. Flag --ready-with-failed-tasks.
	ReadyWithFailedTasks bool
	// ShutdownTimeout bounds each of the two halves of a graceful stop:
	// the last commit and the tasks' close, then the Kafka clients' close
	// (which, leaving the group in the middle of a rebalance, can take a
	// session timeout; the worker then leaves them to the process's exit).
	// It bounds the clients' close after a fatal error too. Default 10s.
	// Flag --shutdown-timeout.
	ShutdownTimeout time.Duration
	// GateOff delivers records on arrival, ignoring clocks. For
	// measurements and demonstrations only. Flag --gate=off.
	GateOff bool
	// CheckClaims checks that every claim of a record entering the
	// topology from outside (on a topic no processor writes) names a record
	// that exists, before any gate folds it: a claim beyond the end of its
	// partition, or on a topic that does not exist, is bad input of that
	// record (see docs/causal.md). Turn it off only when producers claim
	// records of another cluster. Default on. Flag --check-claims.
	CheckClaims bool
	// Threads is how many stream threads the worker process runs: each a
	// pump of its own, with its own consumer (a member of the group) and
	// transactional producer, so that one process uses several cores. The
	// group spreads the tasks over them. Default 1. Flag --threads, env
	// CAUSEWAY_THREADS. See Instance.
	Threads int
	// AdminToken, when set, is required as "Authorization: Bearer <token>"
	// on the HTTP endpoints that change something (restart, skip). Default
	// empty: those endpoints are open to whoever can reach HTTPAddr, which
	// by default is this machine only. Flag --admin-token, env
	// CAUSEWAY_ADMIN_TOKEN.
	AdminToken string
	// Client is the Kafka client library the worker's clients use:
	// "librdkafka" (confluent-kafka-go, which needs cgo) or "franz"
	// (franz-go, pure Go). Default librdkafka, or franz in a binary built
	// without cgo (see Clients). Flag --client, env CAUSEWAY_CLIENT.
	Client string
	// LogLevel is the least level logged: debug, info (default), warn or
	// error. The worker's own debug lines (and fx's) show only at debug.
	// Flag --log-level.
	LogLevel string
	// Development switches logs to a human-readable console format.
	// Flag --dev, env CAUSEWAY_DEV.
	Development bool
	// Kafka holds librdkafka properties passed through to every client
	// (security.protocol, sasl.*, ssl.*, or tuning), overriding the
	// worker's defaults. Flag --kafka key=value (repeatable), env
	// CAUSEWAY_KAFKA_<PROPERTY> with dots written as underscores
	// (CAUSEWAY_KAFKA_SASL_MECHANISM=PLAIN).
	Kafka map[string]string
}

// The rebalance protocols (Config.RebalanceProtocol).
const (
	RebalanceCooperative = transport.RebalanceCooperative
	RebalanceEager       = transport.RebalanceEager
)

// The Kafka client libraries a worker can use (Config.Client).
const (
	ClientLibrdkafka = transport.Librdkafka
	ClientFranz      = transport.Franz
)

// maxThreads bounds Config.Threads: each thread is a consumer and a
// producer with their own connections and buffers.
const maxThreads = 64

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig() Config {
	return Config{
		CommitInterval:           100 * time.Millisecond,
		StateDir:                 "causeway-state",
		Stores:                   StoresPebble,
		HTTPAddr:                 "127.0.0.1:8080",
		AutoOffsetReset:          "earliest",
		StaticMembership:         true,
		RebalanceProtocol:        RebalanceCooperative,
		AcceptableRecoveryLag:    10_000,
		MaxWarmupReplicas:        2,
		ProbingRebalanceInterval: time.Minute,
		StatePositionsInterval:   10 * time.Second,
		CheckClaims:              true,
		DefaultPartitions:        4,
		MaxHeldPerChannel:        10_000,
		MaxRecordBytes:           999_000,
		ShutdownTimeout:          10 * time.Second,
		ConnectTimeout:           reach.DefaultTimeout,
		TopicWaitTimeout:         5 * time.Minute,
		TaskRestartBackoffMax:    5 * time.Minute,
		LogLevel:                 "info",
		Threads:                  1,
		Client:                   transport.Clients()[0],
		Kafka:                    map[string]string{},
	}
}

var validID = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

// Validate checks the configuration, naming the first bad setting.
func (c Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	switch {
	case c.ApplicationID == "":
		return bad("application id is required (--application-id or CAUSEWAY_APPLICATION_ID)")
	case !validID.MatchString(c.ApplicationID):
		return bad("application id %q: use letters, digits, '.', '_' and '-'", c.ApplicationID)
	case c.InstanceID != "" && !validID.MatchString(c.InstanceID):
		return bad("instance id %q: use letters, digits, '.', '_' and '-'", c.InstanceID)
	case c.CommitInterval <= 0:
		return bad("commit interval %v must be positive", c.CommitInterval)
	case c.AutoOffsetReset != "earliest" && c.AutoOffsetReset != "latest":
		return bad("auto offset reset %q: want earliest or latest", c.AutoOffsetReset)
	case c.DefaultPartitions <= 0:
		return bad("default partitions %d must be positive", c.DefaultPartitions)
	case c.MaxHeldPerChannel <= 0:
		return bad("max held per channel %d must be positive", c.MaxHeldPerChannel)
	case !slices.Contains([]string{"debug", "info", "warn", "error"}, c.LogLevel):
		return bad("log level %q: want debug, info, warn or error", c.LogLevel)
	case c.StateDir == "":
		return bad("state dir is required")
	case c.Stores != StoresPebble && c.Stores != StoresMemory:
		return bad("stores %q: want %s or %s", c.Stores, StoresPebble, StoresMemory)
	case c.Threads < 1 || c.Threads > maxThreads:
		return bad("threads %d: want 1 to %d", c.Threads, maxThreads)
	case c.Client != ClientLibrdkafka && c.Client != ClientFranz:
		return bad("client %q: want %s or %s", c.Client, ClientLibrdkafka, ClientFranz)
	case c.RebalanceProtocol != RebalanceCooperative && c.RebalanceProtocol != RebalanceEager:
		return bad("rebalance protocol %q: want %s or %s", c.RebalanceProtocol, RebalanceCooperative, RebalanceEager)
	}
	if msg := c.durationsProblem(); msg != "" {
		return bad("%s", msg)
	}
	if msg := c.replicasProblem(); msg != "" {
		return bad("%s", msg)
	}
	for _, k := range []string{"group.id", "group.instance.id", "transactional.id", "isolation.level", "enable.auto.commit", "enable.partition.eof"} {
		if _, ok := c.Kafka[k]; ok {
			return bad("kafka property %q is set by the worker and cannot be overridden", k)
		}
	}
	return nil
}

// durationsProblem says what is wrong with the timeouts and backoffs, if
// anything.
func (c Config) durationsProblem() string {
	switch {
	case c.ConnectTimeout <= 0:
		return fmt.Sprintf("connect timeout %v must be positive", c.ConnectTimeout)
	case c.TaskRestartBackoff < 0 || c.TaskRestartBackoffMax <= 0:
		return fmt.Sprintf("task restart backoff %v must not be negative, and its maximum %v must be positive", c.TaskRestartBackoff, c.TaskRestartBackoffMax)
	case c.TopicWaitTimeout < 0:
		return fmt.Sprintf("topic wait timeout %v must not be negative", c.TopicWaitTimeout)
	case c.ShutdownTimeout <= 0:
		return fmt.Sprintf("shutdown timeout %v must be positive", c.ShutdownTimeout)
	}
	return ""
}

// replicasProblem says what is wrong with the settings of standby replicas
// and warm-ups, if anything.
func (c Config) replicasProblem() string {
	switch {
	case c.StandbyReplicas < 0:
		return fmt.Sprintf("standby replicas %d must not be negative", c.StandbyReplicas)
	case c.StandbyReplicas > 0 && c.Client != ClientFranz:
		return "standby replicas need the franz client: librdkafka's assignor cannot place copies of state (use --client franz)"
	case c.StandbyReplicas > 0 && c.RebalanceProtocol != RebalanceCooperative:
		return "standby replicas need --rebalance-protocol " + RebalanceCooperative
	case c.StandbyReplicas > 0 && c.Stores != StoresPebble:
		return "standby replicas keep their copies on disk: they need --stores " + StoresPebble
	case c.MaxWarmupReplicas < 0:
		return fmt.Sprintf("max warm-up replicas %d must not be negative", c.MaxWarmupReplicas)
	case c.ProbingRebalanceInterval <= 0:
		return fmt.Sprintf("probing rebalance interval %v must be positive", c.ProbingRebalanceInterval)
	case c.StatePositionsInterval <= 0:
		return fmt.Sprintf("state positions interval %v must be positive", c.StatePositionsInterval)
	}
	return ""
}

// Clients returns the Kafka client libraries built into this binary, the
// default first: librdkafka when built with cgo, then franz.
func Clients() []string { return transport.Clients() }
