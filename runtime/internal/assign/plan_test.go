package assign

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"pgregory.net/rapid"
)

func TestStandbysGoWhereACopyIsAndNeverBesideTheActive(t *testing.T) {
	tasks := []Task{{0, 0}, {0, 1}, {1, 0}}
	ms := []Member{
		{ID: "a", Generation: 1, Owned: []Task{{0, 0}, {1, 0}}},
		{ID: "b", Generation: 1, Owned: []Task{{0, 1}}},
		{ID: "c", Generation: 1, Copies: map[Task]int64{{0, 0}: 5}},
	}
	plan := Plan(tasks, ms, Options{Standbys: 1, Stateless: map[int]bool{1: true}, AcceptableLag: -1})
	assert.Equal(t, []Task{{0, 0}}, plan["c"].Standby, "c keeps a copy of 0/0 already")
	for id, a := range plan {
		for _, s := range a.Standby {
			assert.NotContains(t, a.Active, s, "%s stands by for a task it runs", id)
			assert.NotEqual(t, 1, s.Group, "a stateless task got a standby")
		}
	}
	n := 0
	for _, a := range plan {
		n += len(a.Standby)
	}
	assert.Equal(t, 2, n, "one standby for each of the two stateful tasks")
}

// A worker process runs a member per stream thread: a standby in the
// process that runs the task would die with it, so it goes to another
// process, one copy a process; with no other process, there is none.
func TestStandbysLeaveTheProcessThatRunsTheTask(t *testing.T) {
	tasks := []Task{{0, 0}}
	ms := []Member{
		{ID: "p1-0", Process: "p1", Generation: 1, Owned: tasks},
		{ID: "p1-1", Process: "p1", Generation: 1},
		{ID: "p2-0", Process: "p2", Generation: 1},
		{ID: "p2-1", Process: "p2", Generation: 1},
	}
	plan := Plan(tasks, ms, Options{Standbys: 2, AcceptableLag: -1})
	var holders []string
	for id, a := range plan {
		if len(a.Standby) > 0 {
			holders = append(holders, id)
		}
	}
	assert.Len(t, holders, 1, "one copy a process, and p1 runs the task: %v", holders)
	assert.Contains(t, []string{"p2-0", "p2-1"}, holders[0])

	plan = Plan(tasks, ms[:2], Options{Standbys: 1, AcceptableLag: -1})
	assert.Empty(t, plan["p1-1"].Standby, "no other process to keep a copy in")
}

func TestAFailedOverTaskGoesToItsStandby(t *testing.T) {
	tasks := []Task{{0, 0}, {0, 1}, {0, 2}, {0, 3}}
	// d held 0/2 and 0/3 and is gone; c stands by for 0/3, b for 0/2.
	ms := []Member{
		{ID: "a", Generation: 2, Owned: []Task{{0, 0}}},
		{ID: "b", Generation: 2, Owned: []Task{{0, 1}}, Copies: map[Task]int64{{0, 1}: 0, {0, 2}: 3}},
		{ID: "c", Generation: 2, Copies: map[Task]int64{{0, 3}: 1}},
	}
	plan := Plan(tasks, ms, Options{Standbys: 1, AcceptableLag: 10, MaxWarmups: 2})
	assert.Contains(t, plan["c"].Active, Task{0, 3})
	assert.Contains(t, plan["b"].Active, Task{0, 2})
}

// When the standby of a failed-over task sits on a member whose share is
// full, the task still goes there, beyond the share, and the member the
// balance chose warms up instead of restoring it all.
func TestAFailoverGoesToTheStandbyBeyondItsShare(t *testing.T) {
	tasks := []Task{{0, 0}, {0, 1}, {0, 2}, {0, 3}}
	// The gone member ran 0/2 and 0/3; a stands by for both.
	ms := []Member{
		{ID: "a", Generation: 2, Owned: []Task{{0, 0}}, Copies: map[Task]int64{{0, 0}: 0, {0, 2}: 4, {0, 3}: 2}},
		{ID: "b", Generation: 2, Owned: []Task{{0, 1}}, Copies: map[Task]int64{{0, 1}: 0}},
	}
	plan := Plan(tasks, ms, Options{Standbys: 1, AcceptableLag: 10, MaxWarmups: 2})
	assert.Equal(t, []Task{{0, 0}, {0, 2}, {0, 3}}, plan["a"].Active)
	assert.Equal(t, []Task{{0, 1}}, plan["b"].Active)
	assert.Len(t, plan["b"].Warmup, 1, "b warms up the task it should have had")
}

func TestATaskWaitsForItsNewMemberToWarmUp(t *testing.T) {
	tasks := []Task{{0, 0}, {0, 1}}
	owner := Member{ID: "a", Generation: 1, Owned: tasks, Copies: map[Task]int64{{0, 0}: 0, {0, 1}: 0}}
	sizes := map[Task]int64{{0, 0}: 1000, {0, 1}: 1000}
	o := Options{Sizes: sizes, AcceptableLag: 100, MaxWarmups: 2}

	plan := Plan(tasks, []Member{owner, {ID: "new", Generation: 1}}, o)
	assert.Equal(t, tasks, plan["a"].Active, "nothing moves to a member 1000 records behind")
	assert.Len(t, plan["new"].Warmup, 1)
	assert.Empty(t, plan["new"].Active)

	warm := plan["new"].Warmup[0]
	plan = Plan(tasks, []Member{owner, {ID: "new", Generation: 1, Copies: map[Task]int64{warm: 40}}}, o)
	assert.Equal(t, []Task{warm}, plan["new"].Active, "the warmed-up copy is within the acceptable lag")
	assert.Empty(t, plan["new"].Warmup)

	o.AcceptableLag = -1
	plan = Plan(tasks, []Member{owner, {ID: "new", Generation: 1}}, o)
	assert.Len(t, plan["new"].Active, 1, "without warm-ups the task moves at once")

	o.AcceptableLag, o.MaxWarmups = 100, 0
	plan = Plan(tasks, []Member{owner, {ID: "new", Generation: 1}}, o)
	assert.Len(t, plan["new"].Active, 1, "with no warm-ups allowed the task moves at once")
}

func TestPlanProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(1, 5).Draw(rt, "members")
		tasks := Tasks([][]string{{"a"}, {"b"}}, map[string]int32{"a": int32(rapid.IntRange(1, 8).Draw(rt, "a")), "b": 2})
		var ms []Member
		for i := range n {
			ms = append(ms, Member{ID: fmt.Sprintf("m%d", i), Generation: 1, Copies: map[Task]int64{}})
		}
		sizes := map[Task]int64{}
		for _, tk := range tasks {
			sizes[tk] = int64(rapid.IntRange(0, 50).Draw(rt, "size"))
			if o := rapid.IntRange(-1, n).Draw(rt, "owner"); o >= 0 && o < n {
				ms[o].Owned = append(ms[o].Owned, tk)
				ms[o].Copies[tk] = 0
			}
			if c := rapid.IntRange(-1, n-1).Draw(rt, "copy"); c >= 0 {
				if _, has := ms[c].Copies[tk]; !has {
					ms[c].Copies[tk] = int64(rapid.IntRange(0, 50).Draw(rt, "lag"))
				}
			}
		}
		o := Options{Standbys: rapid.IntRange(0, 2).Draw(rt, "standbys"), Stateless: map[int]bool{1: true}, Sizes: sizes,
			AcceptableLag: int64(rapid.IntRange(-1, 30).Draw(rt, "acceptable")), MaxWarmups: rapid.IntRange(0, 3).Draw(rt, "warmups")}
		plan := Plan(tasks, ms, o)
		runs := map[Task]string{}
		warm := 0
		for id, a := range plan {
			for _, tk := range a.Active {
				if other, dup := runs[tk]; dup {
					rt.Fatalf("%v runs on %s and %s", tk, other, id)
				}
				runs[tk] = id
			}
			warm += len(a.Warmup)
		}
		if len(runs) != len(tasks) {
			rt.Fatalf("%d of %d tasks run", len(runs), len(tasks))
		}
		if warm > max(o.MaxWarmups, 0) {
			rt.Fatalf("%d warm-ups, at most %d allowed", warm, o.MaxWarmups)
		}
		for _, tk := range tasks {
			var holders []string
			warming := 0
			for id, a := range plan {
				if slices.Contains(a.Warmup, tk) {
					warming++
				}
				if slices.Contains(a.Standby, tk) {
					holders = append(holders, id)
				}
				if slices.Contains(a.Standby, tk) && runs[tk] == id {
					rt.Fatalf("%s stands by for %v, which it runs", id, tk)
				}
			}
			want := min(o.Standbys, n-1-warming)
			if tk.Group == 1 {
				want = 0
			}
			if len(holders) != want {
				rt.Fatalf("%v has %d standbys, want %d", tk, len(holders), want)
			}
		}
	})
}
