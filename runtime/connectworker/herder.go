package connectworker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/runtime/internal/restarts"
	"github.com/causeway-stream/causeway/runtime/sinkworker"
)

// herder runs the tasks that fall to its worker: it deals each
// connector's tasks over the live workers, starts and stops this worker's
// runners to match, and writes their statuses to the state topic.
//
//causeway:owned
type herder struct {
	w *Worker
	// wake makes the herder look again at once (a write of the REST API).
	wake chan struct{}

	mu sync.Mutex
	// runners are this worker's tasks, by connector.
	runners map[string]*runner
	// seen are the restart and skip requests already acted on, by key.
	seen map[string]int64
	// written are the statuses last written, by connector.
	written map[string]taskStatus
	// beat is when the last heartbeat was written, beatErr why the one
	// after it failed (nil when none did).
	beat    time.Time
	beatErr error
	// restarts follows the failed tasks under the restart policy, and
	// restarted counts the restarts it made, by connector/task.
	restarts  *restarts.Tracker
	restarted map[string]int
}

// runner is one task of a connector running on this worker.
type runner struct {
	task   int
	config string // the configuration it runs, as JSON: a change restarts it
	// paused is set for a task kept without running (paused or stopped).
	paused string
	cancel context.CancelFunc
	done   chan struct{}
	// err is why the task stopped, read once done is closed.
	err error
	// http is the HTTP source's task, when it is one.
	http *httpSource
	// skip is what the task skips (see sinkworker.Config.Skip).
	skip map[causal.Channel]int64
	// kind is the connector's kind, and counters what its task did.
	kind     pluginKind
	counters taskCounters
	// facts are what the task last said of itself (refreshFacts).
	facts map[string]string
}

func newHerder(w *Worker) *herder {
	h := &herder{w: w, wake: make(chan struct{}, 1), runners: map[string]*runner{}, seen: map[string]int64{}, written: map[string]taskStatus{},
		restarts: restarts.New(w.cfg.Restarts), restarted: map[string]int{}}
	w.store.view(func(st *clusterState) {
		// Requests made before this worker came are done.
		for k, r := range st.restarts {
			h.seen[k] = r.Count
		}
		for k, r := range st.skips {
			h.seen["skip/"+k] = r.Count
		}
	})
	return h
}

// poke makes the herder look again soon.
func (h *herder) poke() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// run beats and deals until ctx is done, then stops every runner and
// says the worker leaves.
func (h *herder) run(ctx context.Context) error {
	beat := time.NewTicker(h.w.cfg.Heartbeat)
	defer beat.Stop()
	look := time.NewTicker(250 * time.Millisecond)
	defer look.Stop()
	if err := h.heartbeat(ctx); err != nil {
		return err
	}
	for {
		h.deal(ctx)
		select {
		case <-ctx.Done():
			return h.leave(context.WithoutCancel(ctx))
		case <-beat.C:
			h.refreshFacts()
			if err := h.heartbeat(ctx); err != nil && ctx.Err() == nil {
				h.w.log.Warn("heartbeat", zap.Error(err))
			}
		case <-look.C:
		case <-h.wake:
		}
	}
}

func (h *herder) heartbeat(ctx context.Context) error {
	b, err := json.Marshal(workerRecord{URL: "http://" + h.w.Addr()})
	if err != nil {
		return err
	}
	err = h.w.store.write(ctx, "worker/"+h.w.cfg.WorkerID, b)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.beatErr = err; err == nil {
		h.beat = time.Now()
	}
	return err
}

// health says why the worker is not alive: its heartbeats have failed
// for longer than the other workers wait before they take its tasks
// (three heartbeat intervals). Nil while it is.
func (h *herder) health(now time.Time) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.beatErr != nil && now.Sub(h.beat) > 3*h.w.cfg.Heartbeat {
		return fmt.Errorf("no heartbeat written for %s: %w", now.Sub(h.beat).Round(time.Second), h.beatErr)
	}
	return nil
}

// failedTasks names this worker's tasks that are FAILED.
func (h *herder) failedTasks() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for name, r := range h.runners {
		if r.failed() {
			out = append(out, fmt.Sprintf("%s/%d", name, r.task))
		}
	}
	slices.Sort(out)
	return out
}

// desired is what this worker should do for one connector.
type desired struct {
	task   int // -1: no task here
	target string
	config map[string]string
	raw    string
}

// plan reads the state: what this worker should run.
func (h *herder) plan() (map[string]desired, map[string]restartRequest, map[string]skipRequest) {
	out := map[string]desired{}
	restarts := map[string]restartRequest{}
	skips := map[string]skipRequest{}
	h.w.store.view(func(st *clusterState) {
		live := st.live(time.Now(), 3*h.w.cfg.Heartbeat)
		if !slices.Contains(live, h.w.cfg.WorkerID) {
			live = append(live, h.w.cfg.WorkerID) // its beat may be late to come back
			slices.Sort(live)
		}
		for name, cfg := range st.configs {
			d := desired{task: -1, target: st.target(name), config: cfg}
			raw, _ := json.Marshal(cfg)
			d.raw = string(raw)
			d.task = slices.Index(tasksOf(name, tasksMax(cfg), live), h.w.cfg.WorkerID)
			out[name] = d
		}
		maps.Copy(restarts, st.restarts)
		maps.Copy(skips, st.skips)
	})
	return out, restarts, skips
}

// deal starts and stops runners to match the state, and writes the
// statuses that changed.
func (h *herder) deal(ctx context.Context) {
	plan, restarts, skips := h.plan()
	h.mu.Lock()
	defer h.mu.Unlock()
	carried := map[string]map[causal.Channel]int64{}
	for name, r := range h.runners {
		d, ok := plan[name]
		restart := false
		taskKey := fmt.Sprintf("%s/%d", name, r.task)
		if req, ok := skips[taskKey]; ok && req.Count > h.seen["skip/"+taskKey] {
			h.seen["skip/"+taskKey] = req.Count
			// A new map: the task running holds the one before.
			next := maps.Clone(r.skip)
			if next == nil {
				next = map[causal.Channel]int64{}
			}
			next[causal.Channel{Topic: req.Topic, Partition: req.Partition}] = req.Offset
			r.skip = next
			restart = true
		}
		if req, ok := restarts[name]; ok && req.Count > h.seen[name] {
			h.seen[name] = req.Count
			restart = restart || !req.OnlyFailed || r.failed()
		}
		if req, ok := restarts[taskKey]; ok && req.Count > h.seen[taskKey] {
			h.seen[taskKey] = req.Count
			restart = true
		}
		restart = h.policyRestart(taskKey, r, restart)
		if !ok || d.task != r.task || d.raw != r.config || d.target != r.target() || restart {
			h.stop(name, r)
			if ok && d.task == r.task && d.raw == r.config {
				carried[name] = r.skip // what it skipped stays skipped
			}
		}
	}
	for name, d := range plan {
		if _, running := h.runners[name]; running || d.task < 0 {
			continue
		}
		h.runners[name] = h.start(ctx, name, d, carried[name])
	}
	h.report(ctx, plan)
}

// target is the target state a runner was started for.
func (r *runner) target() string {
	if r.paused != "" {
		return r.paused
	}
	return StateRunning
}

// failed reports whether the runner's task stopped on an error.
func (r *runner) failed() bool {
	if r.done == nil {
		return false
	}
	select {
	case <-r.done:
		return r.err != nil
	default:
		return false
	}
}

// status is the runner's task status.
func (r *runner) status() taskStatus {
	switch {
	case r.paused != "":
		return taskStatus{State: r.paused, Task: r.task}
	case r.failed():
		st := taskStatus{State: StateFailed, Task: r.task, Trace: r.err.Error()}
		var refused *sinkworker.RefusedError
		if errors.As(r.err, &refused) {
			st.FailedAt = recordRef{Topic: refused.Record.Topic, Partition: refused.Record.Partition, Offset: refused.Record.Offset}
		}
		return st
	default:
		return taskStatus{State: StateRunning, Task: r.task, Facts: r.facts}
	}
}

// stop stops a runner and forgets it; its status goes with the next
// report.
func (h *herder) stop(name string, r *runner) {
	if r.cancel != nil {
		r.cancel()
		<-r.done
	}
	delete(h.runners, name)
	h.w.log.Info("task stopped", zap.String("connector", name), zap.Int("task", r.task))
}

// start starts the task d gives this worker, or keeps its place when the
// connector is paused or stopped.
func (h *herder) start(ctx context.Context, name string, d desired, skip map[causal.Channel]int64) *runner {
	r := &runner{task: d.task, config: d.raw, skip: skip}
	if d.target != StateRunning {
		r.paused = d.target
		return r
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r.cancel, r.done = cancel, make(chan struct{})
	run, err := h.w.runnerFor(name, d.task, d.config, r)
	if err != nil {
		r.err = err
		close(r.done)
		h.w.log.Error("task failed to start", zap.String("connector", name), zap.Int("task", d.task), zap.Error(err))
		return r
	}
	go func() {
		defer close(r.done)
		r.err = run(runCtx)
		if r.err != nil && runCtx.Err() != nil && errors.Is(r.err, context.Canceled) {
			r.err = nil
		}
		if r.err != nil {
			h.w.log.Error("task failed", zap.String("connector", name), zap.Int("task", d.task), zap.Error(r.err))
		}
		h.poke()
	}()
	h.w.log.Info("task started", zap.String("connector", name), zap.Int("task", d.task))
	return r
}

// report writes the status of every connector whose status on this
// worker changed: a task's, or a tombstone once it has none here.
func (h *herder) report(ctx context.Context, plan map[string]desired) {
	for name, r := range h.runners {
		st := h.withRestarts(fmt.Sprintf("%s/%d", name, r.task), r.status())
		if sameStatus(h.written[name], st) {
			continue
		}
		b, err := json.Marshal(st)
		if err == nil {
			err = h.w.store.send("status/"+name+"/"+h.w.cfg.WorkerID, b)
		}
		if err != nil {
			h.w.log.Warn("write a task status", zap.String("connector", name), zap.Error(err))
			continue
		}
		h.written[name] = st
	}
	for name := range h.written {
		if _, ok := h.runners[name]; ok {
			continue
		}
		if err := h.w.store.send("status/"+name+"/"+h.w.cfg.WorkerID, nil); err != nil {
			h.w.log.Warn("write a task status", zap.String("connector", name), zap.Error(err))
			continue
		}
		delete(h.written, name)
	}
}

// leave stops every runner, takes back their statuses and says the
// worker is gone, so that others deal its tasks at once.
func (h *herder) leave(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	var errs []error
	for name, r := range h.runners {
		h.stop(name, r)
	}
	for name := range h.written {
		errs = append(errs, h.w.store.send("status/"+name+"/"+h.w.cfg.WorkerID, nil))
	}
	errs = append(errs, h.w.store.send("worker/"+h.w.cfg.WorkerID, nil))
	return errors.Join(errs...)
}

// httpTask returns this worker's HTTP source task of a connector, if it
// runs one.
func (h *herder) httpTask(name string) *httpSource {
	h.mu.Lock()
	defer h.mu.Unlock()
	if r, ok := h.runners[name]; ok && !r.failed() {
		return r.http
	}
	return nil
}

// policyRestart applies the restart policy to the runner r of task key,
// which restarts already when an operator asked: a failed task whose next
// attempt is due restarts; one that runs counts toward starting over.
func (h *herder) policyRestart(key string, r *runner, restart bool) bool {
	now := time.Now()
	switch {
	case !r.failed():
		h.restarts.Running(key, now)
	case restart:
		h.restarts.Forget(key) // an operator's restart: the count starts over
	case h.restarts.Due(key, now):
		h.restarts.Restarted(key, now)
		h.restarted[key]++
		st, _ := h.restarts.Status(key)
		h.w.log.Warn("restarting a failed task (restart policy)", zap.String("task", key), zap.Int("attempt", st.Attempts), zap.Error(r.err))
		return true
	}
	return restart
}
