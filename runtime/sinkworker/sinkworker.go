// Package sinkworker runs one task of a sink connector (package connect)
// against Kafka: a member of the connector's consumer group reads the
// channels the group gives it, a causal gate holds each record until every
// record its clock claims on the connector's topics has been written into
// the sink's system, and each commit writes the records delivered and
// their channels' positions in one transaction of that system.
//
// The gate's scope is every channel of the connector's topics, not only
// the task's own: a channel another task writes is seeded, and advanced,
// from the positions the sink's system holds, so a claim on it is met
// once the other task has committed the claimed record. A task's own
// channels advance as it delivers; what it delivered goes into its open
// transaction in delivery order, so a claim met by its own delivery is
// met in the database by the time the transaction commits.
package sinkworker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/connect"
	"github.com/causeway-stream/causeway/runtime/internal/member"
	"github.com/causeway-stream/causeway/runtime/internal/reach"
	"github.com/causeway-stream/causeway/runtime/internal/transport"
	"github.com/causeway-stream/causeway/runtime/internal/txn"
)

// ErrKafkaUnreachable is returned by Run when the cluster did not answer
// within Config.ConnectTimeout, or refused the worker for good; the error
// names the bootstrap servers and the last cause. It is the stream
// worker's runtime.ErrKafkaUnreachable.
var ErrKafkaUnreachable = reach.ErrUnreachable

// Worker runs one sink task. Build it with New, run it with Run.
//
//causeway:owned
type Worker struct {
	cfg      Config
	log      *zap.Logger
	consumer transport.Consumer
	producer *txn.Producer
	admin    transport.Admin
	counts   map[string]int32
	// deadPartitions is the dead-letter topic's partition count.
	deadPartitions int32
	// assignment is the state of the channels assigned now; nil when
	// none are.
	assignment *assignment
	// dead are refused records waiting for the next commit.
	dead []deadLetter
	// loop is the worker's member loop: it polls, hands the events to
	// the worker's engine, and stops on the first failure (fail).
	loop *member.Loop
	// flight is the commit being written in the background, nil when
	// none is; spare is the record slice of the last one, for the next.
	flight *flight
	spare  []held
	// stopping is closed when Run's context is done.
	stopping <-chan struct{}

	mu     sync.Mutex
	status Status
}

// held is what the gate holds of a record: the record, and why it goes
// to the dead-letter topic instead of the sink when it does.
type held struct {
	rec connect.Record
	bad error
	// meta marks a record of the transaction topic: read, and passed,
	// but not written.
	meta bool
}

// assignment is a worker's channels and its gate over the connector's.
type assignment struct {
	node *causal.Node[held]
	// own maps each channel the worker reads to its position as committed
	// (-1: none).
	own map[causal.Channel]int64
	// pending are delivered records not yet put.
	pending []held
	// txns follows the source transactions among them
	// (Config.TransactionTopic).
	txns txnTracker
	// lastRefresh is when the positions of other tasks' channels were
	// last read, or are next due less RefreshInterval after a failure.
	lastRefresh time.Time
	// refreshFailures counts the reads of the positions in a row that
	// failed on a transient error.
	refreshFailures int
}

// Status is what a worker has done.
type Status struct {
	// Written counts the records written, Rejected those sent to the
	// dead-letter topic, Commits the commits.
	Written, Rejected, Commits int
	// Held counts records the gate holds; Waiting names the channels of
	// other tasks their heads wait on.
	Held    int
	Waiting []causal.Channel
	// MissingTopics are the connector's topics that do not exist yet,
	// which the worker waits for before it reads anything.
	MissingTopics []string
}

// New checks cfg, fills in its defaults, and makes the worker's Kafka
// clients.
func New(cfg Config) (*Worker, error) {
	switch {
	case cfg.Connector == "":
		return nil, errors.New("sinkworker: no connector name")
	case len(cfg.Topics) == 0:
		return nil, errors.New("sinkworker: no topics")
	case cfg.Task == nil:
		return nil, errors.New("sinkworker: no task")
	case cfg.Bootstrap == "":
		return nil, errors.New("sinkworker: no bootstrap servers")
	case cfg.ToleranceAll && cfg.DeadLetterTopic == "":
		return nil, errors.New("sinkworker: errors are tolerated but there is no dead-letter topic to send them to")
	case len(cfg.Skip) > 0 && cfg.DeadLetterTopic == "":
		return nil, errors.New("sinkworker: records to skip but no dead-letter topic to send them to")
	case cfg.TransactionTopic != "" && !slices.Contains(cfg.Topics, cfg.TransactionTopic):
		return nil, fmt.Errorf("sinkworker: the transaction topic %q is not among the topics %v", cfg.TransactionTopic, cfg.Topics)
	case cfg.TransactionTopic != "" && cfg.GateOff:
		return nil, errors.New("sinkworker: whole source transactions need the gate: an end may arrive before its transaction without it")
	}
	if cfg.Client == "" {
		cfg.Client = transport.Clients()[0]
	}
	if cfg.InstanceID == "" {
		cfg.InstanceID = "0"
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = reach.DefaultTimeout
	}
	if cfg.CommitInterval <= 0 {
		cfg.CommitInterval = 100 * time.Millisecond
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 5000
	}
	if cfg.RefreshInterval <= 0 {
		cfg.RefreshInterval = 50 * time.Millisecond
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	supplier, err := transport.Named(cfg.Client)
	if err != nil {
		return nil, err
	}
	s := transport.Settings{ApplicationID: "connect-" + cfg.Connector, Kafka: cfg.Kafka, Bootstrap: cfg.Bootstrap,
		InstanceID: cfg.InstanceID, Log: cfg.Log, AllowOffsetReset: true, AutoOffsetReset: "earliest"}
	w := &Worker{cfg: cfg, log: cfg.Log}
	p, admin, err := supplier.Producer(s)
	if err != nil {
		return nil, fmt.Errorf("sinkworker: %w", err)
	}
	w.producer, w.admin = txn.New(p, txn.Options{Log: cfg.Log}), admin
	if w.consumer, err = supplier.Consumer(s); err != nil {
		w.producer.Close()
		w.admin.Close()
		return nil, fmt.Errorf("sinkworker: %w", err)
	}
	return w, nil
}

// Run reads, gates and writes until ctx is done or the worker fails. On
// the way out it commits what it delivered, and closes the task and the
// clients.
func (w *Worker) Run(ctx context.Context) (err error) {
	defer func() {
		if f := w.flight; f != nil {
			// A commit in flight ends before the task closes; it holds
			// what it put and the positions of just that, so it may land.
			err = errors.Join(err, <-f.done)
			w.flight = nil
		}
		if err != nil {
			w.setAssignment(nil) // commit nothing on the way out
		}
		err = errors.Join(err, w.close())
	}()
	w.stopping = ctx.Done()
	if w.loop, err = member.New(w.consumer.Poll, member.Options{Batch: 512, Wait: 20 * time.Millisecond,
		CommitInterval: w.cfg.CommitInterval, Log: w.log}); err != nil {
		return err
	}
	if err := w.start(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // stopped while it started: not a failure
		}
		return err
	}
	if err := w.loop.Run(&engine{w: w, ctx: ctx, launched: time.Now()}, ctx.Done()); err != nil {
		return err
	}
	return w.commit(context.WithoutCancel(ctx))
}

// start reaches the cluster, learns the topics' partition counts, readies
// the dead-letter producer, and joins the group (or assigns the
// configured channels).
func (w *Worker) start(ctx context.Context) error {
	if err := reach.Cluster(ctx, w.admin, w.cfg.Bootstrap, w.cfg.Kafka, w.cfg.ConnectTimeout, w.log); err != nil {
		return fmt.Errorf("sinkworker: %w", err)
	}
	counts, err := w.awaitTopics(ctx)
	if err != nil {
		return err
	}
	w.counts = map[string]int32{}
	for _, t := range w.cfg.Topics {
		w.counts[t] = counts[t]
	}
	if w.cfg.ToleranceAll || len(w.cfg.Skip) > 0 {
		n, ok := counts[w.cfg.DeadLetterTopic]
		if !ok {
			// Kafka Connect makes its dead-letter topic when missing too.
			n = 1
			if err := w.admin.CreateTopics(ctx, []transport.TopicSpec{{Name: w.cfg.DeadLetterTopic, Partitions: n}}); err != nil {
				return fmt.Errorf("sinkworker: create the dead-letter topic %q: %w", w.cfg.DeadLetterTopic, err)
			}
			w.log.Info("created the dead-letter topic", zap.String("topic", w.cfg.DeadLetterTopic))
		}
		w.deadPartitions = n
		if err := w.producer.Init(ctx); err != nil {
			return fmt.Errorf("dead-letter producer: %w", err)
		}
	}
	if w.cfg.Channels != nil {
		return w.assigned(ctx, w.cfg.Channels)
	}
	return w.consumer.Subscribe(w.cfg.Topics, rebalance{w: w, ctx: ctx})
}

// fail stops Run on err, unless it stops on an earlier failure.
func (w *Worker) fail(err error) {
	if w.loop.Fate.Fatal() == nil {
		w.loop.Fate.Stop(err)
	}
}

// waitingOnOthers lists the other tasks' channels heads wait on.
func (w *Worker) waitingOnOthers(a *assignment) []causal.Channel {
	var out []causal.Channel
	for _, st := range a.node.Status() {
		if st.Blocked {
			if _, mine := a.own[st.WaitingFor]; !mine {
				out = append(out, st.WaitingFor)
			}
		}
	}
	return out
}

// publish records what the gate holds for Status.
func (w *Worker) publish(a *assignment) {
	held, waiting := a.node.Held(), w.waitingOnOthers(a)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.status.Held, w.status.Waiting = held, waiting
}

// Status returns what the worker has done so far, and what its gate
// holds as of its last commit.
func (w *Worker) Status() Status {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.status
	st.Waiting, st.MissingTopics = slices.Clone(st.Waiting), slices.Clone(st.MissingTopics)
	return st
}

// close closes the task and the clients.
func (w *Worker) close() error {
	err := w.consumer.Close()
	w.setAssignment(nil)
	w.admin.Close()
	return errors.Join(err, w.producer.Close(), w.cfg.Task.Close())
}

// awaitTopics returns the cluster's partition counts once every topic of
// the connector exists: a sink started before its topics waits for them,
// as a Kafka Connect sink does, looking every second, with the missing
// named in Status.MissingTopics and logged once.
func (w *Worker) awaitTopics(ctx context.Context) (map[string]int32, error) {
	logged := false
	for {
		counts, err := w.admin.PartitionCounts(ctx)
		if err != nil {
			return nil, fmt.Errorf("partition counts: %w", err)
		}
		missing := slices.DeleteFunc(slices.Clone(w.cfg.Topics), func(t string) bool { _, ok := counts[t]; return ok })
		w.mu.Lock()
		w.status.MissingTopics = missing
		w.mu.Unlock()
		if len(missing) == 0 {
			if logged {
				w.log.Info("the topics waited for exist")
			}
			return counts, nil
		}
		if !logged {
			w.log.Warn("waiting for topics that do not exist", zap.Strings("topics", missing))
			logged = true
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}
