package runtime

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"go.uber.org/zap"

	"github.com/causeway-stream/causeway/framework/taskmgr"
	"github.com/causeway-stream/causeway/runtime/embedded"
	"github.com/causeway-stream/causeway/runtime/internal/reach"
	"github.com/causeway-stream/causeway/runtime/internal/statedir"
	"github.com/causeway-stream/causeway/runtime/internal/transport"
	"github.com/causeway-stream/causeway/runtime/internal/txn"
	"github.com/causeway-stream/causeway/runtime/internal/upstream"
)

// connect makes the thread's clients, reaches the cluster, makes sure its
// topics exist (waiting for those it does not create), and builds what
// reads and restores. What it is doing shows in Status.Starting until the
// thread runs.
func (w *StreamThread) connect(ctx context.Context) error {
	p, admin, err := w.transport.Producer(w.settings)
	if err != nil {
		return err
	}
	w.producer = newProducer(p, w.log, w.metrics, w.stop)
	w.admin = admin
	w.board.setStarting("connecting to Kafka at " + w.bootstrap)
	if err := reach.Cluster(ctx, admin, w.bootstrap, w.cfg.Kafka, w.cfg.ConnectTimeout, w.log); err != nil {
		return err
	}
	w.board.setStarting("reading and creating topics")
	counts, err := topicManager{admin: w.admin, topo: w.topo, cfg: w.cfg, log: w.log, deadLetter: w.deadLetter,
		waiting: func(missing []string) {
			w.board.setStarting(fmt.Sprintf("waiting for topics %v to exist: create them, or run with --create-topics", missing))
		}}.ensureTopics(ctx)
	if err != nil {
		return err
	}
	w.board.setStarting("joining the group")
	if err := p.InitTransactions(ctx); err != nil {
		return fmt.Errorf("init transactions (transactional id %s-%s): %w", w.cfg.ApplicationID, w.instanceID, err)
	}
	consumer, err := w.transport.Consumer(w.settings)
	if err != nil {
		return err
	}
	w.consumer = consumer
	// The helper readers are franz-go clients, connected as --kafka asks
	// when franz-go can follow it.
	helpers, franzErr := transport.NewHelpers(w.bootstrap, w.cfg.Kafka)
	var src transport.ChangelogSource
	if franzErr == nil {
		src = helpers.Changelog(consumer)
	} else {
		fallback, ok := w.transport.(transport.FallbackReader)
		if !ok {
			return fmt.Errorf("kafka settings: %w", franzErr)
		}
		src = fallback.ChangelogFallback(w.settings, consumer)
		w.log.Warn("restores read through librdkafka, and queries are not forwarded to other workers", zap.Error(franzErr))
	}
	if franzErr == nil {
		m, err := startMembership(helpers, membersTopic(w.cfg.ApplicationID), w.instanceID, w.log)
		if err != nil {
			return fmt.Errorf("members: %w", err)
		}
		w.board.follow(m)
	}
	if len(w.topo.GlobalTables()) > 0 {
		if franzErr != nil {
			return fmt.Errorf("global tables are read with franz-go: %w", franzErr)
		}
		if w.globals, err = taskmgr.NewGlobals(w.topo, counts); err != nil {
			return err
		}
		if w.globalReader, err = startGlobalReader(ctx, helpers, w.globals, w.log); err != nil {
			return err
		}
	}
	if w.tasks, err = w.newTaskManager(counts, consumer, src); err != nil {
		return err
	}
	w.pump.attach(w.tasks, w.producer, w.consumer, w.cfg.MaxHeldPerChannel)
	w.desk.follow(upstream.NewView(w.admin, counts, w.now, w.desk.sleep))
	poll := consumer.Poll
	if w.wrapPoll != nil {
		poll = w.wrapPoll(poll)
	}
	w.pump.setPoll(poll)
	var inputs []string
	for _, pi := range w.topo.Processors() {
		for _, in := range pi.Inputs {
			if !slices.Contains(inputs, in) {
				inputs = append(inputs, in)
			}
		}
	}
	slices.Sort(inputs)
	if err := consumer.Subscribe(inputs, rebalancer{w}); err != nil {
		return fmt.Errorf("subscribe %v: %w", inputs, err)
	}
	w.log.Info("worker started", zap.String("application_id", w.cfg.ApplicationID), zap.String("instance_id", w.instanceID),
		zap.Strings("inputs", inputs), zap.Bool("gate_off", w.cfg.GateOff), zap.String("client", w.cfg.Client))
	return nil
}

// newProducer is the thread's transactional producer over client, which
// counts commits, aborts and the records each topic got in the metrics.
func newProducer(client transport.Producer, log *zap.Logger, m *Metrics, stop <-chan struct{}) *txn.Producer {
	return txn.New(client, txn.Options{Log: log, Stop: stop, OnCommit: m.Commits.Inc, OnAbort: m.Aborts.Inc,
		OnCommitted: func(topic string, n int) { m.RecordsOut.WithLabelValues(topic).Add(float64(n)) }})
}

// Start connects to Kafka (starting the embedded broker when no bootstrap
// servers are configured), creates internal topics, initialises the
// transactional producer, subscribes, and starts processing.
func (w *StreamThread) Start(ctx context.Context) error {
	lock, err := statedir.Take(w.cfg.StateDir, "application "+w.cfg.ApplicationID)
	if err != nil {
		return err
	}
	w.stateLock = lock
	id, err := instanceIDOf(w.cfg)
	if err != nil {
		releaseStateDir(w.stateLock, w.log)
		w.stateLock = nil
		return err
	}
	w.instanceID = id
	w.bootstrap = w.cfg.BootstrapServers
	if w.bootstrap == "" {
		dir := filepath.Join(w.cfg.StateDir, "broker")
		b, err := embedded.Start(embedded.DataDir(dir))
		if err != nil {
			releaseStateDir(w.stateLock, w.log)
			w.stateLock = nil
			return err
		}
		w.broker, w.bootstrap = b, b.Addr()
		w.log.Info("no bootstrap servers given: started the embedded broker", zap.String("addr", w.bootstrap), zap.String("data_dir", dir))
	}
	w.settings = transport.Settings{
		ApplicationID:    w.cfg.ApplicationID,
		Kafka:            w.cfg.Kafka,
		StaticMembership: w.cfg.StaticMembership,
		AllowOffsetReset: w.cfg.AllowOffsetReset,
		AutoOffsetReset:  w.cfg.AutoOffsetReset,
		Bootstrap:        w.bootstrap,
		InstanceID:       w.instanceID,
		Rebalance:        w.cfg.RebalanceProtocol,
		Copartitioned:    w.groups.groups,
		Replicas: transport.Replicas{Standbys: w.cfg.StandbyReplicas, AcceptableLag: w.cfg.AcceptableRecoveryLag,
			MaxWarmups: w.cfg.MaxWarmupReplicas, Stateless: w.groups.stateless(), Report: w.board.stateReport},
		Log: w.log,
	}
	if err := w.connect(ctx); err != nil {
		w.closeClients()
		return err
	}
	go w.run()
	return nil
}

// instanceIDOf is cfg's instance id, or else the one kept in its state
// dir, made up and kept there the first time.
func instanceIDOf(cfg Config) (string, error) {
	if cfg.InstanceID != "" {
		return cfg.InstanceID, nil
	}
	path := filepath.Join(cfg.StateDir, "instance-id")
	if b, err := os.ReadFile(path); err == nil && validID.Match(b) {
		return string(b), nil
	}
	var raw [8]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("instance id: %w", err)
	}
	id := hex.EncodeToString(raw[:])
	if err := os.WriteFile(path, []byte(id), 0o644); err != nil {
		return "", fmt.Errorf("instance id: %w", err)
	}
	return id, nil
}
