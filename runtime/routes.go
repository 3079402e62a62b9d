package runtime

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/causeway-stream/causeway/causal"
)

// The channel routes the pump dispatches records by, and the rewinding of
// channels when tasks are rebuilt.

// route is where records of one input channel go: the tasks that read it
// and its topic's input counter.
//
// After a rebuild rewinds the channel, the tasks that were not rebuilt
// must not receive again what they already hold: skip[i] is the offset up
// to which tasks[i] has received the channel already (-1: none to skip).
// pos is the offset of the last record handed out on the channel (in the
// current pass), so a task with nothing to skip has received through pos.
type route struct {
	ch        causal.Channel
	tasks     []*runningTask
	skip      []int64
	pos       int64
	recordsIn prometheus.Counter
}

// receivedThrough is the offset up to which tasks[i] has received ch.
func (r *route) receivedThrough(i int) int64 { return max(r.pos, r.skip[i]) }

// index rebuilds the channel routes from the tasks, keeping each known
// channel's position and what its tasks have received.
func (m *taskManager) index() {
	old := m.routes
	m.routes = map[causal.Channel]*route{}
	for _, rt := range m.tasks {
		for _, in := range rt.inputs {
			ch := causal.Channel{Topic: in, Partition: rt.partition}
			r := m.routes[ch]
			if r == nil {
				r = &route{ch: ch, pos: -1, recordsIn: m.inputCounter(in)}
				if o := old[ch]; o != nil {
					r.pos = o.pos
				}
				m.routes[ch] = r
			}
			skip := int64(-1)
			if o := old[ch]; o != nil {
				if i := slices.Index(o.tasks, rt); i >= 0 {
					skip = o.skip[i]
				}
			}
			r.tasks = append(r.tasks, rt)
			r.skip = append(r.skip, skip)
		}
	}
}

// started records that the consumer fetches each channel from the given
// offset: every task has received it up to just below.
func (m *taskManager) started(start map[causal.Channel]int64) {
	for ch, off := range start {
		if r := m.routes[ch]; r != nil {
			r.pos = off - 1
			for i := range r.skip {
				r.skip[i] = -1
			}
		}
	}
}

// rewind says where the consumer must fetch each input channel of the
// rebuilt tasks from, so that they receive everything after their
// committed offsets, and makes the other running tasks on those channels
// skip what they have received already (a gate refuses a record it holds
// a later one than). The consumer must be moved to the returned offsets.
func (m *taskManager) rewind(rebuilt []*runningTask) map[causal.Channel]int64 {
	target := map[causal.Channel]int64{}
	for ch, next := range m.starts(rebuilt) {
		r := m.routes[ch]
		if r == nil {
			continue
		}
		for i, rt := range r.tasks {
			if !slices.Contains(rebuilt, rt) && rt.state == StateRunning {
				// The channel must not skip anything this task has not
				// received: fetch from no later than just after it.
				next = min(next, r.receivedThrough(i)+1)
			}
		}
		for i, rt := range r.tasks {
			if slices.Contains(rebuilt, rt) {
				r.skip[i] = -1
			} else {
				r.skip[i] = r.receivedThrough(i)
			}
		}
		r.pos = next - 1
		target[ch] = next
	}
	return target
}

func (m *taskManager) inputCounter(topic string) prometheus.Counter {
	c, ok := m.recordsIn[topic]
	if !ok {
		c = m.metrics.RecordsIn.WithLabelValues(topic)
		m.recordsIn[topic] = c
	}
	return c
}
