package runtime

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
)

// Tasks carve their outputs' stamps and header lists from slabs they write
// over once the worker releases them (task.Task.ReleaseOutputs after a
// commit, task.Task.ReuseCarved after each batch), which it does only when
// the producer holds on to none of them (Released). The fake, unlike the
// worker's clients, keeps the bytes it was handed until the commit: a
// release any earlier would change the stamps it commits. Every output of
// a pass-through processor must carry exactly the offset of the record it
// came from, over several commits of several poll batches each; and with
// the fake holding on to committed bytes until the next commit (settleLate)
// as well, which the worker learns only from Released.
func TestOutputStampsLastUntilTheirCommit(t *testing.T) {
	for _, late := range []bool{false, true} {
		t.Run("settle-late="+strconv.FormatBool(late), func(t *testing.T) { testOutputStamps(t, late) })
	}
}

func testOutputStamps(t *testing.T, settleLate bool) {
	topo, err := framework.NewBuilder("pass").Processor("pass", func() framework.Processor {
		return framework.ProcessorFunc(func(ctx framework.Context, rec framework.Record) error { return ctx.Forward(rec) })
	}, framework.From("in"), framework.To("out", framework.KeepPartition())).Build()
	require.NoError(t, err)
	fake := newFakeKafka(t)
	fake.settleLate = settleLate
	w := newFakeWorker(t, fake, topo, map[string]int32{"in": 1, "out": 1})
	in := causal.Channel{Topic: "in"}
	const rounds, perRound = 4, 3000 // several poll batches and slabs a round
	for range rounds {
		for range perRound {
			fake.send(in, strconv.FormatInt(fake.high[in], 10))
		}
		drainAndCommit(t, w)
	}
	fake.settle()
	outs := fake.outputs("out")
	require.Len(t, outs, rounds*perRound)
	wrong := 0
	for _, m := range outs {
		from, err := strconv.ParseInt(string(m.Value), 10, 64)
		require.NoError(t, err)
		stamp, _ := framework.Record(*m).Header(causal.HeaderKey)
		clock, err := causal.DecodeClock(stamp)
		require.NoError(t, err, "the stamp of the output of %d", from)
		if got, _ := clock.Get(in); got != from {
			if wrong == 0 {
				t.Errorf("the output of in@%d is stamped %v", from, clock)
			}
			wrong++
		}
	}
	require.Zero(t, wrong, "%d of %d outputs carry another record's stamp", wrong, len(outs))
}
