package runtime

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/causeway-stream/causeway/runtime/internal/restarts"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/taskmgr"
	"github.com/causeway-stream/causeway/runtime/embedded"
	"github.com/causeway-stream/causeway/runtime/internal/member"
	"github.com/causeway-stream/causeway/runtime/internal/statedir"
	"github.com/causeway-stream/causeway/runtime/internal/transport"
	"github.com/causeway-stream/causeway/runtime/internal/txn"
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
// StreamThread keeps only the orchestration: it wires its parts, runs the
// member loop (runtime/internal/member) on its goroutine, and carries out
// the rounds between polls and at each commit interval, the rebalances and
// the operators' requests. The parts own their state and their verbs:
//   - the pump (pump.go, liveness.go) is the loop's engine: it hands
//     records to the task manager's tasks, streams their outputs, seeks,
//     pauses and resumes;
//   - the committer (commit.go) closes transactions through the task
//     manager's one commit path, over the transactional producer
//     (runtime/internal/txn);
//   - the restores (restoring.go), the standbys (standby.go), the local
//     state (state.go) and the query desk (query.go);
//   - the board (board.go) is what other goroutines read: status, the
//     report to the group, the fatal error.
//
// They reach Kafka through the worker's transport
// (runtime/internal/transport): librdkafka or franz-go, as Config.Client
// says.
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
	// settings are what the transport makes the clients from, known once
	// the thread has its instance id and bootstrap servers (Start).
	settings  transport.Settings
	broker    *embedded.Broker
	transport transport.Supplier
	consumer  transport.Consumer
	admin     transport.Admin

	// Owned by the pump goroutine.
	producer *txn.Producer
	tasks    *taskmgr.Manager
	pump     pump
	// loop is the thread's member loop, which polls and hands the
	// records to the pump; fate is its Fate: what the pump must do beyond
	// its next step (stop for good, or abort the open transaction).
	loop *member.Loop
	fate *member.Fate
	// stateLock is held on the state dir from Start until the clients
	// and stores are closed.
	stateLock *statedir.Lock
	// commits closes the thread's transactions (commit.go).
	commits committer
	// failedGauge is this thread's series of the failed-in-a-row metric.
	failedGauge prometheus.Gauge
	// desk takes queries to the pump and answers them there (query.go).
	desk *queryDesk
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
	// local is the thread's state on this machine: its stores, and where
	// they stand in their changelogs (state.go).
	local *localState
	// restores is the restore under way off the pump (restoring.go).
	restores restores
	// standby is this thread's copies of other workers' tasks' state
	// (standby.go). Owned by the pump.
	standby standbys
	// groups are the co-partitioned groups of input topics (groups.go).
	groups topicGroups
	// process is the instance id of the process the thread belongs to,
	// which the group's balancer keeps standbys away from; empty for a
	// thread run on its own (its own instance id).
	process string

	requests chan taskRequest
	// restarts is the restart policy's view of the failed tasks.
	restarts restartPolicy
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once

	// board is what the thread shows the other goroutines: its status,
	// its report to the group, its fatal error (board.go).
	board board
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
	return newStreamThread(cfg, topo, log, metrics, 0)
}

// newStreamThread is NewStreamThread for the thread of index thread in its
// instance, which names it in the metrics' thread label.
func newStreamThread(cfg Config, topo *framework.Topology, log *zap.Logger, metrics *Metrics, thread int) (*StreamThread, error) {
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
		claims:   claimCheck{ends: map[causal.Channel]int64{}},
		local:    newLocalState(cfg, topo, log),
		restores: restores{start: func(f func()) { go f() }},
		requests: make(chan taskRequest),
		restarts: restartPolicy{tracker: restarts.New(restarts.Policy{Initial: cfg.TaskRestartBackoff, Max: cfg.TaskRestartBackoffMax}), metrics: metrics, log: log},
		board:    board{starting: "not started yet"},
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	w.desk = newQueryDesk(topo, w.done)
	w.groups = newTopicGroups(topo, w.local.onDisk)
	w.failedGauge = w.metrics.FailedCommits.WithLabelValues(strconv.Itoa(thread))
	if w.loop, err = w.newLoop(tr.PollBatch()); err != nil {
		return nil, err
	}
	w.fate = &w.loop.Fate
	return w, nil
}

// Bootstrap returns the brokers the worker uses (the embedded broker's
// address when it started one).
func (w *StreamThread) Bootstrap() string { return w.bootstrap }

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
func (w *StreamThread) Err() error { return w.board.fatal() }

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

// advertise sets the HTTP address this worker tells the others, unless
// the configuration names one.
func (w *StreamThread) advertise(addr string) { w.board.advertise(addr, w.cfg.AdvertisedHTTPAddr) }

func (w *StreamThread) served() servedParts {
	return servedParts{topo: w.topo, adminToken: w.cfg.AdminToken, metrics: w.metrics, instanceID: w.instanceID}
}

// owner returns the HTTP address of the worker that says it runs task.
func (w *StreamThread) owner(task string) (string, bool) {
	m, _ := w.board.peers()
	return m.owner(task)
}

// identify gives the stream thread its instance id and the bootstrap
// servers it connects to, which its Instance learns once the process
// starts (the embedded broker's address among them).
func (w *StreamThread) identify(instanceID, process, bootstrap string) {
	w.cfg.InstanceID = instanceID
	w.cfg.BootstrapServers = bootstrap
	w.process = process
}
