package restore

import (
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/task"
	"github.com/causeway-stream/causeway/framework/taskmgr"
	"github.com/causeway-stream/causeway/runtime/internal/transport"
)

// checkpointTail is how many offsets from the end of a checkpoint partition
// a restore reads first: each committed transaction of the task holds one
// checkpoint and a marker, so the last committed checkpoint is among them
// unless a long run of aborted transactions came last.
const checkpointTail = 64

// restoreBatch is how many changes of one store a restore applies at once.
const restoreBatch = 4096

// Restorer brings tasks back to their committed state: each store from its
// own changelog partition, from the position its local copy reflects (or
// from the start, for a store in memory or a local copy that cannot be
// trusted), and the task's last committed checkpoint from the tail of its
// checkpoint partition.
type Restorer struct {
	App      string
	Topology *framework.Topology
	Source   transport.ChangelogSource
	Log      *zap.Logger
	// Records counts the changelog records applied, and Ratio is how far
	// a task's restore has come (0 to 1); both by task id.
	Records *prometheus.CounterVec
	Ratio   *prometheus.GaugeVec
	Now     func() time.Time
	// OnDisk reports whether a store is kept on disk, with a position.
	OnDisk func(framework.StoreSpec) bool
	// DiskOnly leaves the stores kept in memory out: a standby's copy,
	// brought up to date round after round, keeps only those on disk.
	DiskOnly bool
	// Wipe throws a task's local stores away and opens them empty.
	Wipe func(t *taskmgr.Task, why error) error
	// Report hears how far a task's restore has come, and when it is
	// over.
	Report func(id string, p Progress, done bool)
}

// Result is what the restore of some tasks came to: their last
// checkpoints and where their stores on disk stand, by task id, or why it
// failed. The last result of a restore is final.
type Result struct {
	Tasks     []*taskmgr.Task
	Restored  map[string]*taskmgr.Restored
	Positions map[string]Positions
	// Behind is how many changelog records each task's stores lacked
	// when the restore began: what it read of their changelogs.
	Behind map[string]int64
	Err    error
	Final  bool
}

// Restore fills the stores of the given tasks (open, empty or holding an
// older committed state), which it owns until it hands them back, and
// hands each task to emit, with its last checkpoint and positions, as soon
// as its own changelogs are read to their ends: a task with little to
// read runs while the others still restore. It returns the tasks not
// handed back, and why. It stops early (ErrStopped) once stop is closed;
// what it applied until then stays, as the positions the stores keep lag
// behind it.
func (r *Restorer) Restore(stop <-chan struct{}, ts []*taskmgr.Task, emit func(Result)) ([]*taskmgr.Task, error) {
	run, err := r.newRestoreRun(ts, emit)
	if err != nil {
		return ts, err
	}
	for _, s := range run.targets {
		s.start()
	}
	defer func() {
		for _, s := range run.targets {
			_ = s.finish() // the restore stopped early: stop the appliers
		}
	}()
	for _, t := range ts {
		if len(run.left[t]) == 0 {
			if err := run.taskDone(t); err != nil {
				return rest(ts, run.left), err
			}
		}
	}
	if err := r.Source.Read(stop, run.from, run.apply, run.channelDone); err != nil {
		return rest(ts, run.left), err
	}
	if len(run.again) > 0 {
		if err := r.Source.Read(stop, run.again, run.apply, run.channelDone); err != nil {
			return rest(ts, run.left), err
		}
	}
	if len(run.left) > 0 {
		return rest(ts, run.left), fmt.Errorf("changelog read ended with %d tasks not read to the end", len(run.left))
	}
	if run.read > 0 {
		r.Log.Info("restored", zap.Int("tasks", len(ts)), zap.Int64("records", run.read), zap.Duration("took", r.Now().Sub(run.started)))
	}
	return nil, nil
}

// restoreRun is one restore of a set of tasks: what is read from where,
// what is left, and what was found.
//
//causeway:owned
type restoreRun struct {
	r    *Restorer
	ts   []*taskmgr.Task
	emit func(Result)
	// from is where each changelog and checkpoint partition is read from;
	// targets are the stores changelog partitions are applied to, and
	// checkpoints the task each checkpoint partition is read for.
	from        map[causal.Channel]int64
	targets     map[causal.Channel]*storeTarget
	checkpoints map[causal.Channel]*taskmgr.Task
	totals      map[string]int64 // records to read, by task
	total       int64
	// left is what is left to read of each task not handed back yet, and
	// owner the task each partition is read for.
	left  map[*taskmgr.Task]map[causal.Channel]bool
	owner map[causal.Channel]*taskmgr.Task
	// ends is where each partition was read to the end.
	ends map[causal.Channel]int64
	// out is the checkpoint found for each task.
	out map[string]*taskmgr.Restored
	// again holds the checkpoint partitions whose tail held no committed
	// checkpoint: it came before a run of aborted transactions, so the
	// whole partition is read.
	again map[causal.Channel]int64
	// read counts the records applied; started and lastLog time the
	// progress reports.
	read             int64
	started, lastLog time.Time
	pending          []string // the ids of the tasks left, in ts's order
	// lastCh and last are the channel of the last record, and its target.
	lastCh causal.Channel
	last   *storeTarget
}

// newRestoreRun plans the restore of ts: where each of their stores'
// changelogs and checkpoints is read from.
func (r *Restorer) newRestoreRun(ts []*taskmgr.Task, emit func(Result)) (*restoreRun, error) {
	run := &restoreRun{r: r, ts: ts, emit: emit, out: map[string]*taskmgr.Restored{}, from: map[causal.Channel]int64{},
		targets: map[causal.Channel]*storeTarget{}, checkpoints: map[causal.Channel]*taskmgr.Task{}, totals: map[string]int64{},
		left: map[*taskmgr.Task]map[causal.Channel]bool{}, owner: map[causal.Channel]*taskmgr.Task{},
		ends: map[causal.Channel]int64{}, again: map[causal.Channel]int64{}}
	for _, t := range ts {
		if err := r.plan(t, run.from, run.targets, run.checkpoints, run.totals); err != nil {
			return nil, err
		}
	}
	for _, t := range ts {
		run.left[t] = map[causal.Channel]bool{}
	}
	for ch, s := range run.targets {
		run.left[s.t][ch], run.owner[ch] = true, s.t
	}
	for ch, t := range run.checkpoints {
		run.left[t][ch], run.owner[ch] = true, t
	}
	for _, n := range run.totals {
		run.total += n
	}
	run.started = r.Now()
	run.lastLog = run.started
	return run, nil
}

// taskDone hands t back: its stores hold what their changelogs do.
func (run *restoreRun) taskDone(t *taskmgr.Task) error {
	r := run.r
	delete(run.left, t)
	var errs []error
	for ch, s := range run.targets {
		if s.t == t {
			errs = append(errs, s.finish())
			delete(run.targets, ch)
			run.lastCh, run.last = causal.Channel{}, nil
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	pos := r.positions(t, func(ch causal.Channel) int64 {
		if end, ok := run.ends[ch]; ok {
			return end
		}
		return run.from[ch]
	})
	if err := t.Stores().Commit(pos.Encode()); err != nil {
		return fmt.Errorf("record the restored positions of %s: %w", t.ID(), err)
	}
	r.Ratio.WithLabelValues(t.ID()).Set(1)
	r.Report(t.ID(), Progress{}, true)
	run.emit(Result{Tasks: []*taskmgr.Task{t}, Restored: map[string]*taskmgr.Restored{t.ID(): run.out[t.ID()]},
		Positions: map[string]Positions{t.ID(): pos}, Behind: map[string]int64{t.ID(): run.totals[t.ID()]}})
	return nil
}

// channelDone notes that ch was read to end; a task whose partitions are
// all read is handed back, unless its checkpoint partition must be read
// again from its start.
func (run *restoreRun) channelDone(ch causal.Channel, end int64) error {
	t := run.owner[ch]
	if t == nil || run.left[t] == nil {
		return nil
	}
	run.ends[ch] = end
	delete(run.left[t], ch)
	if len(run.left[t]) > 0 {
		return nil
	}
	cp := causal.Channel{Topic: CheckpointTopic(run.r.App, t.Processor()), Partition: t.Partition()}
	if run.checkpoints[cp] == t && run.out[t.ID()] == nil {
		if low, _, err := run.r.Source.Bounds(cp); err == nil && low < run.from[cp] {
			if _, twice := run.again[cp]; !twice {
				run.again[cp] = low
				run.left[t][cp] = true
				return nil
			}
		}
	}
	return run.taskDone(t)
}

// apply takes one record read: a store change for its target, or a
// task's checkpoint.
func (run *restoreRun) apply(ch causal.Channel, key, value []byte) error {
	if run.read++; run.read%restoreBatch == 0 {
		run.reportProgress()
	}
	// Records come in runs of one channel: look its target up once a run.
	if ch != run.lastCh {
		run.lastCh, run.last = ch, run.targets[ch]
	}
	s := run.last
	if s == nil {
		if t, ok := run.checkpoints[ch]; ok {
			cp, err := task.DecodeCheckpoint(value)
			if err != nil {
				return fmt.Errorf("checkpoint of %s at %s: %w: %w", t.ID(), ch, ErrBadChangelog, err)
			}
			run.out[t.ID()] = &taskmgr.Restored{Checkpoint: &cp}
		}
		return nil
	}
	s.add(key, value)
	return nil
}

// reportProgress tells the status of the tasks still restoring, and logs
// the whole restore's progress every two seconds.
func (run *restoreRun) reportProgress() {
	r := run.r
	run.pending = run.pending[:0]
	for _, t := range run.ts {
		if run.left[t] != nil {
			run.pending = append(run.pending, t.ID())
		}
	}
	r.report(run.pending, run.targets, run.totals, run.started)
	if now := r.Now(); now.Sub(run.lastLog) > 2*time.Second {
		run.lastLog = now
		rate := float64(run.read) / now.Sub(run.started).Seconds()
		r.Log.Info("restoring", zap.Int64("records", run.read), zap.Int64("of", run.total), zap.Duration("elapsed", now.Sub(run.started)),
			zap.Float64("records_per_second", rate), zap.Duration("remaining", remaining(run.total-run.read, rate)))
	}
}

// rest is the tasks of ts not handed back yet, in ts's order.
func rest(ts []*taskmgr.Task, left map[*taskmgr.Task]map[causal.Channel]bool) []*taskmgr.Task {
	var out []*taskmgr.Task
	for _, t := range ts {
		if left[t] != nil {
			out = append(out, t)
		}
	}
	return out
}

// plan adds what restoring t reads to from: the tail of its checkpoint
// partition, and each store's changelog partition from where its local
// copy stands. A local copy whose position is not in its partition (the
// topic was recreated, or records it lacks were deleted) is wiped first.
func (r *Restorer) plan(t *taskmgr.Task, from map[causal.Channel]int64, targets map[causal.Channel]*storeTarget,
	checkpoints map[causal.Channel]*taskmgr.Task, totals map[string]int64) error {
	cp := causal.Channel{Topic: CheckpointTopic(r.App, t.Processor()), Partition: t.Partition()}
	low, high, err := r.Source.Bounds(cp)
	if err != nil {
		return fmt.Errorf("bounds of %s: %w", cp, err)
	}
	if high > low {
		from[cp] = max(low, high-checkpointTail)
		checkpoints[cp] = t
	}
	info, _ := r.Topology.Processor(t.Processor())
	for attempt := 0; ; attempt++ {
		pos, err := r.localPositions(t)
		if err == nil {
			err = r.planStores(t, info, pos, from, targets, totals)
		}
		if err == nil {
			return nil
		}
		if attempt > 0 || !errors.Is(err, errUntrusted) {
			return err
		}
		r.Log.Warn("local state cannot be trusted: wiping it and restoring from the changelog", zap.String("task", t.ID()), zap.Error(err))
		if err := r.Wipe(t, err); err != nil {
			return err
		}
	}
}

// errUntrusted marks local state that a restore throws away.
var errUntrusted = errors.New("local state cannot be trusted")

func (r *Restorer) planStores(t *taskmgr.Task, info framework.ProcessorInfo, pos Positions, from map[causal.Channel]int64,
	targets map[causal.Channel]*storeTarget, totals map[string]int64) error {
	plan := map[causal.Channel]int64{}
	totals[t.ID()] = 0
	for _, spec := range info.Stores {
		if r.DiskOnly && !r.OnDisk(spec) {
			continue
		}
		ch := causal.Channel{Topic: StoreChangelogTopic(r.App, spec.Name), Partition: t.Partition()}
		low, high, err := r.Source.Bounds(ch)
		if err != nil {
			return fmt.Errorf("bounds of %s: %w", ch, err)
		}
		start, disk := low, r.OnDisk(spec)
		if p, ok := pos[spec.Name]; ok && disk {
			if p < low || p > high {
				return fmt.Errorf("%w: store %q holds %s up to offset %d, but the partition spans [%d, %d]", errUntrusted, spec.Name, ch, p, low, high)
			}
			start = p
		}
		kv, err := t.Stores().Store(spec.Name)
		if err != nil {
			return fmt.Errorf("%w: %w", errUntrusted, err)
		}
		targets[ch] = &storeTarget{t: t, id: t.ID(), name: spec.Name, kv: kv, applied: r.Records.WithLabelValues(t.ID())}
		plan[ch] = start
		totals[t.ID()] += high - start
	}
	for ch, start := range plan {
		from[ch] = start
	}
	return nil
}

const positionsVersion = 1

// Merge is the tasks a and b brought back, together.
func (a Result) Merge(b Result) Result {
	a.Tasks = append(a.Tasks, b.Tasks...)
	if a.Restored == nil {
		a.Restored = map[string]*taskmgr.Restored{}
	}
	if a.Positions == nil {
		a.Positions = map[string]Positions{}
	}
	if a.Behind == nil {
		a.Behind = map[string]int64{}
	}
	maps.Copy(a.Restored, b.Restored)
	maps.Copy(a.Positions, b.Positions)
	maps.Copy(a.Behind, b.Behind)
	return a
}
