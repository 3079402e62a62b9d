package runtime_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Scaling: three workers, then four, then two (one stopped, one killed
// with SIGKILL), while orders and payments keep coming. Every payment has
// exactly one verdict, in causal order, with its running count intact;
// and, rebalancing cooperatively, no worker that stays in the group stops
// all its tasks when another comes or goes: it is handed only new tasks.
// The same run with eager rebalancing, the negative control, stops them.
func TestScalingStopsOnlyTheTasksThatMove(t *testing.T) {
	t.Parallel()
	eachClient(t, func(t *testing.T, client string) {
		s := scale(t, "--client", client)
		assert.Empty(t, s.problems, "logs:\n%s", s.tails)
		assert.Zero(t, s.restarts, "assignments that started a worker's tasks over, which only moved tasks should:\n%s", s.tails)
	})
	t.Run("eager control", func(t *testing.T) {
		t.Parallel()
		s := scale(t, "--client", "franz", "--rebalance-protocol", "eager")
		assert.Empty(t, s.problems, "logs:\n%s", s.tails)
		assert.NotZero(t, s.restarts, "eager rebalancing stops every task, and the check must see it")
	})
}

type scaled struct {
	problems []string
	// restarts counts the assignments, after a worker's first, that
	// came with none of its tasks kept.
	restarts int
	tails    string
}

func scale(t *testing.T, flags ...string) scaled {
	b := startBroker(t)
	createTopics(t, b.Addr(), 8, "orders", "payments", "verdicts")
	wl := workload{payments: map[string][]string{}}
	round := 0
	// feed writes a few orders and payments every 100 ms until until
	// returns true or the time is up.
	feed := func(d time.Duration, until func() bool) {
		deadline := time.Now().Add(d)
		for time.Now().Before(deadline) && !until() {
			wl.add(produceShop(t, b.Addr(), 4, 2, fmt.Sprintf("r%d", round)))
			round++
			time.Sleep(100 * time.Millisecond)
		}
	}
	never := func() bool { return false }
	dyn := append([]string{"--static-membership=false"}, flags...)
	var ws []*workerProcess
	for range 3 {
		ws = append(ws, spawnWorker(t, b.Addr(), "shop-scale", t.TempDir(), dyn...))
	}
	assigned := func(ws ...*workerProcess) func() bool {
		return func() bool {
			for _, w := range ws {
				if w.threadsAssigned() == 0 {
					return false
				}
			}
			return true
		}
	}
	feed(30*time.Second, assigned(ws...))
	feed(2*time.Second, never)
	ws = append(ws, spawnWorker(t, b.Addr(), "shop-scale", t.TempDir(), dyn...))
	feed(30*time.Second, assigned(ws[3]))
	feed(3*time.Second, never)
	require.NoError(t, ws[0].stop(30*time.Second), ws[0].tail())
	ws[1].kill()
	// The killed worker's tasks wait for its session to time out (10 s).
	feed(14*time.Second, never)
	want := wl.count()
	verdicts := readCommitted(t, b.Addr(), "verdicts", want, 90*time.Second)
	s := scaled{problems: checkVerdicts(wl, verdicts)}
	if len(verdicts) != want {
		s.problems = append(s.problems, fmt.Sprintf("%d verdicts, want %d", len(verdicts), want))
	}
	for i, w := range ws {
		s.restarts += restartedAssignments(w.logs.String())
		s.tails += fmt.Sprintf("--- worker %d\n%s\n", i, w.tail())
	}
	for _, w := range ws[2:] {
		require.NoError(t, w.stop(30*time.Second), w.tail())
	}
	return s
}

// restartedAssignments counts, in a worker's logs, the assignments after
// its first that brought partitions and kept none of its tasks: under
// eager rebalancing every one, under cooperative none. An assignment that
// follows the loss of the worker's membership (a revoke marked lost: its
// session expired, as it may on a loaded machine, and the group went on
// without it) is not counted: that worker did not stay in the group, and
// no protocol keeps tasks across that.
func restartedAssignments(logs string) int {
	n, first, lost := 0, true, false
	for _, line := range strings.Split(logs, "\n") {
		var l struct {
			Msg              string
			Partitions, Kept int
			Lost             bool
		}
		if json.Unmarshal([]byte(line), &l) != nil {
			continue
		}
		switch {
		case l.Msg == "partitions revoked" && l.Lost:
			lost = true
		case l.Msg != "partitions assigned" || l.Partitions == 0:
			// librdkafka's cooperative rounds may bring nothing
		default:
			if !first && l.Kept == 0 && !lost {
				n++
			}
			first, lost = false, false
		}
	}
	return n
}

// The count of restarted assignments counts what eager rebalancing does
// and leaves out a worker that lost its membership.
func TestRestartedAssignments(t *testing.T) {
	const (
		assigned = `{"msg":"partitions assigned","partitions":%d,"kept":%d}`
		revoked  = `{"msg":"partitions revoked","partitions":4,"lost":%v}`
	)
	line := fmt.Sprintf
	for _, c := range []struct {
		name string
		logs []string
		want int
	}{
		{"cooperative: tasks kept", []string{line(assigned, 4, 0), line(assigned, 6, 4)}, 0},
		{"eager: tasks started over", []string{line(assigned, 4, 0), line(revoked, false), line(assigned, 6, 0)}, 1},
		{"membership lost", []string{line(assigned, 4, 0), line(revoked, true), line(assigned, 6, 0)}, 0},
		{"lost, then eager", []string{line(assigned, 4, 0), line(revoked, true), line(assigned, 6, 0), line(revoked, false), line(assigned, 6, 0)}, 1},
	} {
		assert.Equal(t, c.want, restartedAssignments(strings.Join(c.logs, "\n")), c.name)
	}
}
