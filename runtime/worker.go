package runtime

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/causeway-stream/causeway/runtime/internal/restarts"
	"github.com/causeway-stream/causeway/runtime/internal/restore"

	"github.com/cockroachdb/pebble/v2"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/taskmgr"
	"github.com/causeway-stream/causeway/runtime/embedded"
	"github.com/causeway-stream/causeway/runtime/internal/statedir"
	"github.com/causeway-stream/causeway/runtime/internal/transport"
	"github.com/causeway-stream/causeway/runtime/internal/txn"
	"github.com/causeway-stream/causeway/runtime/internal/upstream"
)

// taskRequest asks the pump to restart a failed task, or to move it past
// the record it failed on (skip).
type taskRequest struct {
	id    string
	skip  bool
	reply chan taskReply
}

type taskReply struct {
	skipped causal.Entry
	err     error
}

// StreamThread runs a topology against Kafka as one member of the
// application's consumer group, as a Kafka Streams StreamThread does: one
// consumer, one transactional producer, and the tasks the group assigns
// it. A worker process (Instance, Kafka Streams' KafkaStreams) runs
// --threads of them. Build one with NewStreamThread, then Start and Stop it
// (Module does this with fx). Its methods are safe for concurrent use.
//
// StreamThread is the facade over the runtime's parts, each in a file of its
// own: the pump (pump.go) polls and hands records to the task manager's
// tasks (tasks.go), the transactional producer (runtime/internal/txn) sends and
// commits, commits and aborts follow commit.go, the changelog reader
// (runtime/internal/restore) restores on a goroutine of its own
// (restoring.go), and the
// topic manager (topics.go) creates topics. They reach Kafka through the
// worker's transport (runtime/internal/transport): librdkafka or franz-go, as
// Config.Client says.
//
//causeway:owned
type StreamThread struct {
	cfg     Config
	topo    *framework.Topology
	log     *zap.Logger
	metrics *Metrics
	now     func() time.Time

	bootstrap  string
	instanceID string
	broker     *embedded.Broker
	transport  transport.Supplier
	consumer   transport.Consumer
	admin      transport.Admin

	// Owned by the pump goroutine.
	producer *txn.Producer
	tasks    *taskmgr.Manager
	pump     pump
	// fate is what the pump must do beyond its next step: stop for good,
	// or abort the open transaction.
	fate fate
	// stateLock is held on the state dir from Start until the clients
	// and stores are closed.
	stateLock *statedir.Lock
	// failedCommits counts transactions failed in a row, for backoff and
	// readiness; lastCommitErr is the last one's error.
	failedCommits int
	lastCommitErr error
	// failedGauge is this thread's series of the failed-in-a-row metric.
	failedGauge prometheus.Gauge
	// queries are what Query asks of the pump, and pendingQueries those
	// whose clock makes them wait for a commit.
	queries        chan queryRequest
	pendingQueries []queryRequest
	// members follows which worker runs which task, for forwarding
	// queries; nil when franz-go cannot connect with the given settings.
	// advertised is this worker's HTTP address as it tells the others
	// (under mu).
	members    *membership
	advertised string
	// upstream is what causal queries follow their clocks through the
	// processors before a store with (upstream.go); nil until the worker
	// is connected, or without an admin client (under mu).
	upstream *upstream.View
	// globals is the worker's copy of the topology's global tables, and
	// globalReader what follows them; nil without global tables.
	globals      *taskmgr.Globals
	globalReader *globalReader
	// wrapPoll (set by tests only, before Start) wraps the consumer's Poll.
	wrapPoll func(poll transport.PollFunc) transport.PollFunc

	// claims checks claims against the ends of their channels (claims.go).
	// Owned by the pump.
	claims claimCheck
	// deadLetter is where dead letters go: the topology's dead-letter
	// topic, or "<application-id>-dead-letter".
	deadLetter string
	// positions is, per task, where its stores on disk stand in their
	// changelogs, as last learned (state.go), and refresh the look at the
	// changelogs' ends that learns it while the worker runs. Owned by the
	// pump.
	positions map[string]restore.Positions
	refresh   positionRefresh
	// restores is the restore under way off the pump (restoring.go).
	restores restores
	// standby is this thread's copies of other workers' tasks' state
	// (standby.go). Owned by the pump.
	standby standbys
	// groups are the co-partitioned groups of input topics, and leads
	// each processor's group's first topic, which names its tasks to the
	// group's balancer.
	groups [][]string
	leads  map[string]string
	// sizes is, per task, how many changelog records a full restore of
	// its stores would read, as the last look at the changelogs found
	// (state.go), and report what this thread tells the group of its
	// state when it joins (under mu). Owned by the pump.
	sizes  map[string]int64
	report transport.StateReport
	// process is the instance id of the process the thread belongs to,
	// which the group's balancer keeps standbys away from; empty for a
	// thread run on its own (its own instance id).
	process string
	// blockCache is the block cache the tasks' stores on disk share,
	// made when the first opens (state.go), under cacheMu: restores open
	// stores too.
	cacheMu    sync.Mutex
	blockCache *pebble.Cache

	requests chan taskRequest
	// restarts is the restart policy's view of the failed tasks.
	restarts *restarts.Tracker
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once

	mu     sync.Mutex
	status Status
	// starting says what the thread does while it starts (setStarting).
	starting string
	// restoring is the progress of the restores under way, by task.
	restoring map[string]RestoreStatus
	err       error
}

// Worker is StreamThread's former name.
//
// Deprecated: use StreamThread; a worker process is an Instance.
type Worker = StreamThread

// NewWorker is NewStreamThread's former name.
//
// Deprecated: use NewStreamThread.
func NewWorker(cfg Config, topo *framework.Topology, log *zap.Logger, metrics *Metrics) (*StreamThread, error) {
	return NewStreamThread(cfg, topo, log, metrics)
}

// NewStreamThread checks the configuration and returns a stream thread
// that has not started.
func NewStreamThread(cfg Config, topo *framework.Topology, log *zap.Logger, metrics *Metrics) (*StreamThread, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if topo == nil {
		return nil, errors.New("runtime: no topology")
	}
	tr, err := transport.Named(cfg.Client)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = zap.NewNop()
	}
	if metrics == nil {
		metrics = NewMetrics()
	}
	topo = topo.ForApplication(cfg.ApplicationID)
	deadLetter := topo.DeadLetterTopic()
	if deadLetter == "" {
		deadLetter = cfg.ApplicationID + "-dead-letter"
	}
	w := &StreamThread{
		cfg: cfg, topo: topo, log: log, metrics: metrics, now: time.Now, deadLetter: deadLetter, transport: tr,
		claims:    claimCheck{ends: map[causal.Channel]int64{}},
		positions: map[string]restore.Positions{},
		sizes:     map[string]int64{},
		refresh:   positionRefresh{results: make(chan refreshed, 1), start: func(f func()) { go f() }},
		restores:  restores{start: func(f func()) { go f() }},
		requests:  make(chan taskRequest),
		restarts:  restarts.New(restarts.Policy{Initial: cfg.TaskRestartBackoff, Max: cfg.TaskRestartBackoffMax}),
		starting:  "not started yet",
		queries:   make(chan queryRequest, 64),
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
	}
	w.groups = copartitioned(topo)
	w.leads = map[string]string{}
	for _, pi := range topo.Processors() {
		for _, g := range w.groups {
			if slices.Contains(g, pi.Inputs[0]) {
				w.leads[pi.Name] = g[0]
			}
		}
	}
	w.setThread(0)
	w.pump.setBatch(tr.PollBatch())
	return w, nil
}

// Bootstrap returns the brokers the worker uses (the embedded broker's
// address when it started one).
func (w *StreamThread) Bootstrap() string { return w.bootstrap }

// Start connects to Kafka (starting the embedded broker when no bootstrap
// servers are configured), creates internal topics, initialises the
// transactional producer, subscribes, and starts processing.
func (w *StreamThread) Start(ctx context.Context) error {
	lock, err := statedir.Take(w.cfg.StateDir, "application "+w.cfg.ApplicationID)
	if err != nil {
		return err
	}
	w.stateLock = lock
	id, err := w.loadInstanceID()
	if err != nil {
		w.releaseStateDir()
		return err
	}
	w.instanceID = id
	w.bootstrap = w.cfg.BootstrapServers
	if w.bootstrap == "" {
		dir := filepath.Join(w.cfg.StateDir, "broker")
		b, err := embedded.Start(embedded.DataDir(dir))
		if err != nil {
			w.releaseStateDir()
			return err
		}
		w.broker, w.bootstrap = b, b.Addr()
		w.log.Info("no bootstrap servers given: started the embedded broker", zap.String("addr", w.bootstrap), zap.String("data_dir", dir))
	}
	if err := w.connect(ctx); err != nil {
		w.closeClients()
		return err
	}
	go w.run()
	return nil
}

func (w *StreamThread) loadInstanceID() (string, error) { return instanceIDOf(w.cfg) }

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

// clientSettings is what the transport makes the worker's clients from.
func (w *StreamThread) clientSettings() transport.Settings {
	return transport.Settings{
		ApplicationID:    w.cfg.ApplicationID,
		Kafka:            w.cfg.Kafka,
		StaticMembership: w.cfg.StaticMembership,
		AllowOffsetReset: w.cfg.AllowOffsetReset,
		AutoOffsetReset:  w.cfg.AutoOffsetReset,
		Bootstrap:        w.bootstrap,
		InstanceID:       w.instanceID,
		Rebalance:        w.cfg.RebalanceProtocol,
		Copartitioned:    w.groups,
		Replicas: transport.Replicas{Standbys: w.cfg.StandbyReplicas, AcceptableLag: w.cfg.AcceptableRecoveryLag,
			MaxWarmups: w.cfg.MaxWarmupReplicas, Stateless: w.statelessGroups(), Report: w.stateReport},
		Log: w.log,
	}
}

// Stop finishes the open work (one last commit), leaves the group and
// closes the clients, within ctx or the configured shutdown timeout.
func (w *StreamThread) Stop(ctx context.Context) error {
	w.stopOnce.Do(func() { close(w.stop) })
	// The last commit, then the clients' close, each bounded by it
	// (closeClientsWithin): a stop that closed cleanly but whose clients
	// took their bound is no failure.
	ctx, cancel := context.WithTimeout(ctx, 2*w.cfg.ShutdownTimeout+time.Second)
	defer cancel()
	select {
	case <-w.done:
	case <-ctx.Done():
		return fmt.Errorf("stop: %w", ctx.Err())
	}
	return w.Err()
}

// Done is closed when the worker has stopped, by Stop or by a fatal error.
func (w *StreamThread) Done() <-chan struct{} { return w.done }

// Err returns the fatal error that stopped the worker, if any.
func (w *StreamThread) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// RestartTask rebuilds a failed task, and no other, from its committed
// state (after fixing what made it fail, say), once the other tasks' work
// so far is committed. It returns ErrNoTask for a task the worker does not
// run and ErrNotFailed, rebuilding nothing, for one that is not failed.
func (w *StreamThread) RestartTask(ctx context.Context, id string) error {
	_, err := w.request(ctx, taskRequest{id: id})
	return err
}

// SkipRecord moves a failed task past the input record it failed on: the
// task is rebuilt from its committed state, and when it reaches that record
// again it writes it to the dead-letter topic (with the failure as the
// reason) instead of processing it; the dead letter and the offsets past
// it commit in one transaction. It returns the record skipped, ErrNoTask,
// ErrNotFailed, or ErrNoRecord for a failure that names no record.
func (w *StreamThread) SkipRecord(ctx context.Context, id string) (causal.Entry, error) {
	return w.request(ctx, taskRequest{id: id, skip: true})
}

func (w *StreamThread) request(ctx context.Context, req taskRequest) (causal.Entry, error) {
	req.reply = make(chan taskReply, 1)
	select {
	case w.requests <- req:
	case <-w.done:
		return causal.Entry{}, ErrStopped
	case <-ctx.Done():
		return causal.Entry{}, ctx.Err()
	}
	select {
	case r := <-req.reply:
		return r.skipped, r.err
	case <-ctx.Done():
		return causal.Entry{}, ctx.Err()
	}
}

// DeadLetterTopic is the topic dead letters go to.
func (w *StreamThread) DeadLetterTopic() string { return w.deadLetter }

// run is the pump's goroutine: the only one that touches the clients and
// tasks.
func (w *StreamThread) run() {
	defer w.closeClientsWithin(w.cfg.ShutdownTimeout)
	w.clockAt(w.now())
	nextCommit := w.pump.time.Add(w.cfg.CommitInterval)
	// Stop and restart requests are looked at when the consumer is idle and
	// every so many events otherwise: a select per record costs more than the
	// record's own bookkeeping.
	const eventsPerCheck = 64
	sinceCheck := 0
	for {
		if sinceCheck == 0 {
			select {
			case <-w.stop:
				w.shutdown()
				return
			case req := <-w.requests:
				w.restarts.Forget(req.id) // an operator's: the policy's count starts over
				req.reply <- w.serve(req)
			case req := <-w.queries:
				w.takeQuery(req)
			case res := <-w.restores.results:
				w.finishRestores(res)
			case recs := <-w.globalBatches():
				w.applyGlobals(recs)
			case <-w.globalReader.stopped():
				w.fate.stop(w.globalReader.failure())
			default:
			}
		}
		n := w.poll()
		w.clockAt(w.now())
		w.handlePolled()
		if sinceCheck += n; n == 0 || sinceCheck >= eventsPerCheck {
			sinceCheck = 0
		}
		if w.fate.fatal == nil && w.commitDue(nextCommit, n) {
			w.tick()
			nextCommit = w.now().Add(w.cfg.CommitInterval)
		}
		if w.fate.fatal != nil {
			w.mu.Lock()
			w.err = w.fate.fatal
			w.mu.Unlock()
			// Unready (and unhealthy) from here on, while the clients close.
			w.publishStatus()
			w.log.Error("worker stopping on a fatal error", zap.Error(w.fate.fatal))
			return
		}
	}
}

// commitDue reports whether the pump commits now, the last poll having
// handed it polled events: once the commit interval is up (next), unless
// that poll filled the pump's batch and the commit is less than a tenth of
// the interval overdue. A full batch says the consumer has more records
// ready, already fetched; handling them first puts them in the
// transaction about to close, where committing in the middle of them
// would leave them to wait a whole interval for the next. Past the tenth,
// the commit goes ahead however much is ready, so that a backlog delays
// no commit by more than that.
func (w *StreamThread) commitDue(next time.Time, polled int) bool {
	over := w.pump.time.Sub(next)
	if over < 0 {
		return false
	}
	return polled < w.pump.batch || over >= w.cfg.CommitInterval/10
}

func (w *StreamThread) tick() {
	now := w.now()
	for _, rt := range w.tasks.Tasks() {
		if rt.State() == StateRunning {
			if err := rt.Task().Punctuate(now); err != nil {
				w.failTask(rt, err)
			}
		}
	}
	w.restartFailed(now)
	w.advanceIdle()
	w.refreshPositions(now)
	w.tendStandbys(now)
	if err := w.commit(); err != nil {
		w.onCommitError(err)
	} else {
		w.answerQueries()
	}
	w.backpressure()
	w.publishStatus()
}

func (w *StreamThread) shutdown() {
	defer w.refuseQueries(ErrStopped)
	w.cancelRestores()
	w.closeCopies()
	if w.fate.abort {
		w.abort()
	} else if err := w.commit(); err != nil {
		w.log.Warn("last commit before shutdown failed; its work will be redone by the next owner", zap.Error(err))
		w.abort()
	}
	w.savePositions(w.tasks.Tasks())
	w.closeTasks(w.tasks.Tasks())
	w.publishStatus()
	w.log.Info("worker stopped")
}

// advertise sets the HTTP address this worker tells the others, unless
// the configuration names one.
func (w *StreamThread) advertise(addr string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.advertised = addr
	if w.cfg.AdvertisedHTTPAddr != "" {
		w.advertised = w.cfg.AdvertisedHTTPAddr
	}
}

func (w *StreamThread) served() servedParts {
	w.mu.Lock()
	defer w.mu.Unlock()
	return servedParts{topo: w.topo, adminToken: w.cfg.AdminToken, metrics: w.metrics, instanceID: w.instanceID}
}

// storePartitions is the partition count of a store's task, or 0 while
// it is not known.
func (w *StreamThread) storePartitions(store string) int32 {
	pi, _, ok := w.storeOwner(store)
	w.mu.Lock()
	defer w.mu.Unlock()
	if !ok || w.upstream == nil {
		return 0
	}
	return w.upstream.Partitions(pi.Inputs[0])
}

// owner returns the HTTP address of the worker that says it runs task.
func (w *StreamThread) owner(task string) (string, bool) {
	w.mu.Lock()
	m := w.members
	w.mu.Unlock()
	return m.owner(task)
}

// globalBatches is where the global reader hands over what it read; nil
// (never ready) without global tables.
func (w *StreamThread) globalBatches() <-chan []transport.FollowedRecord {
	if w.globalReader == nil {
		return nil
	}
	return w.globalReader.batches
}

// closeClientsWithin closes the clients and stores, then closes done; a
// close that takes longer than bound (librdkafka's consumer can wait
// forever for a group it was fenced from) is left behind, logged, so that
// the worker's Done and the process's exit are not held up by it.
func (w *StreamThread) closeClientsWithin(bound time.Duration) {
	defer close(w.done)
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		w.closeClients()
	}()
	t := time.NewTimer(bound)
	defer t.Stop()
	select {
	case <-closed:
	case <-t.C:
		w.log.Error("the Kafka clients did not close in time; leaving them to the process's exit", zap.Duration("waited", bound))
	}
}

func (w *StreamThread) closeClients() {
	w.mu.Lock()
	m := w.members
	w.members = nil
	w.mu.Unlock()
	if m != nil {
		m.stop()
	}
	if w.globalReader != nil {
		w.globalReader.stop()
		w.globalReader = nil
	}
	w.refresh.wg.Wait() // its queries use the consumer
	w.cancelRestores()  // after a fatal error, one may still run
	w.closeCopies()
	if w.tasks != nil {
		// After a fatal error the tasks are still open: close them, and
		// their stores on disk, before the clients go.
		w.closeTasks(w.tasks.Tasks())
	}
	if w.blockCache != nil {
		w.blockCache.Unref()
		w.blockCache = nil
	}
	if w.consumer != nil {
		if err := w.consumer.Close(); err != nil {
			w.log.Warn("close consumer", zap.Error(err))
		}
	}
	if w.admin != nil {
		w.admin.Close()
	}
	if w.producer != nil {
		if err := w.producer.Close(); err != nil {
			w.log.Warn("close producer", zap.Error(err))
		}
	}
	if w.broker != nil {
		w.broker.Close()
	}
	w.releaseStateDir()
}

// releaseStateDir gives up the state dir's lock, once nothing in it is
// open any more.
func (w *StreamThread) releaseStateDir() {
	if err := w.stateLock.Release(); err != nil {
		w.log.Warn("release the state dir's lock", zap.Error(err))
	}
	w.stateLock = nil
}

// clockAt sets the pump's time and the tasks' clock to now, read where the
// pump polls: the tasks' clock trails the wall clock by at most the
// handling of one poll batch.
func (w *StreamThread) clockAt(now time.Time) {
	w.pump.tick(now)
	if w.tasks != nil {
		w.tasks.SetNow(now)
	}
}

// setThread names the stream thread this worker is in its metrics' thread
// label (NewStreamThread: 0).
func (w *StreamThread) setThread(i int) {
	w.failedGauge = w.metrics.FailedCommits.WithLabelValues(strconv.Itoa(i))
}

// identify gives the stream thread its instance id and the bootstrap
// servers it connects to, which its Instance learns once the process
// starts (the embedded broker's address among them).
func (w *StreamThread) identify(instanceID, process, bootstrap string) {
	w.cfg.InstanceID = instanceID
	w.cfg.BootstrapServers = bootstrap
	w.process = process
}
