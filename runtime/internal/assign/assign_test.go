package assign

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

func TestGroupsJoinTopicsThatProcessorsShare(t *testing.T) {
	cases := []struct {
		name string
		sets [][]string
		want [][]string
	}{
		{"one processor", [][]string{{"words"}}, [][]string{{"words"}}},
		{"a join", [][]string{{"payments", "orders"}}, [][]string{{"orders", "payments"}}},
		{"apart", [][]string{{"b"}, {"a"}}, [][]string{{"a"}, {"b"}}},
		{"chained through a shared topic", [][]string{{"a", "b"}, {"c"}, {"b", "d"}, {"d", "e"}}, [][]string{{"a", "b", "d", "e"}, {"c"}}},
		{"joined late", [][]string{{"x", "y"}, {"a", "b"}, {"b", "y"}}, [][]string{{"a", "b", "x", "y"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, Groups(c.sets))
		})
	}
}

func TestTasksTakeTheLargestCountOfAGroup(t *testing.T) {
	got := Tasks([][]string{{"a", "b"}, {"c"}, {"unknown"}}, map[string]int32{"a": 2, "b": 3, "c": 1})
	assert.Equal(t, []Task{{0, 0}, {0, 1}, {0, 2}, {1, 0}}, got)
}

// members builds members m0..m(n-1) owning what plan gave them.
func members(n int, plan map[string][]Task) []Member {
	out := make([]Member, n)
	for i := range out {
		id := fmt.Sprintf("m%d", i)
		out[i] = Member{ID: id, Generation: 1, Owned: plan[id]}
	}
	return out
}

func moved(before, after map[string][]Task) int {
	n := 0
	for id, ts := range after {
		for _, t := range ts {
			if !slices.Contains(before[id], t) {
				n++
			}
		}
	}
	return n
}

func TestScalingMovesOnlyWhatTheNewShareNeeds(t *testing.T) {
	tasks := Tasks([][]string{{"in"}}, map[string]int32{"in": 16})
	three := Balance(tasks, members(3, nil))
	four := Balance(tasks, members(4, three))
	// 16 over 4: the new member takes 4, and nothing else moves.
	assert.Len(t, four["m3"], 4)
	assert.Equal(t, 4, moved(three, four))
	two := Balance(tasks, members(2, four))
	// m2 and m3 leave: their 8 tasks move, and m0 and m1 keep theirs.
	assert.Equal(t, 8, moved(four, two))
	for _, id := range []string{"m0", "m1"} {
		assert.Subset(t, two[id], four[id])
	}
}

// A claim at a lower generation loses to one at a higher: the member that
// claims it missed a rebalance in which the task moved on (KIP-792).
func TestAStaleClaimLosesToTheCurrentOwner(t *testing.T) {
	tasks := []Task{{0, 0}, {0, 1}}
	ms := []Member{
		{ID: "stale", Generation: 3, Owned: []Task{{0, 0}, {0, 1}}},
		{ID: "current", Generation: 5, Owned: []Task{{0, 1}}},
	}
	plan := Balance(tasks, ms)
	assert.Equal(t, []Task{{0, 0}}, plan["stale"])
	assert.Equal(t, []Task{{0, 1}}, plan["current"])
}

func TestBalanceProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		groups := rapid.IntRange(1, 3).Draw(rt, "groups")
		counts := map[string]int32{}
		var gs [][]string
		for g := range groups {
			name := fmt.Sprintf("t%d", g)
			counts[name] = int32(rapid.IntRange(1, 12).Draw(rt, name))
			gs = append(gs, []string{name})
		}
		tasks := Tasks(gs, counts)
		n := rapid.IntRange(1, 6).Draw(rt, "members")
		// Owned: each task at most one owner, drawn at random, possibly
		// a member that is gone.
		var ms []Member
		for i := range n {
			ms = append(ms, Member{ID: fmt.Sprintf("m%d", i), Generation: 1})
		}
		for _, tk := range tasks {
			if o := rapid.IntRange(-1, n).Draw(rt, "owner"); o >= 0 && o < n {
				ms[o].Owned = append(ms[o].Owned, tk)
			}
		}
		plan := Balance(tasks, ms)
		seen := map[Task]string{}
		lo, hi := len(tasks), 0
		for _, m := range ms {
			got := plan[m.ID]
			lo, hi = min(lo, len(got)), max(hi, len(got))
			for _, tk := range got {
				if o, dup := seen[tk]; dup {
					rt.Fatalf("task %v to %s and %s", tk, o, m.ID)
				}
				seen[tk] = m.ID
			}
			// Sticky: a member keeps its owned tasks up to the smaller
			// share.
			kept := 0
			for _, tk := range m.Owned {
				if slices.Contains(got, tk) {
					kept++
				}
			}
			if want := min(len(m.Owned), len(tasks)/n); kept < want {
				rt.Fatalf("%s kept %d of its %d tasks, want at least %d", m.ID, kept, len(m.Owned), want)
			}
		}
		require.Len(rt, seen, len(tasks), "every task is given")
		if hi-lo > 1 {
			rt.Fatalf("uneven: %d to %d tasks", lo, hi)
		}
	})
}
