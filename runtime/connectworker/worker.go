// Package connectworker is Causeway's connect worker: a process that runs
// connectors (package connect) from configurations managed over a REST
// API with Kafka Connect's shapes. Workers that share a state topic make
// a cluster: each reads every connector's configuration from the topic,
// and runs the tasks that fall to it.
//
// The state topic (compacted, one partition) holds the connectors'
// configurations, their target states (running, paused, stopped),
// restart requests, each task's status, and each worker's heartbeat. A
// worker is alive while its heartbeat is younger than three heartbeat
// intervals. A connector's tasks.max tasks go to that many live workers,
// one each, starting at a worker its name picks; when a worker joins or
// goes, the tasks are dealt again, and those that move stop on one worker
// and start on another.
//
// A sink's tasks are members of one consumer group, which spreads the
// topics' partitions over them; the sink's own positions keep its writes
// exactly-once and causal (see runtime/sinkworker). A source's task
// writes each record and the source's offset in one Kafka transaction,
// stamped with the task's session clock; its transactional id is the
// connector's, so a task that starts fences any zombie of the one before.
package connectworker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/causeway-stream/causeway/connect"
	"github.com/causeway-stream/causeway/runtime/internal/reach"
	"github.com/causeway-stream/causeway/runtime/internal/restarts"
	"github.com/causeway-stream/causeway/runtime/internal/server"
	"github.com/causeway-stream/causeway/runtime/internal/transport"
	"github.com/causeway-stream/causeway/runtime/internal/txn"
)

// ErrKafkaUnreachable is returned by Run when the cluster did not answer
// within Config.ConnectTimeout, or refused the worker for good; the error
// names the bootstrap servers and the last cause. It is the stream
// worker's runtime.ErrKafkaUnreachable.
var ErrKafkaUnreachable = reach.ErrUnreachable

// RestartPolicy is when FAILED tasks restart without an operator: the
// first attempt Initial after the failure, each further one in a row
// after twice the wait before it, at most Max; the zero policy restarts
// nothing.
type RestartPolicy = restarts.Policy

// Config is what a Worker runs.
type Config struct {
	// Bootstrap are the Kafka bootstrap servers. Required.
	Bootstrap string
	// Client is the Kafka client library: "librdkafka" or "franz".
	// Default: the first built in.
	Client string
	// Kafka are librdkafka-style client settings (security and the like).
	// Default: compression.type lz4 for the worker's producers, unless
	// compression.type or compression.codec is given: change events and
	// other JSON a source writes shrink several times, and librdkafka,
	// which compresses nothing by default, wrote the capture's events at
	// 0.6 of the rate it does with lz4 (bench/cdcbench).
	Kafka map[string]string
	// StateTopic is the cluster's state topic; workers that share it are
	// one cluster. Default: "causeway-connect-state".
	StateTopic string
	// OffsetsTopic keeps the sources' offsets. Default:
	// "causeway-connect-offsets".
	OffsetsTopic string
	// Listen is the REST API's address. Default: ":8083".
	Listen string
	// WorkerID names the worker in the cluster, and in statuses. Default:
	// the host name and the REST port.
	WorkerID string
	// Sinks and Sources are the plugins the worker runs, by class name.
	// The HTTP source (HTTPSourceClass) is always there.
	Sinks   map[string]connect.Sink
	Sources map[string]connect.Source
	// ConnectTimeout bounds how long Run keeps trying to reach the
	// cluster as it starts (with backoff, each failure logged with the
	// address and the cause) before it gives up with ErrKafkaUnreachable.
	// Refused credentials and a broker certificate that does not verify
	// end it at once. Default: 30s.
	ConnectTimeout time.Duration
	// Heartbeat is how often the worker says it is alive; it is taken for
	// gone after three. Default: 2s.
	Heartbeat time.Duration
	// Restarts restarts FAILED tasks without an operator, which Kafka
	// Connect never does: a failed task is started again Initial after it
	// failed, then after twice that, and so on up to Max (see package
	// restarts). Its next attempt shows in the task's trace, and
	// causeway_connect_task_restarts_total counts them. Default: off.
	Restarts RestartPolicy
	// Log hears the worker. Default: none.
	Log *zap.Logger
}

// Worker is a connect worker. Make it with New, run it with Run.
//
//causeway:owned
type Worker struct {
	cfg      Config
	log      *zap.Logger
	supplier transport.Supplier
	plugins  map[string]plugin
	server   *server.Base
	// info is what GET / answers, learned as Run starts.
	info   ServerInfo
	store  *store
	herder *herder
}

// New checks cfg, fills in its defaults, and opens the REST listener.
func New(cfg Config) (*Worker, error) {
	if cfg.Bootstrap == "" {
		return nil, errors.New("connectworker: no bootstrap servers")
	}
	if cfg.Client == "" {
		cfg.Client = transport.Clients()[0]
	}
	if cfg.StateTopic == "" {
		cfg.StateTopic = "causeway-connect-state"
	}
	if cfg.OffsetsTopic == "" {
		cfg.OffsetsTopic = "causeway-connect-offsets"
	}
	if cfg.Listen == "" {
		cfg.Listen = ":8083"
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = 2 * time.Second
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = reach.DefaultTimeout
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	if _, codec := cfg.Kafka["compression.codec"]; !codec && cfg.Kafka["compression.type"] == "" {
		cfg.Kafka = maps.Clone(cfg.Kafka)
		if cfg.Kafka == nil {
			cfg.Kafka = map[string]string{}
		}
		cfg.Kafka["compression.type"] = "lz4"
	}
	supplier, err := transport.Named(cfg.Client)
	if err != nil {
		return nil, fmt.Errorf("connectworker: %w", err)
	}
	w := &Worker{cfg: cfg, log: cfg.Log, supplier: supplier, plugins: map[string]plugin{
		HTTPSourceClass: {class: HTTPSourceClass, kind: kindSource, http: true}}}
	for class, s := range cfg.Sinks {
		w.plugins[class] = plugin{class: class, kind: kindSink, sink: s}
	}
	for class, s := range cfg.Sources {
		if _, dup := w.plugins[class]; dup {
			return nil, fmt.Errorf("connectworker: two plugins named %q", class)
		}
		w.plugins[class] = plugin{class: class, kind: kindSource, source: s}
	}
	w.server = server.NewBase(cfg.Listen, probes{w}, w.registry(), w.log)
	if err := w.server.Listen(); err != nil {
		return nil, fmt.Errorf("connectworker: REST listener: %w", err)
	}
	if w.cfg.WorkerID == "" {
		host, _ := os.Hostname()
		_, port, _ := net.SplitHostPort(w.server.Addr())
		w.cfg.WorkerID = host + ":" + port
	}
	return w, nil
}

// Addr is the REST API's address.
func (w *Worker) Addr() string { return w.server.Addr() }

// ID is the worker's id in the cluster.
func (w *Worker) ID() string { return w.cfg.WorkerID }

// producer makes a transactional producer, and the admin client beside
// it, with settings.
func (w *Worker) producer(s transport.Settings) (*txn.Producer, transport.Admin, error) {
	p, admin, err := w.supplier.Producer(s)
	if err != nil {
		return nil, nil, err
	}
	return txn.New(p, txn.Options{Log: w.log}), admin, nil
}

// settings are the transport settings of a client of the worker.
func (w *Worker) settings(application, instance string) transport.Settings {
	return transport.Settings{ApplicationID: application, Kafka: w.cfg.Kafka, Bootstrap: w.cfg.Bootstrap,
		InstanceID: instance, Log: w.log, AllowOffsetReset: true, AutoOffsetReset: "earliest"}
}

// Run serves the REST API and runs the connectors that fall to this
// worker until ctx is done; then it stops them, says it leaves, and
// closes its clients.
func (w *Worker) Run(ctx context.Context) (err error) {
	producer, admin, err := w.producer(w.settings("causeway-connect", w.cfg.WorkerID))
	if err != nil {
		w.server.Stop(context.Background())
		return fmt.Errorf("connectworker: %w", err)
	}
	if err := reach.Cluster(ctx, admin, w.cfg.Bootstrap, w.cfg.Kafka, w.cfg.ConnectTimeout, w.log); err != nil {
		producer.Close()
		admin.Close()
		w.server.Stop(context.Background())
		return fmt.Errorf("connectworker: %w", err)
	}
	consumer, err := w.supplier.Consumer(w.settings("causeway-connect", w.cfg.WorkerID))
	if err != nil {
		producer.Close()
		admin.Close()
		w.server.Stop(context.Background())
		return fmt.Errorf("connectworker: %w", err)
	}
	if w.store, err = newStore(ctx, w.cfg.StateTopic, consumer, producer, admin, w.log); err != nil {
		consumer.Close()
		producer.Close()
		admin.Close()
		w.server.Stop(context.Background())
		return fmt.Errorf("connectworker: %w", err)
	}
	defer func() { err = errors.Join(err, w.store.close()) }()

	readCtx, stopReading := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	var readErr error
	wg.Go(func() { readErr = w.store.run(readCtx) })
	defer func() {
		stopReading()
		wg.Wait()
		err = errors.Join(err, readErr)
	}()

	if err := w.store.sync(ctx); err != nil {
		return fmt.Errorf("connectworker: %w", err)
	}
	w.info = serverInfo(ctx, admin, w.log)
	w.herder = newHerder(w)
	w.routes()
	w.server.Serve()
	defer func() {
		shut, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		err = errors.Join(err, w.server.Stop(shut))
	}()
	w.log.Info("connect worker started", zap.String("worker", w.cfg.WorkerID), zap.String("rest", w.Addr()),
		zap.String("state_topic", w.cfg.StateTopic))
	return w.herder.run(ctx)
}
