// Package assign decides which worker of an application runs which task,
// as the group's leader does in a rebalance. It is pure: the transport
// that leads the group hands it the members and what each owns, and turns
// its plan into the group's assignment.
//
// A task is one partition index of a co-partitioned group of topics: the
// inputs of a processor, joined with those of every processor that shares
// one of them. All of a task's partitions go to one member, so that every
// processor finds all its inputs of a partition on one worker.
//
// The plan is even (members' task counts differ by at most one) and
// sticky: a member keeps the tasks it owns up to its share, and only the
// rest move. Run under a cooperative protocol (KIP-429), a task that moves
// is first taken from its owner, which rejoins, and only given to its new
// owner in the next round; see the transport.
package assign

import (
	"cmp"
	"slices"
)

// Task is one partition index of one co-partitioned group of topics.
type Task struct {
	// Group indexes the groups the tasks were made from.
	Group int
	// Partition is the partition index of every topic of the group.
	Partition int32
}

// Compare orders tasks by group, then partition.
func (t Task) Compare(o Task) int {
	return cmp.Or(cmp.Compare(t.Group, o.Group), cmp.Compare(t.Partition, o.Partition))
}

// Member is one member of the group, as the leader sees it.
type Member struct {
	// ID is the member's id in the group.
	ID string
	// Generation is the group generation in which the member last had
	// Owned assigned. A task that two members claim belongs to the one
	// of the higher generation (KIP-792): the other missed a rebalance.
	Generation int32
	// Process names the process the member runs in (a worker process
	// runs one member per stream thread): a standby in the process that
	// runs the task would die with it. Empty: a process of its own.
	Process string
	// Owned are the tasks the member runs now.
	Owned []Task
	// Copies are the tasks whose state the member keeps a copy of (those
	// it runs, stands by for or warms up), with how many changelog records
	// each copy is behind. Nil for a member that says nothing of its
	// state.
	Copies map[Task]int64
}

// Groups joins topics into co-partitioned groups: sets holds the topics
// each processor reads (one set per processor), and every two sets that
// share a topic end up in one group. Each group is sorted, and the groups
// are ordered by their first topic.
func Groups(sets [][]string) [][]string {
	parent := map[string]string{}
	var find func(string) string
	find = func(t string) string {
		if p, ok := parent[t]; ok && p != t {
			r := find(p)
			parent[t] = r
			return r
		}
		parent[t] = t
		return t
	}
	for _, set := range sets {
		for _, t := range set {
			a, b := find(set[0]), find(t)
			if a != b {
				parent[max(a, b)] = min(a, b)
			}
		}
	}
	byRoot := map[string][]string{}
	for t := range parent {
		r := find(t)
		byRoot[r] = append(byRoot[r], t)
	}
	var out [][]string
	for _, g := range byRoot {
		slices.Sort(g)
		out = append(out, g)
	}
	slices.SortFunc(out, func(a, b []string) int { return cmp.Compare(a[0], b[0]) })
	return out
}

// Tasks lists the tasks of the groups, given each topic's partition count:
// as many per group as its topics' largest count. A topic with no count
// (not known to the cluster yet) adds none.
func Tasks(groups [][]string, counts map[string]int32) []Task {
	var out []Task
	for g, topics := range groups {
		n := int32(0)
		for _, t := range topics {
			n = max(n, counts[t])
		}
		for p := range n {
			out = append(out, Task{Group: g, Partition: p})
		}
	}
	return out
}

// Balance gives every task to one member: evenly, and keeping each member's
// owned tasks up to its share. A task that has to find a new member goes
// to one that keeps a copy of its state, the least behind first, if one
// has room. It returns each member's tasks, sorted, by
// member id; every member is in it, with no task if need be. Members are
// taken in the order given, which breaks ties: pass them in a stable order
// (the group's, by instance id then member id).
func Balance(tasks []Task, members []Member) map[string][]Task {
	plan := make(map[string][]Task, len(members))
	if len(members) == 0 {
		return plan
	}
	for _, m := range members {
		plan[m.ID] = nil
	}
	owner := owners(tasks, members)
	// Every member gets base tasks, and extra of them one more: first
	// those that own more than base (the most first, so that fewer tasks
	// move), then whichever takes a free task when the others are full.
	base, extra := len(tasks)/len(members), len(tasks)%len(members)
	owned := make([][]Task, len(members))
	sorted := slices.SortedFunc(slices.Values(tasks), Task.Compare)
	for _, t := range sorted {
		if i, ok := owner[t]; ok {
			owned[i] = append(owned[i], t)
		}
	}
	order := make([]int, len(members))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(len(owned[b]), len(owned[a])) })
	kept := map[Task]bool{}
	for _, i := range order {
		n := min(len(owned[i]), base)
		if len(owned[i]) > base && extra > 0 {
			n++
			extra--
		}
		plan[members[i].ID] = append(plan[members[i].ID], owned[i][:n]...)
		for _, t := range owned[i][:n] {
			kept[t] = true
		}
	}
	for _, t := range sorted {
		if kept[t] {
			continue
		}
		best := -1
		for _, i := range order {
			has := len(plan[members[i].ID])
			if (has < base || has == base && extra > 0) && (best < 0 || takesBefore(members, plan, t, i, best)) {
				best = i
			}
		}
		if len(plan[members[best].ID]) == base {
			extra--
		}
		plan[members[best].ID] = append(plan[members[best].ID], t)
	}
	for id := range plan {
		slices.SortFunc(plan[id], Task.Compare)
	}
	return plan
}

// takesBefore reports whether member i should take the free task t before
// member j: the one with a copy of its state, the least behind of two
// copies, else the one with fewer tasks so far.
func takesBefore(members []Member, plan map[string][]Task, t Task, i, j int) bool {
	li, iHas := members[i].Copies[t]
	lj, jHas := members[j].Copies[t]
	switch {
	case iHas != jHas:
		return iHas
	case iHas && li != lj:
		return li < lj
	}
	return len(plan[members[i].ID]) < len(plan[members[j].ID])
}

// owners finds each task's owner, by index into members: the member that
// claims it at the highest generation, the first of them on a tie. Claims
// of tasks not in tasks are left out.
func owners(tasks []Task, members []Member) map[Task]int {
	known := make(map[Task]bool, len(tasks))
	for _, t := range tasks {
		known[t] = true
	}
	owner := map[Task]int{}
	for i, m := range members {
		for _, t := range m.Owned {
			if !known[t] {
				continue
			}
			if j, ok := owner[t]; !ok || m.Generation > members[j].Generation {
				owner[t] = i
			}
		}
	}
	return owner
}
