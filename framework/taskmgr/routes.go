package taskmgr

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/causeway-stream/causeway/causal"
)

// Route is where records of one input channel go: the tasks that read it
// (its readers) and its topic's input counter. Its fields are the
// manager's; the reader of the channel learns them through the methods
// below and moves the position by Deliver.
//
// After a rebuild rewinds the channel, the readers that were not rebuilt
// must not receive again what they already hold: skip[i] is the offset up
// to which readers[i] has received the channel already (-1: none to skip).
// pos is the offset of the last record handed out on the channel (in the
// current pass), so a reader with nothing to skip has received through
// pos.
type Route struct {
	ch        causal.Channel
	readers   []*Task
	skip      []int64
	pos       int64
	recordsIn prometheus.Counter
}

// Channel is the route's channel.
func (r *Route) Channel() causal.Channel { return r.ch }

// Readers lists the tasks that read the channel. The slice is the route's
// own: do not change it.
func (r *Route) Readers() []*Task { return r.readers }

// Position is the offset of the last record handed out on the channel (in
// the current pass); -1 before the first.
func (r *Route) Position() int64 { return r.pos }

// InputCounter counts the records read on the channel's topic.
func (r *Route) InputCounter() prometheus.Counter { return r.recordsIn }

// Wants reports whether Readers()[i] is to receive the record at off: it is
// running and has not received it before a rewind.
func (r *Route) Wants(i int, off int64) bool {
	return r.readers[i].state == Running && off > r.skip[i]
}

// ReceivedThrough is the offset up to which Readers()[i] has received the
// channel.
func (r *Route) ReceivedThrough(i int) int64 { return max(r.pos, r.skip[i]) }

// Route returns the route of ch, or nil when no task reads it.
func (m *Manager) Route(ch causal.Channel) *Route { return m.routes[ch] }

// Routes returns every route by channel. The map is the manager's own: do
// not change it.
func (m *Manager) Routes() map[causal.Channel]*Route { return m.routes }

// index rebuilds the channel routes from the tasks, keeping each known
// channel's position and what its tasks have received.
func (m *Manager) index() {
	old := m.routes
	m.routes = map[causal.Channel]*Route{}
	for _, t := range m.tasks {
		for _, in := range t.inputs {
			ch := causal.Channel{Topic: in, Partition: t.partition}
			r := m.routes[ch]
			if r == nil {
				r = &Route{ch: ch, pos: -1, recordsIn: m.inputCounter(in)}
				if o := old[ch]; o != nil {
					r.pos = o.pos
				}
				m.routes[ch] = r
			}
			skip := int64(-1)
			if o := old[ch]; o != nil {
				if i := slices.Index(o.readers, t); i >= 0 {
					skip = o.skip[i]
				}
			}
			r.readers = append(r.readers, t)
			r.skip = append(r.skip, skip)
		}
	}
}

// Started records that reading starts each channel at the given offset:
// every task has received it up to just below.
func (m *Manager) Started(start map[causal.Channel]int64) {
	for ch, off := range start {
		if r := m.routes[ch]; r != nil {
			r.pos = off - 1
			for i := range r.skip {
				r.skip[i] = -1
			}
		}
	}
}

// Rewind says where reading must restart each input channel of the
// rebuilt tasks, so that they receive everything after their committed
// offsets, and makes the other running tasks on those channels skip what
// they have received already (a gate refuses a record it holds a later
// one than). The reader must move to the returned offsets; a channel it
// reads next from where it must restart anyway is not among them.
func (m *Manager) Rewind(rebuilt []*Task) map[causal.Channel]int64 {
	target := map[causal.Channel]int64{}
	for ch, next := range m.Starts(rebuilt) {
		r := m.routes[ch]
		if r == nil {
			continue
		}
		for i, t := range r.readers {
			if !slices.Contains(rebuilt, t) && t.state == Running {
				// The channel must not skip anything this task has not
				// received: read from no later than just after it.
				next = min(next, r.ReceivedThrough(i)+1)
			}
		}
		for i, t := range r.readers {
			if slices.Contains(rebuilt, t) {
				r.skip[i] = -1
			} else {
				r.skip[i] = r.ReceivedThrough(i)
			}
		}
		if next == r.pos+1 {
			continue // the reader is there already
		}
		r.pos = next - 1
		target[ch] = next
	}
	return target
}

// Rebuild builds the given tasks again from their committed state (Build,
// with restored) and rewinds their channels (Rewind), returning where
// reading must restart each of them.
func (m *Manager) Rebuild(ts []*Task, restored map[string]*Restored) (map[causal.Channel]int64, error) {
	if err := m.Build(ts, restored); err != nil {
		return nil, err
	}
	return m.Rewind(ts), nil
}
