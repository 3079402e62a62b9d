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
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/runtime/internal/transport"
	"github.com/causeway-stream/causeway/runtime/internal/txn"
)

// Config is what a Worker runs.
type Config struct {
	// Connector names the connector: its consumer group is
	// "connect-<Connector>", and the sink keeps its positions under it.
	// Required.
	Connector string
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
	dead []connect.Rejected
	// failure stops Run: set by a rebalance handler that could not
	// carry out its part.
	failure error
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
}

// assignment is a worker's channels and its gate over the connector's.
type assignment struct {
	node *causal.Node[held]
	// own maps each channel the worker reads to its position as committed
	// (-1: none).
	own map[causal.Channel]int64
	// pending are delivered records not yet put.
	pending []held
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
	}
	if cfg.Client == "" {
		cfg.Client = transport.Clients()[0]
	}
	if cfg.InstanceID == "" {
		cfg.InstanceID = "0"
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
	if err := w.start(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // stopped while it started: not a failure
		}
		return err
	}
	batch := make([]transport.Event, 0, 512)
	lastCommit := time.Now()
	for ctx.Err() == nil {
		batch = batch[:0]
		w.consumer.Poll(20*time.Millisecond, cap(batch), &batch)
		if w.failure != nil {
			return w.failure
		}
		for _, ev := range batch {
			if err := w.handle(ev); err != nil {
				return err
			}
		}
		if w.flight != nil {
			select {
			case res := <-w.flight.done:
				if err := w.landed(res); err != nil {
					return err
				}
			default:
			}
		}
		a := w.assignment
		if a == nil {
			continue
		}
		if err := w.refresh(ctx, a); err != nil {
			if ctx.Err() != nil {
				break // stopped while reading the positions: not a failure
			}
			return err
		}
		due := len(a.pending) >= w.cfg.BatchSize || time.Since(lastCommit) >= w.cfg.CommitInterval
		if due && w.flight != nil && len(a.pending) >= 4*w.cfg.BatchSize {
			// The sink's system is slower than Kafka: wait for it, rather
			// than holding ever more records.
			if err := w.await(); err != nil {
				return err
			}
		}
		if due && w.flight == nil {
			w.launch(context.WithoutCancel(ctx))
			lastCommit = time.Now()
		}
	}
	return w.commit(context.WithoutCancel(ctx))
}

// start learns the topics' partition counts, readies the dead-letter
// producer, and joins the group (or assigns the configured channels).
func (w *Worker) start(ctx context.Context) error {
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

// rebalance hears the group's rebalances.
type rebalance struct {
	w   *Worker
	ctx context.Context
}

func (r rebalance) Assigned(chs []causal.Channel) error {
	if err := r.w.assigned(r.ctx, chs); err != nil {
		r.w.fail(err)
		return err
	}
	return nil
}

func (r rebalance) Revoked(chs []causal.Channel, lost bool) {
	r.w.log.Info("channels revoked", zap.String("channels", fmt.Sprint(chs)), zap.Bool("lost", lost))
	ctx := context.WithoutCancel(r.ctx)
	if lost {
		if err := r.w.await(); err != nil {
			r.w.log.Warn("a commit in flight when the assignment was lost", zap.Error(err))
		}
		if err := r.w.cfg.Task.Abort(ctx); err != nil {
			r.w.log.Warn("abort after the assignment was lost", zap.Error(err))
		}
	} else if err := r.w.commit(ctx); err != nil {
		r.w.fail(err)
	}
	r.w.setAssignment(nil)
}

// fail keeps the first failure for Run to stop on.
func (w *Worker) fail(err error) {
	if w.failure == nil {
		w.failure = err
	}
}

// setAssignment replaces the worker's assignment.
func (w *Worker) setAssignment(a *assignment) { w.assignment = a }

// assigned starts reading chs where the sink's positions say, and builds
// the gate over every channel of the connector's topics.
func (w *Worker) assigned(ctx context.Context, chs []causal.Channel) error {
	positions, err := w.cfg.Task.Positions(ctx)
	if err != nil {
		return err
	}
	a := &assignment{own: map[causal.Channel]int64{}, lastRefresh: time.Now()}
	starts := map[causal.Channel]int64{}
	for _, ch := range chs {
		pos, ok := positions[ch]
		a.own[ch] = -1
		if ok {
			a.own[ch] = pos
		} else if pos, _, err = w.consumer.Watermarks(ch); err != nil {
			return fmt.Errorf("start of %s: %w", ch, err)
		}
		starts[ch] = pos
	}
	opts := []causal.NodeOpt{causal.Inputs(w.cfg.Topics...)}
	if w.cfg.GateOff {
		opts = append(opts, causal.DeliverOnArrival())
	}
	if a.node, err = causal.NewNode[held](opts...); err != nil {
		return err
	}
	for _, t := range w.cfg.Topics {
		for p := range w.counts[t] {
			ch := causal.Channel{Topic: t, Partition: p}
			next, ok := starts[ch]
			if !ok {
				next = positions[ch] // another task's: as far as it committed
			}
			if err := a.node.Seed(ch, next); err != nil {
				return err
			}
		}
	}
	if err := w.consumer.Assign(starts); err != nil {
		return err
	}
	w.setAssignment(a)
	w.log.Info("channels assigned", zap.String("starts", fmt.Sprint(starts)))
	return nil
}

// handle takes one event of the consumer.
func (w *Worker) handle(ev transport.Event) error {
	a := w.assignment
	switch ev.Kind {
	case transport.EventRecord:
		if a == nil {
			return nil
		}
		m := &ev.Msg
		ch := m.Channel()
		rec := connect.Record{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset, Key: m.Key, Value: m.Value,
			Timestamp: m.Timestamp, Headers: m.Headers}
		if off, ok := w.cfg.Skip[ch]; ok && off == m.Offset {
			_, err := a.node.ReceiveOrReject(ch, m.Offset, nil, false, held{rec: rec, bad: ErrSkipped})
			if err != nil {
				return fmt.Errorf("%s/%d@%d: %w", m.Topic, m.Partition, m.Offset, err)
			}
			break
		}
		header, present := framework.Record(*m).Header(causal.HeaderKey)
		_, err := a.node.ReceiveOrReject(ch, m.Offset, header, present, held{rec: rec})
		if errors.Is(err, causal.ErrCorruptClock) {
			if !w.cfg.ToleranceAll {
				return &RefusedError{Record: rec, Err: err}
			}
			_, err = a.node.ReceiveOrReject(ch, m.Offset, nil, false, held{rec: rec, bad: err})
		}
		if err != nil {
			return fmt.Errorf("%s/%d@%d: %w", m.Topic, m.Partition, m.Offset, err)
		}
	case transport.EventPosition:
		if a == nil {
			return nil
		}
		if err := a.node.Advance(ev.Msg.Channel(), ev.Msg.Offset); err != nil && !errors.Is(err, causal.ErrNotInScope) {
			return err
		}
	case transport.EventFatal:
		return fmt.Errorf("kafka: %w", ev.Err)
	default:
		w.log.Warn("kafka", zap.Error(ev.Err))
		return nil
	}
	a.drain()
	return nil
}

// refresh reads the positions of other tasks' channels again when a head
// waits on one of them, and advances the gate over what they committed.
func (w *Worker) refresh(ctx context.Context, a *assignment) error {
	if a.node.Held() == 0 || time.Since(a.lastRefresh) < w.cfg.RefreshInterval || len(w.waitingOnOthers(a)) == 0 {
		return nil
	}
	a.lastRefresh = time.Now()
	positions, err := w.cfg.Task.Positions(ctx)
	switch {
	case err == nil:
		a.refreshFailures = 0
	case connect.IsRetriable(err) && a.refreshFailures < w.cfg.MaxRetries:
		// Read again after the backoff; nothing waits on it but what the
		// gate holds.
		a.refreshFailures++
		a.lastRefresh = a.lastRefresh.Add(w.cfg.RetryBackoff)
		w.log.Warn("read the other tasks' positions: a transient error; trying again",
			zap.Int("attempt", a.refreshFailures), zap.Duration("backoff", w.cfg.RetryBackoff), zap.Error(err))
		return nil
	default:
		return err
	}
	for ch, pos := range positions {
		if _, mine := a.own[ch]; mine || w.counts[ch.Topic] <= ch.Partition {
			continue
		}
		if err := a.node.Advance(ch, pos); err != nil && !errors.Is(err, causal.ErrNotInScope) {
			return err
		}
	}
	a.drain()
	return nil
}

// drain takes what the gate delivers now into pending, in order.
func (a *assignment) drain() {
	for d, ok := a.node.Next(); ok; d, ok = a.node.Next() {
		a.pending = append(a.pending, d.Payload)
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
