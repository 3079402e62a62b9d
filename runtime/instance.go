package runtime

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"go.uber.org/zap"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/runtime/embedded"
	"github.com/causeway-stream/causeway/runtime/internal/served"
	"github.com/causeway-stream/causeway/runtime/internal/statedir"
)

// Instance is one worker process: Config.Threads stream threads, each a
// StreamThread with its own pump, consumer and transactional producer, sharing
// the process's HTTP server and status. The consumer group spreads the
// application's tasks over every thread of every process, as over so
// many workers, so exactly-once and causal delivery hold as they do
// between processes.
//
// Thread i is the worker "<instance id>-<i>" and keeps its state in
// "<state dir>/thread-<i>": a task that moves to another thread of the
// same process restores its stores there. With one thread (the default)
// the Instance is its one StreamThread, under the instance id and state dir as
// given.
//
//causeway:owned
type Instance struct {
	cfg     Config
	threads []*StreamThread
	log     *zap.Logger
	// base is the process's instance id, which the threads' derive from,
	// once started.
	base string
	// broker is the embedded broker the threads share, when no bootstrap
	// servers were given.
	broker *embedded.Broker
	// lock is held on the state dir, over the threads' own, while
	// several threads run.
	lock *statedir.Lock
	// done is closed when the first thread stops; watchers wait for the
	// threads' Done, or for quit, which Stop closes.
	done     chan struct{}
	doneOnce sync.Once
	quit     chan struct{}
	quitOnce sync.Once
	watchers sync.WaitGroup
}

// NewInstance checks the configuration and returns an instance whose
// threads have not started.
func NewInstance(cfg Config, topo *framework.Topology, log *zap.Logger, metrics *Metrics) (*Instance, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = zap.NewNop()
	}
	if metrics == nil {
		metrics = NewMetrics()
	}
	in := &Instance{cfg: cfg, log: log, done: make(chan struct{}), quit: make(chan struct{})}
	for i := range cfg.Threads {
		tc := cfg
		if cfg.Threads > 1 {
			tc.StateDir = filepath.Join(cfg.StateDir, fmt.Sprint("thread-", i))
		}
		w, err := newStreamThread(tc, topo, log.With(zap.Int("thread", i)), metrics, i)
		if err != nil {
			return nil, err
		}
		in.threads = append(in.threads, w)
	}
	return in, nil
}

// Threads returns the instance's stream threads.
func (in *Instance) Threads() []*StreamThread { return slices.Clone(in.threads) }

// Start starts every thread (and the embedded broker they share when no
// bootstrap servers were given). If one fails to start, those started are
// stopped again.
func (in *Instance) Start(ctx context.Context) error {
	if len(in.threads) > 1 {
		if err := in.prepareThreads(); err != nil {
			return err
		}
	}
	for i, w := range in.threads {
		if err := w.Start(ctx); err != nil {
			stopErr := in.stopThreads(ctx, in.threads[:i])
			in.closeBroker()
			in.releaseStateDir()
			return errors.Join(fmt.Errorf("thread %d: %w", i, err), stopErr)
		}
		in.watchers.Add(1)
		go func() {
			defer in.watchers.Done()
			select {
			case <-w.Done():
				in.doneOnce.Do(func() { close(in.done) })
			case <-in.quit:
			}
		}()
	}
	return nil
}

// prepareThreads gives each thread its instance id, derived from the
// process's, and the embedded broker when there is to be one.
func (in *Instance) prepareThreads() error {
	lock, err := statedir.Take(in.cfg.StateDir, "application "+in.cfg.ApplicationID)
	if err != nil {
		return err
	}
	in.lock = lock
	base, err := instanceIDOf(in.cfg)
	if err != nil {
		in.releaseStateDir()
		return err
	}
	bootstrap := in.cfg.BootstrapServers
	if bootstrap == "" {
		dir := filepath.Join(in.cfg.StateDir, "broker")
		b, err := embedded.Start(embedded.DataDir(dir))
		if err != nil {
			in.releaseStateDir()
			return err
		}
		in.broker, bootstrap = b, b.Addr()
		in.log.Info("no bootstrap servers given: started the embedded broker", zap.String("addr", bootstrap), zap.String("data_dir", dir))
	}
	in.base = base
	for i, w := range in.threads {
		w.identify(fmt.Sprintf("%s-%d", base, i), base, bootstrap)
	}
	return nil
}

// Stop stops every thread, each within twice Config.ShutdownTimeout (see
// StreamThread.Stop) and all at once, then the embedded broker if the instance started one.
func (in *Instance) Stop(ctx context.Context) error {
	err := in.stopThreads(ctx, in.threads)
	in.doneOnce.Do(func() { close(in.done) })
	in.quitOnce.Do(func() { close(in.quit) }) // a thread that did not stop in time is not waited for
	in.watchers.Wait()
	in.closeBroker()
	in.releaseStateDir()
	return err
}

// releaseStateDir gives up the lock on the process's state dir (each
// thread holds its own dir's).
func (in *Instance) releaseStateDir() {
	if err := in.lock.Release(); err != nil {
		in.log.Warn("release the state dir's lock", zap.Error(err))
	}
	in.lock = nil
}

func (in *Instance) stopThreads(ctx context.Context, ws []*StreamThread) error {
	errs := make([]error, len(ws))
	var wg sync.WaitGroup
	for i, w := range ws {
		wg.Go(func() {
			if err := w.Stop(ctx); err != nil {
				errs[i] = fmt.Errorf("thread %d: %w", i, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (in *Instance) closeBroker() {
	if in.broker != nil {
		in.broker.Close()
		in.broker = nil
	}
}

// Done is closed once a thread has stopped, by a fatal error, or the
// instance by Stop.
func (in *Instance) Done() <-chan struct{} { return in.done }

// Err returns the fatal errors that stopped threads, if any.
func (in *Instance) Err() error {
	var errs []error
	for i, w := range in.threads {
		if err := w.Err(); err != nil {
			errs = append(errs, in.threadErr(i, err))
		}
	}
	return errors.Join(errs...)
}

// threadErr names the thread an error came from, when there are several.
func (in *Instance) threadErr(i int, err error) error {
	if len(in.threads) == 1 {
		return err
	}
	return fmt.Errorf("thread %d: %w", i, err)
}

// Status is every thread's tasks, in task order, under the process's
// instance id. The process is ready when a thread is and no other is
// unready for a reason: a thread without tasks (more threads than the
// group has tasks for) is idle.
func (in *Instance) Status() Status {
	if len(in.threads) == 1 {
		return in.threads[0].Status()
	}
	st := Status{ApplicationID: in.cfg.ApplicationID, InstanceID: in.base, Tasks: []TaskStatus{}}
	var errs, reasons []string
	unready := false
	for i, w := range in.threads {
		ts := w.Status()
		// A thread the group gave no task (more threads than tasks) is
		// idle, not unready.
		st.Ready = st.Ready || ts.Ready
		unready = unready || (!ts.Ready && (len(ts.Tasks) > 0 || ts.Error != "" || ts.FailedCommits >= unreadyAfterFailedCommits))
		if ts.Error != "" {
			errs = append(errs, fmt.Sprintf("thread %d: %s", i, ts.Error))
		}
		st.Degraded = st.Degraded || ts.Degraded
		if ts.Starting != "" && st.Starting == "" {
			st.Starting = ts.Starting
		}
		if ts.Reason != "" && (len(ts.Tasks) > 0 || ts.Error != "" || ts.Starting != "") {
			reasons = append(reasons, fmt.Sprintf("thread %d: %s", i, ts.Reason))
		}
		if ts.FailedCommits > st.FailedCommits {
			st.FailedCommits, st.LastCommitError = ts.FailedCommits, ts.LastCommitError
		}
		for _, t := range ts.Tasks {
			t.Thread = i
			st.Tasks = append(st.Tasks, t)
		}
		for _, c := range ts.Standbys {
			c.Thread = i
			st.Standbys = append(st.Standbys, c)
		}
	}
	st.Ready = st.Ready && !unready
	st.Error = strings.Join(errs, "; ")
	st.Reason = strings.Join(reasons, "; ")
	if !st.Ready && st.Reason == "" {
		st.Reason = "no partitions assigned (yet)"
	}
	slices.SortFunc(st.Tasks, func(a, b TaskStatus) int { return strings.Compare(a.ID, b.ID) })
	slices.SortFunc(st.Standbys, func(a, b StandbyStatus) int { return strings.Compare(a.ID, b.ID) })
	return st
}

// Ready reports whether the process is ready; see Status.
func (in *Instance) Ready() bool { return in.Status().Ready }

// Query answers q from the thread holding its key; a range query reads
// every thread's partitions. See StreamThread.Query.
func (in *Instance) Query(ctx context.Context, q Query) (Answer, error) {
	if len(in.threads) == 1 {
		return in.threads[0].Query(ctx, q)
	}
	if q.Kind == QueryRange {
		return in.queryRange(ctx, q)
	}
	// The thread that runs the key's task, if one does; else each says
	// where it is not, and the last answer says where it is.
	if w := in.threadFor(q); w != nil {
		return w.Query(ctx, q)
	}
	var err error
	for _, w := range in.threads {
		var a Answer
		if a, err = w.Query(ctx, q); !errors.Is(err, ErrNotLocal) {
			return a, err
		}
	}
	return Answer{}, err
}

// threadFor is the thread that runs the task holding q's key, or nil. A
// query with a clock goes there first, so that its wait is not spent
// once per thread.
func (in *Instance) threadFor(q Query) *StreamThread {
	pi, _, ok := served.StoreOwner(in.threads[0].topo, q.Store)
	n := in.threads[0].desk.partitions(q.Store)
	if !ok || n <= 0 {
		return nil
	}
	id := fmt.Sprint(pi.Name, "/", framework.PartitionFor(q.Key, n))
	for _, w := range in.threads {
		for _, ts := range w.Status().Tasks {
			if ts.ID == id {
				return w
			}
		}
	}
	return nil
}

// queryRange merges what each thread's partitions hold.
func (in *Instance) queryRange(ctx context.Context, q Query) (Answer, error) {
	merged := Answer{Store: q.Store}
	for _, w := range in.threads {
		a, err := w.Query(ctx, q)
		if err != nil {
			return Answer{}, err
		}
		merged.Partitions = append(merged.Partitions, a.Partitions...)
		merged.Entries = append(merged.Entries, a.Entries...)
		merged.Truncated = merged.Truncated || a.Truncated
	}
	slices.Sort(merged.Partitions)
	merged.KeepFirst(q.MaxEntries())
	merged.Complete = int32(len(merged.Partitions)) == in.threads[0].desk.partitions(q.Store)
	return merged, nil
}

// RestartTask restarts a failed task on the thread that runs it; see
// StreamThread.RestartTask.
func (in *Instance) RestartTask(ctx context.Context, id string) error {
	var err error
	for _, w := range in.threads {
		if err = w.RestartTask(ctx, id); !errors.Is(err, ErrNoTask) {
			return err
		}
	}
	return err
}

// SkipRecord moves a failed task past its record on the thread that runs
// it; see StreamThread.SkipRecord.
func (in *Instance) SkipRecord(ctx context.Context, id string) (causal.Entry, error) {
	var err error
	for _, w := range in.threads {
		var e causal.Entry
		if e, err = w.SkipRecord(ctx, id); !errors.Is(err, ErrNoTask) {
			return e, err
		}
	}
	return causal.Entry{}, err
}

// DeadLetterTopic is where the threads write dead letters.
func (in *Instance) DeadLetterTopic() string { return in.threads[0].DeadLetterTopic() }

func (in *Instance) advertise(addr string) {
	for _, w := range in.threads {
		w.advertise(addr)
	}
}

// owner returns the HTTP address of the process running task: any
// thread's view of the members topic will do.
func (in *Instance) owner(task string) (string, bool) { return in.threads[0].owner(task) }

func (in *Instance) served() servedParts {
	p := in.threads[0].served()
	if len(in.threads) > 1 {
		p.instanceID = in.base
	}
	return p
}
