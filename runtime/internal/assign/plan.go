package assign

import (
	"cmp"
	"math"
	"slices"
)

// Options are what a Plan is made with beyond the tasks and the members.
type Options struct {
	// Standbys is how many members besides the one that runs a task keep
	// a copy of its state up to date (standby replicas). Default 0.
	Standbys int
	// Stateless tells the groups whose tasks have no state: they get no
	// standbys and need no warm-up.
	Stateless map[int]bool
	// Sizes is, per task, how many changelog records a full restore of
	// its state reads, as its owner last said: how far behind a member
	// without a copy is. A task missing counts as nothing (it moves at
	// once), unless some member keeps a copy of it (see behind).
	Sizes map[Task]int64
	// AcceptableLag is how far behind a member's copy of a task's state
	// may be for the task to move to it at once. Further behind, and
	// while its owner is still in the group, the task stays where it
	// runs and the member warms a copy up; a later rebalance (a probe)
	// moves it once the copy has caught up. Negative turns warm-ups off.
	AcceptableLag int64
	// MaxWarmups bounds the warm-ups of the whole group at once.
	MaxWarmups int
}

// Assignment is one member's part of a plan.
type Assignment struct {
	// Active are the tasks the member runs.
	Active []Task
	// Standby are the tasks whose state the member keeps a copy of, for
	// a failover.
	Standby []Task
	// Warmup are the tasks whose state the member warms up, to take them
	// over once its copy has caught up.
	Warmup []Task
}

// Plan makes the group's assignment: the tasks spread by Balance, then
// kept where they can run at once when their new member would first have
// to restore more than AcceptableLag (a warm-up instead, up to
// MaxWarmups; see warmUp), then standbys for every stateful task in other
// processes (see placeStandbys).
func Plan(tasks []Task, members []Member, o Options) map[string]*Assignment {
	out := make(map[string]*Assignment, len(members))
	index := make(map[string]int, len(members))
	for i, m := range members {
		out[m.ID] = &Assignment{}
		index[m.ID] = i
	}
	if len(members) == 0 {
		return out
	}
	active := Balance(tasks, members)
	runs := map[Task]string{}
	for id, ts := range active {
		for _, t := range ts {
			runs[t] = id
		}
	}
	sorted := slices.SortedFunc(slices.Values(tasks), Task.Compare)
	warmUp(sorted, members, index, active, runs, out, o)
	for id, ts := range active {
		slices.SortFunc(ts, Task.Compare)
		out[id].Active = ts
	}
	if o.Standbys <= 0 {
		return out
	}
	placeStandbys(sorted, members, index, runs, out, o)
	return out
}

// warmUp keeps each stateful task on a member that can run it at once
// when the member the balance chose would first restore more than
// o.AcceptableLag: on its owner, if it is still in the group, or else on
// the member whose copy is the least behind, if within the acceptable lag
// (a failover to a standby). The chosen member then warms a copy up, and a
// later rebalance moves the task once the copy has caught up. At most
// o.MaxWarmups tasks are kept so; the others move at once.
func warmUp(sorted []Task, members []Member, index map[string]int, active map[string][]Task, runs map[Task]string,
	out map[string]*Assignment, o Options) {
	if o.AcceptableLag < 0 {
		return
	}
	owner := owners(sorted, members)
	warmups := 0
	for _, t := range sorted {
		to := runs[t]
		if o.Stateless[t.Group] || warmups >= o.MaxWarmups || behind(members[index[to]], t, members, o) <= o.AcceptableLag {
			continue
		}
		stay, ok := owner[t]
		if !ok {
			stay = closestCopy(t, members, o.AcceptableLag)
		}
		if stay < 0 || members[stay].ID == to {
			continue
		}
		from := members[stay].ID
		runs[t] = from
		active[to] = slices.DeleteFunc(active[to], func(x Task) bool { return x == t })
		active[from] = append(active[from], t)
		out[to].Warmup = append(out[to].Warmup, t)
		warmups++
	}
}

// behind is how many changelog records m would restore to run t: what its
// copy lacks, or the whole state's size without a copy. A size nobody told
// counts as nothing, unless another member keeps a copy: then m is surely
// further behind than that member.
func behind(m Member, t Task, members []Member, o Options) int64 {
	if n, ok := m.Copies[t]; ok {
		return n
	}
	if n, ok := o.Sizes[t]; ok {
		return n
	}
	for _, other := range members {
		if _, ok := other.Copies[t]; ok {
			return math.MaxInt64
		}
	}
	return 0
}

// closestCopy is the member whose copy of t is the least behind, if within
// acceptable; -1 for none.
func closestCopy(t Task, members []Member, acceptable int64) int {
	best := -1
	for i, m := range members {
		if n, ok := m.Copies[t]; ok && n <= acceptable && (best < 0 || n < members[best].Copies[t]) {
			best = i
		}
	}
	return best
}

// processOf is the process m runs in; a member that does not say is one
// of its own.
func processOf(m Member) string {
	if m.Process == "" {
		return "member " + m.ID
	}
	return "process " + m.Process
}

// placeStandbys gives every stateful task o.Standbys copies on members of
// other processes than the one that runs it (one copy a process), not on
// a member that warms it up: those that keep a copy
// already first, the least behind first, then those with the fewest
// copies to keep.
func placeStandbys(sorted []Task, members []Member, index map[string]int, runs map[Task]string, out map[string]*Assignment, o Options) {
	copies := make([]int, len(members))
	for id, a := range out {
		copies[index[id]] = len(a.Warmup)
	}
	for _, t := range sorted {
		if o.Stateless[t.Group] {
			continue
		}
		var candidates []int
		for i, m := range members {
			if m.ID != runs[t] && !slices.Contains(out[m.ID].Warmup, t) {
				candidates = append(candidates, i)
			}
		}
		slices.SortStableFunc(candidates, func(a, b int) int {
			la, aHas := members[a].Copies[t]
			lb, bHas := members[b].Copies[t]
			switch {
			case aHas != bHas && aHas:
				return -1
			case aHas != bHas:
				return 1
			case aHas && la != lb:
				return cmp.Compare(la, lb)
			}
			return cmp.Compare(copies[a], copies[b])
		})
		// One copy a process, and none in the process that runs the task.
		used := map[string]bool{processOf(members[index[runs[t]]]): true}
		placed := 0
		for _, i := range candidates {
			if placed == o.Standbys || used[processOf(members[i])] {
				continue
			}
			used[processOf(members[i])] = true
			out[members[i].ID].Standby = append(out[members[i].ID].Standby, t)
			copies[i]++
			placed++
		}
	}
}
