package taskmgr

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
)

// endsAt answers with watermarks [0, 100) and counts the claimed channels
// it is asked the end of; ends overrides the end of some.
type endsAt struct {
	groupAt
	ends  map[causal.Channel]int64
	asked map[causal.Channel]int
}

func (e endsAt) ClaimEnd(claim causal.Entry) (int64, error) {
	e.asked[claim.Channel]++
	if end, ok := e.ends[claim.Channel]; ok {
		return end, nil
	}
	return 100, nil
}

func (e endsAt) Watermarks(ch causal.Channel) (int64, int64, error) {
	if end, ok := e.ends[ch]; ok {
		return 0, end, nil
	}
	return 0, 100, nil
}

// claimsTask builds one task of p, which reads in (claims checked) and
// counts what it processes.
func claimsTask(t *testing.T, log endsAt) (*Manager, *Task, *int) {
	t.Helper()
	processed := new(int)
	topo, err := framework.NewBuilder("t").Processor("p", func() framework.Processor {
		return framework.ProcessorFunc(func(framework.Context, framework.Record) error { *processed++; return nil })
	}, framework.From("in")).DeadLetterTopic("dead").Build()
	require.NoError(t, err)
	m, err := New(Config{Topology: topo, Partitions: map[string]int32{"in": 1, "dead": 1}, Offsets: log, CheckClaims: true})
	require.NoError(t, err)
	ts := m.Create([]causal.Channel{{Topic: "in"}})
	require.Len(t, ts, 1)
	require.NoError(t, m.Build(ts, nil))
	m.Started(m.Starts(ts))
	return m, ts[0], processed
}

// recordClaiming is the record at off of in/0 whose clock claims offset 5
// of each of n channels.
func recordClaiming(t *testing.T, off int64, n int) framework.Record {
	t.Helper()
	var es []causal.Entry
	for i := range n {
		es = append(es, causal.Entry{Channel: causal.Channel{Topic: fmt.Sprintf("c%03d", i)}, Offset: 5})
	}
	clock, err := causal.NewClock(es...)
	require.NoError(t, err)
	return framework.Record{Topic: "in", Offset: off, Value: []byte("v"),
		Headers: []framework.Header{{Key: causal.HeaderKey, Value: causal.EncodeClock(clock)}}}
}

// The claims a record brings into the topology are checked in one round,
// however many channels they name: each claimed channel's end is asked
// once, and the record is processed. (The check once learned one end per
// round and failed a record naming more than 64 channels.)
func TestClaimsAreCheckedInOneRound(t *testing.T) {
	log := endsAt{ends: map[causal.Channel]int64{}, asked: map[causal.Channel]int{}}
	m, tk, processed := claimsTask(t, log)
	assert.False(t, m.Deliver(m.Route(causal.Channel{Topic: "in"}), recordClaiming(t, 0, 100)))
	assert.Equal(t, Running, tk.State(), "failed with: %v", tk.Err())
	assert.Equal(t, 1, *processed)
	assert.Len(t, log.asked, 100)
	for ch, n := range log.asked {
		assert.Equal(t, 1, n, "asked the end of %s", ch)
	}
}

// A claim beyond its channel's end is bad input of the record that carries
// it, whichever of the record's claims it is: under the default policy the
// task fails, naming the record and the claim, and processes nothing.
func TestAClaimBeyondTheEndIsBadInput(t *testing.T) {
	c002 := causal.Channel{Topic: "c002"}
	log := endsAt{ends: map[causal.Channel]int64{c002: 5}, asked: map[causal.Channel]int{}}
	m, tk, processed := claimsTask(t, log)
	m.Deliver(m.Route(causal.Channel{Topic: "in"}), recordClaiming(t, 0, 3))
	require.Equal(t, Failed, tk.State())
	assert.Zero(t, *processed)
	var ue *UnsatisfiableClaimError
	require.ErrorAs(t, tk.Err(), &ue)
	assert.Equal(t, causal.Entry{Channel: causal.Channel{Topic: "in"}, Offset: 0}, ue.Record)
	assert.Equal(t, causal.Entry{Channel: c002, Offset: 5}, ue.Claim)
	assert.Equal(t, int64(5), ue.End)
}

// A head that has waited UnsatisfiableAfter on a claim beyond the end of a
// channel read to its end fails its task, naming the record; one whose
// claimed channel has not been read to its end, or that has not waited
// long enough, does not.
func TestCheckBlockedFailsOnlyWhatCanNeverBeMet(t *testing.T) {
	in, orders := causal.Channel{Topic: "in"}, causal.Channel{Topic: "orders"}
	since := time.Unix(1000, 0)
	for _, tc := range []struct {
		name     string
		waited   time.Duration
		position int64 // of orders
		end      int64 // of orders
		fails    bool
	}{
		{"read to its end, claim beyond", UnsatisfiableAfter, 4, 4, true},
		{"not read to its end", UnsatisfiableAfter, 3, 4, false},
		{"claim below the end", UnsatisfiableAfter, 10, 10, false},
		{"not waited long enough", UnsatisfiableAfter - time.Millisecond, 4, 4, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := endsAt{ends: map[causal.Channel]int64{orders: tc.end}, asked: map[causal.Channel]int{}}
			m, tk, _ := claimsTask(t, log)
			tk.SetBlocked(in, Blocked{Head: 3, On: orders, Off: 7, Since: since})
			m.SetNow(since.Add(tc.waited))
			m.CheckBlocked(map[causal.Channel]int64{orders: tc.position})
			if !tc.fails {
				assert.Equal(t, Running, tk.State())
				return
			}
			require.Equal(t, Failed, tk.State())
			var ue *UnsatisfiableClaimError
			require.ErrorAs(t, tk.Err(), &ue)
			assert.Equal(t, causal.Entry{Channel: in, Offset: 3}, ue.Record)
			assert.Equal(t, causal.Entry{Channel: orders, Offset: 7}, ue.Claim)
		})
	}
}
