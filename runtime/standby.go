package runtime

import (
	"cmp"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework/store"
	"github.com/causeway-stream/causeway/framework/task"
	"github.com/causeway-stream/causeway/framework/taskmgr"
	"github.com/causeway-stream/causeway/runtime/internal/restore"
	"github.com/causeway-stream/causeway/runtime/internal/transport"
)

// Standby replicas and warm-ups. The group's assignment (the cooperative
// balancer on franz-go) may ask this thread to keep a copy of the state
// of tasks another worker runs: a standby, for a failover, or a warm-up,
// to take the task over once the copy has caught up. The thread keeps
// each copy in the task's directory of stores on disk, where the task
// keeps them when it runs here, and brings it up to the changelogs' ends
// in rounds, off the pump: each round is a restore from where the copy
// stands (its positions on disk), so it reads only what was written since
// the last. When the task comes to this thread, its restore starts from
// there too, and reads only what the copy lacked.

// standbyEvery is how soon after a round the next may begin.
const standbyEvery = 500 * time.Millisecond

// Roles of a copy, as /status shows them.
const (
	RoleStandby = "STANDBY"
	RoleWarmup  = "WARMING_UP"
)

// standbys is this thread's copies of other workers' tasks' state. Only
// the pump touches it; a round's goroutine touches only the tasks it was
// given, and hands its result back on results.
//
//causeway:owned
type standbys struct {
	// version is that of the assignment the copies follow; 0 makes the
	// next look follow it again.
	version uint64
	copies  map[string]*standbyCopy
	// results brings back the round under way, if one runs; closing
	// cancel ends it early. due is when the next round may start.
	results chan standbyRound
	cancel  chan struct{}
	wg      sync.WaitGroup
	due     time.Time
	// probeDue is when this thread next asks the group to look again at
	// its warm-ups; zero while it has none.
	probeDue time.Time
	// start runs a round; tests run it in place.
	start func(func())
	env   standbyEnv
}

// standbyCopy is one task whose state the thread keeps a copy of.
type standbyCopy struct {
	t      *taskmgr.Task
	warmup bool
	// behind is how many changelog records the copy lacked when the last
	// round began; -1 before the first round.
	behind int64
}

// standbyRound is what a round brought back: how far behind each copy
// was when it began, and why it stopped short.
type standbyRound struct {
	behind map[string]int64
	err    error
}

// refollow makes the next look follow the assignment again, though its
// version did not change: tasks came or went meanwhile.
func (s *standbys) refollow() { s.version = 0 }

// followed notes the version of the assignment the copies now follow.
func (s *standbys) followed(v uint64) { s.version = v }

// add keeps a copy of t; set marks it a warm-up or a standby.
func (s *standbys) add(t *taskmgr.Task, warmup bool) {
	if s.copies == nil {
		s.copies = map[string]*standbyCopy{}
	}
	s.copies[t.ID()] = &standbyCopy{t: t, warmup: warmup, behind: -1}
}

func (s *standbys) set(id string, warmup bool) { s.copies[id].warmup = warmup }

// forget drops the copy of task id.
func (s *standbys) forget(id string) { delete(s.copies, id) }

// took notes how far behind the copies were when the round began.
func (s *standbys) took(behind map[string]int64) {
	for id, n := range behind {
		if c, ok := s.copies[id]; ok {
			c.behind = n
		}
	}
}

// begin starts a round of ts on the round's goroutine.
func (s *standbys) begin(ts []*taskmgr.Task, round func(stop <-chan struct{}, ts []*taskmgr.Task) standbyRound) {
	results, cancel := make(chan standbyRound, 1), make(chan struct{})
	s.results, s.cancel = results, cancel
	s.wg.Add(1)
	run := s.start
	if run == nil {
		run = func(f func()) { go f() }
	}
	run(func() {
		defer s.wg.Done()
		results <- round(cancel, ts)
	})
}

// ready returns the round's result once it is back.
func (s *standbys) ready() (standbyRound, bool) {
	if s.results == nil {
		return standbyRound{}, false
	}
	select {
	case r := <-s.results:
		return r, true
	default:
		return standbyRound{}, false
	}
}

// ended forgets the round, whose result was taken, and makes the next due
// a while after now.
func (s *standbys) ended(now time.Time) { s.results, s.cancel, s.due = nil, nil, now.Add(standbyEvery) }

// stop ends the round under way, if any, and waits for it.
func (s *standbys) stop() {
	if s.results == nil {
		return
	}
	close(s.cancel)
	s.wg.Wait()
	s.results, s.cancel = nil, nil
}

// idle reports whether a round may start now.
func (s *standbys) idle(now time.Time) bool {
	return s.results == nil && len(s.copies) > 0 && !now.Before(s.due)
}

// probe reports whether to ask the group for a probing rebalance now, as
// every interval while some copy warms up.
func (s *standbys) probe(now time.Time, interval time.Duration) bool {
	warm := false
	for _, c := range s.copies {
		warm = warm || c.warmup
	}
	switch {
	case !warm || interval <= 0:
		s.probeDue = time.Time{}
	case s.probeDue.IsZero():
		s.probeDue = now.Add(interval)
	case !now.Before(s.probeDue):
		s.probeDue = now.Add(interval)
		return true
	}
	return false
}

// standbyEnv is what the copies use of their thread, given once it is
// connected (standbys.connect).
type standbyEnv struct {
	log     *zap.Logger
	metrics *Metrics
	// consumer says which copies the group's assignment asks for, and
	// asks the group to look again at the warm-ups.
	consumer transport.Consumer
	// tasks makes the copies' tasks, detached from the thread's, and
	// opens and drops their stores.
	tasks *taskmgr.Manager
	// restorer is the thread's; a round reads with a copy of it.
	restorer   *restore.Restorer
	openStores func(t *taskmgr.Task) (store.Set, error)
	// stateProcessors are the processors of a co-partitioned group, named
	// by its first topic, that keep stores on disk.
	stateProcessors func(lead string) []string
	// changed is told when the copies changed, for /status.
	changed    func()
	probeEvery time.Duration
}

// connect gives the copies what they use of their thread.
func (s *standbys) connect(env standbyEnv) { s.env = env }

// tend takes what the last round brought back, follows a new assignment
// of copies, starts the next round when due, and asks for a probing
// rebalance while warm-ups wait.
func (s *standbys) tend(now time.Time) {
	e := &s.env
	if r, ok := s.ready(); ok {
		s.ended(now)
		s.took(r.behind)
		for id, n := range r.behind {
			e.metrics.StandbyLag.WithLabelValues(id).Set(float64(n))
		}
		if r.err != nil && !errors.Is(r.err, ErrStopped) {
			e.log.Warn("standby round failed; the next one tries again", zap.Error(r.err))
		}
		e.changed()
	}
	if a := e.consumer.Standbys(); a.Version != s.version {
		s.follow(a)
	}
	if s.idle(now) {
		s.startRound()
	}
	if s.probe(now, e.probeEvery) {
		e.log.Info("warm-ups wait: asking the group to rebalance, to move the tasks whose copies caught up")
		e.consumer.Probe()
	}
}

// follow keeps copies of the tasks the assignment a names, as standbys or
// warm-ups, and drops the others.
func (s *standbys) follow(a transport.StandbyAssignment) {
	e := &s.env
	type wanted struct {
		processor string
		partition int32
		warmup    bool
	}
	want := map[string]wanted{} // by task id
	for i, chs := range [][]causal.Channel{a.Standby, a.Warmup} {
		for _, ch := range chs {
			for _, processor := range e.stateProcessors(ch.Topic) {
				want[task.ID(processor, ch.Partition)] = wanted{processor: processor, partition: ch.Partition, warmup: i == 1}
			}
		}
	}
	for id := range want {
		if _, runs := e.tasks.Find(id); runs {
			delete(want, id)
		}
	}
	var drop []string
	for id := range s.copies {
		if _, ok := want[id]; !ok {
			drop = append(drop, id)
		}
	}
	s.drop(drop)
	for id, wt := range want {
		if _, ok := s.copies[id]; ok {
			s.set(id, wt.warmup)
			continue
		}
		t := e.tasks.Detached(wt.processor, wt.partition)
		set, err := e.openStores(t)
		if err != nil {
			e.log.Warn("cannot open the stores of a standby copy; it is not kept", zap.String("task", id), zap.Error(err))
			continue
		}
		e.tasks.Opened(t, set)
		s.add(t, wt.warmup)
	}
	s.followed(a.Version)
	e.changed()
}

// drop closes the copies of the given tasks and forgets them.
func (s *standbys) drop(ids []string) {
	if len(ids) == 0 {
		return
	}
	s.stop() // its stores may be among them
	for _, id := range ids {
		if c, ok := s.copies[id]; ok {
			s.env.tasks.DropStores(c.t)
			s.forget(id)
			s.env.metrics.StandbyLag.DeleteLabelValues(id)
		}
	}
}

// release hands the copies of tasks about to run here over to them: their
// stores close, to be opened by the tasks' restores, which read on from
// where the copies stand.
func (s *standbys) release(ts []*taskmgr.Task) {
	var ids []string
	for _, t := range ts {
		if _, ok := s.copies[t.ID()]; ok {
			ids = append(ids, t.ID())
		}
	}
	s.drop(ids)
	s.refollow()
}

// startRound brings every copy up to its changelogs' ends, off the pump.
func (s *standbys) startRound() {
	e := &s.env
	ts := make([]*taskmgr.Task, 0, len(s.copies))
	for _, c := range s.copies {
		ts = append(ts, c.t)
	}
	slices.SortFunc(ts, func(a, b *taskmgr.Task) int { return cmp.Compare(a.ID(), b.ID()) })
	r := *e.restorer
	// A round every half second would fill the log: only trouble shows.
	r.Log = e.log.WithOptions(zap.IncreaseLevel(zapcore.WarnLevel))
	r.Records, r.Ratio, r.DiskOnly = e.metrics.StandbyRecords, standbyRatio, true
	r.Report = func(string, restore.Progress, bool) {}
	s.begin(ts, func(stop <-chan struct{}, ts []*taskmgr.Task) standbyRound {
		out := standbyRound{behind: map[string]int64{}}
		_, out.err = r.Restore(stop, ts, func(res restore.Result) {
			for id, n := range res.Behind {
				out.behind[id] = n
			}
		})
		return out
	})
}

// standbyRatio takes the restore's progress ratios of standby rounds,
// which nobody reads: a standby's lag is causeway_standby_lag_records.
var standbyRatio = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "causeway_standby_round_ratio"}, []string{"task"})

// close ends the round under way and closes every copy; without a
// connected thread there are none.
func (s *standbys) close() {
	ids := make([]string, 0, len(s.copies))
	for id := range s.copies {
		ids = append(ids, id)
	}
	s.drop(ids)
	s.stop()
}

// statuses lists the copies, for /status.
func (s *standbys) statuses() []StandbyStatus {
	out := make([]StandbyStatus, 0, len(s.copies))
	for id, c := range s.copies {
		st := StandbyStatus{ID: id, Role: RoleStandby}
		if c.warmup {
			st.Role = RoleWarmup
		}
		if c.behind >= 0 {
			n := c.behind
			st.Lag = &n
		}
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b StandbyStatus) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// behind calls f with the task of each copy and how far behind it was
// when the last round began, for the copies that had one.
func (s *standbys) behind(f func(t *taskmgr.Task, n int64)) {
	for _, c := range s.copies {
		if c.behind >= 0 {
			f(c.t, c.behind)
		}
	}
}
