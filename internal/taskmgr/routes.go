package taskmgr

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/causeway-stream/causeway/causal"
)

// Route is where records of one input channel go: the tasks that read it
// and its topic's input counter.
//
// After a rebuild rewinds the channel, the tasks that were not rebuilt
// must not receive again what they already hold: Skip[i] is the offset up
// to which Tasks[i] has received the channel already (-1: none to skip).
// Pos is the offset of the last record handed out on the channel (in the
// current pass), so a task with nothing to skip has received through Pos.
// The reader sets Pos as it hands records out.
type Route struct {
	Ch        causal.Channel
	Tasks     []*Task
	Skip      []int64
	Pos       int64
	RecordsIn prometheus.Counter
}

// Wants reports whether Tasks[i] is to receive the record at off: it is
// running and has not received it before a rewind.
func (r *Route) Wants(i int, off int64) bool {
	return r.Tasks[i].state == Running && off > r.Skip[i]
}

// ReceivedThrough is the offset up to which Tasks[i] has received the
// channel.
func (r *Route) ReceivedThrough(i int) int64 { return max(r.Pos, r.Skip[i]) }

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
				r = &Route{Ch: ch, Pos: -1, RecordsIn: m.inputCounter(in)}
				if o := old[ch]; o != nil {
					r.Pos = o.Pos
				}
				m.routes[ch] = r
			}
			skip := int64(-1)
			if o := old[ch]; o != nil {
				if i := slices.Index(o.Tasks, t); i >= 0 {
					skip = o.Skip[i]
				}
			}
			r.Tasks = append(r.Tasks, t)
			r.Skip = append(r.Skip, skip)
		}
	}
}

// Started records that reading starts each channel at the given offset:
// every task has received it up to just below.
func (m *Manager) Started(start map[causal.Channel]int64) {
	for ch, off := range start {
		if r := m.routes[ch]; r != nil {
			r.Pos = off - 1
			for i := range r.Skip {
				r.Skip[i] = -1
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
		for i, t := range r.Tasks {
			if !slices.Contains(rebuilt, t) && t.state == Running {
				// The channel must not skip anything this task has not
				// received: read from no later than just after it.
				next = min(next, r.ReceivedThrough(i)+1)
			}
		}
		for i, t := range r.Tasks {
			if slices.Contains(rebuilt, t) {
				r.Skip[i] = -1
			} else {
				r.Skip[i] = r.ReceivedThrough(i)
			}
		}
		if next == r.Pos+1 {
			continue // the reader is there already
		}
		r.Pos = next - 1
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
