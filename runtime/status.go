package runtime

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework/taskmgr"
	"github.com/causeway-stream/causeway/runtime/internal/transport"
)

// unreadyAfterFailedCommits is how many transactions in a row must fail
// before the worker reports itself not ready: one failure is a blip the
// worker rides through, several mean it is not getting work done.
const unreadyAfterFailedCommits = 3

// Status returns the worker's status as of its last commit interval, with
// the progress of the restores under way as of now.
func (w *StreamThread) Status() Status { return w.board.snapshot(w.cfg.ApplicationID) }

// health is what readiness is judged on.
type health struct {
	fatal         error
	assigned      int
	failedCommits int
	lastCommitErr error
	restoring     []string
	failed        []string // "<task> (<error>)"
	readyIfFailed bool
}

// judge says whether the worker is ready and degraded, and why not or
// why degraded, the gravest reason first.
func (h health) judge() (ready, degraded bool, reason string) {
	degraded = len(h.failed) > 0
	var failed string
	if degraded {
		failed = fmt.Sprintf("%d %s FAILED: %s", len(h.failed), plural(len(h.failed), "task", "tasks"), strings.Join(h.failed, "; "))
	}
	switch {
	case h.fatal != nil:
		return false, degraded, "stopping on a fatal error: " + h.fatal.Error()
	case h.assigned == 0:
		return false, degraded, "no partitions assigned (yet)"
	case h.failedCommits >= unreadyAfterFailedCommits:
		return false, degraded, fmt.Sprintf("%d transactions in a row failed, the last: %v", h.failedCommits, h.lastCommitErr)
	case len(h.restoring) > 0:
		return false, degraded, fmt.Sprintf("restoring %d %s: %s", len(h.restoring), plural(len(h.restoring), "task", "tasks"), strings.Join(h.restoring, ", "))
	case degraded:
		return h.readyIfFailed, true, failed
	}
	return true, false, ""
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// Ready reports whether the worker is ready; see Status.Ready.
func (w *StreamThread) Ready() bool {
	st := w.Status()
	return st.Ready
}

// publishStatus snapshots the tasks for readers on other goroutines.
func (w *StreamThread) publishStatus() {
	now := w.now()
	st := Status{ApplicationID: w.cfg.ApplicationID, InstanceID: w.instanceID, FailedCommits: w.commits.failed}
	h := health{fatal: w.fate.Fatal(), assigned: len(w.pump.assigned), failedCommits: w.commits.failed,
		lastCommitErr: w.commits.lastErr, readyIfFailed: w.cfg.ReadyWithFailedTasks}
	if w.fate.Fatal() != nil {
		st.Error = w.fate.Fatal().Error()
	}
	if w.commits.failed > 0 && w.commits.lastErr != nil {
		st.LastCommitError = w.commits.lastErr.Error()
	}
	w.failedGauge.Set(float64(w.commits.failed))
	members, addr := w.board.peers()
	if members != nil {
		ids := make([]string, 0, len(w.tasks.Tasks()))
		for _, rt := range w.tasks.Tasks() {
			ids = append(ids, rt.ID())
		}
		members.publish(addr, ids, now)
	}
	for _, rt := range w.tasks.Tasks() {
		ts := TaskStatus{ID: rt.ID(), State: rt.State(), Restarts: w.restarts.status(rt.ID())}
		if rt.Err() != nil {
			ts.LastError = rt.Err().Error()
		}
		switch rt.State() {
		case StateRestoring:
			h.restoring = append(h.restoring, rt.ID())
		case StateFailed:
			h.failed = append(h.failed, fmt.Sprintf("%s (%s)", rt.ID(), strings.TrimPrefix(ts.LastError, "task "+rt.ID()+": ")))
		}
		for _, s := range []TaskState{StateRestoring, StateRunning, StateFailed} {
			v := 0.0
			if s == rt.State() {
				v = 1
			}
			w.metrics.TaskState.WithLabelValues(rt.ID(), string(s)).Set(v)
		}
		if rt.Task() != nil {
			tst := rt.Task().Status()
			ts.Held = tst.Held
			for _, c := range tst.Channels {
				cs := ChannelStatus{Channel: c.Channel.String(), Frontier: c.Frontier, Held: c.Held, Committed: rt.Committed()[c.Channel.Topic]}
				if next, ok := rt.Committed()[c.Channel.Topic]; ok && w.consumer != nil {
					if _, high, ok := w.consumer.CachedWatermarks(c.Channel); ok && high >= next {
						lag := high - next
						cs.Lag = &lag
						w.metrics.CommittedLag.WithLabelValues(rt.ID(), cs.Channel).Set(float64(lag))
						w.metrics.DeliveredLag.WithLabelValues(rt.ID(), cs.Channel).Set(float64(max(0, high-(c.Frontier+1))))
					}
				}
				w.metrics.Held.WithLabelValues(rt.ID(), cs.Channel).Set(float64(c.Held))
				// A failed task waits for nothing: an operator's restart or
				// skip, not a cause, moves it on.
				if c.Blocked && rt.State() != StateFailed {
					cs.Blocked, cs.WaitingFor, cs.WaitingOffset = true, c.WaitingFor.String(), c.WaitingOffset
					b, ok := rt.Blocked(c.Channel)
					if !ok || b.Head != c.HeadOffset || b.On != c.WaitingFor || b.Off != c.WaitingOffset {
						b = taskmgr.Blocked{Head: c.HeadOffset, On: c.WaitingFor, Off: c.WaitingOffset, Since: now}
						rt.SetBlocked(c.Channel, b)
					}
					since := b.Since
					cs.BlockedSince = &since
				} else {
					rt.Unblock(c.Channel)
				}
				ts.Channels = append(ts.Channels, cs)
			}
		}
		st.Tasks = append(st.Tasks, ts)
	}
	st.Ready, st.Degraded, st.Reason = h.judge()
	st.Standbys = w.standby.statuses()
	w.board.publish(st, stateOfTasks(cmp.Or(w.process, w.instanceID), w.tasks.Tasks(), w.local, &w.standby, w.groups))
}

// stateOfTasks is what this thread tells the group of its state: the
// tasks it runs with stores on disk (none behind once running, all of
// their changelogs while restoring), its copies of other workers' tasks,
// and how much a full restore of each task it runs would read. Tasks are
// named by their group's first topic and their partition; process is the
// thread's process (its instance id when it runs on its own), and ts the
// tasks it runs.
func stateOfTasks(process string, ts []*taskmgr.Task, local *localState, standby *standbys, groups topicGroups) transport.StateReport {
	r := transport.StateReport{Process: process, Copies: map[causal.Channel]int64{}, Sizes: map[causal.Channel]int64{}}
	name := func(processor string, p int32) causal.Channel {
		return causal.Channel{Topic: groups.lead(processor), Partition: p}
	}
	for _, rt := range ts {
		size, known := local.size(rt.ID())
		if !known {
			continue // no stores on disk, or not looked at yet
		}
		ch := name(rt.Processor(), rt.Partition())
		r.Sizes[ch] += size
		behind := int64(0)
		if rt.State() == StateRestoring {
			behind = size // at most
		}
		r.Copies[ch] += behind
	}
	standby.behind(func(t *taskmgr.Task, n int64) { r.Copies[name(t.Processor(), t.Partition())] += n })
	return r
}
