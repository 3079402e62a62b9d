package runtime

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/taskmgr"
)

// shippingTopology: shipping reads requests (where clocks enter from
// outside) and writes shipments; audit reads shipments and orders.
func shippingTopology(t *testing.T, shippingOpts ...framework.ProcessorOpt) (*framework.Topology, map[string]int32) {
	t.Helper()
	forward := func() framework.Processor {
		return framework.ProcessorFunc(func(ctx framework.Context, rec framework.Record) error {
			return ctx.Forward(framework.Record{Key: rec.Key, Value: rec.Value})
		})
	}
	topo, err := framework.NewBuilder("shop").
		Processor("shipping", forward, append([]framework.ProcessorOpt{framework.From("requests"), framework.To("shipments")}, shippingOpts...)...).
		Processor("audit", forward, framework.From("shipments", "orders"), framework.To("audit-log")).
		DeadLetterTopic("dead").
		Build()
	require.NoError(t, err)
	return topo, map[string]int32{"requests": 1, "shipments": 1, "orders": 1, "audit-log": 1, "dead": 1}
}

// stampsOf returns the decoded clocks of the committed records of topic.
func stampsOf(t *testing.T, fake *fakeKafka, topic string) []causal.Clock {
	t.Helper()
	var out []causal.Clock
	for _, m := range fake.outputs(topic) {
		for _, h := range m.Headers {
			if h.Key == causal.HeaderKey {
				c, err := causal.DecodeClock(h.Value)
				require.NoError(t, err)
				out = append(out, c)
			}
		}
	}
	return out
}

// A claim entering the topology that names no record (beyond the end of
// its partition, or on a topic that does not exist) is bad input of the
// record that carries it, caught by the first task that receives it and
// named there; it never reaches a stamp, so no task downstream waits on it.
func TestImpossibleClaimsAreCaughtWhereTheyEnter(t *testing.T) {
	orders0 := causal.Channel{Topic: "orders"}
	requests0 := causal.Channel{Topic: "requests"}
	nosuch := causal.Channel{Topic: "nosuchtopic"}
	run := func(t *testing.T, check bool, opts ...framework.ProcessorOpt) (*StreamThread, *fakeKafka) {
		topo, counts := shippingTopology(t, opts...)
		fake := newFakeKafka(t)
		w := newFakeWorker(t, fake, topo, counts, func(c *Config) { c.CheckClaims = check })
		fake.send(orders0, "o1")
		fake.send(requests0, "r-ok", causal.Entry{Channel: orders0, Offset: 0})
		fake.send(requests0, "r-bogus", causal.Entry{Channel: orders0, Offset: 1_000_000_000})
		fake.send(requests0, "r-nosuch", causal.Entry{Channel: nosuch, Offset: 5})
		fake.send(requests0, "r-after", causal.Entry{Channel: orders0, Offset: 0})
		for range 2 {
			drainAndCommit(t, w)
		}
		return w, fake
	}
	noImpossibleClaims := func(t *testing.T, fake *fakeKafka) {
		t.Helper()
		for _, c := range stampsOf(t, fake, "shipments") {
			off, _ := c.Get(orders0)
			assert.Less(t, off, int64(1_000_000_000), "a bogus claim reached a stamp: %s", c)
			_, ok := c.Get(nosuch)
			assert.False(t, ok, "a claim on a missing topic reached a stamp: %s", c)
		}
	}

	t.Run("fail task", func(t *testing.T) {
		w, fake := run(t, true)
		shipping := taskObject(t, w, "shipping/0")
		require.Equal(t, StateFailed, shipping.State())
		assert.ErrorContains(t, shipping.Err(), "requests/0@1 claims orders/0 up to offset 1000000000, which can never be met: orders/0 ends at offset 0")
		rec, ok := taskmgr.FailedRecord(shipping.Err())
		require.True(t, ok)
		assert.Equal(t, causal.Entry{Channel: requests0, Offset: 1}, rec, "the error names the record that brought the claim in")
		assert.Equal(t, []string{"r-ok"}, values(fake.outputs("shipments")))
		assert.Equal(t, StateRunning, taskObject(t, w, "audit/0").State())
		noImpossibleClaims(t, fake)
	})
	t.Run("dead letter", func(t *testing.T) {
		w, fake := run(t, true, framework.OnProcessingError(framework.DeadLetter))
		require.Equal(t, StateRunning, taskObject(t, w, "shipping/0").State())
		assert.Equal(t, []string{"r-ok", "r-after"}, values(fake.outputs("shipments")))
		dead := fake.outputs("dead")
		require.Len(t, dead, 2)
		assert.Equal(t, "r-bogus", string(dead[0].Value))
		assert.Contains(t, dead[1].Headers, framework.Header{Key: framework.HeaderDLQError,
			Value: []byte(`requests/0@2 claims nosuchtopic/0 up to offset 5, but topic "nosuchtopic" does not exist: the producer of that record stamped a claim on nothing`)})
		assert.ElementsMatch(t, []string{"o1", "r-ok", "r-after"}, values(fake.outputs("audit-log")), "audit is not wedged")
		noImpossibleClaims(t, fake)
		queries := fake.queries
		fake.send(requests0, "r-again", causal.Entry{Channel: orders0, Offset: 0})
		drainAndCommit(t, w)
		assert.Equal(t, queries, fake.queries, "a claim below a known end costs no broker request")
	})
	t.Run("unchecked, the bogus claim reaches the stamps", func(t *testing.T) {
		_, fake := run(t, false)
		var saw bool
		for _, c := range stampsOf(t, fake, "shipments") {
			off, _ := c.Get(orders0)
			saw = saw || off == 1_000_000_000
		}
		assert.True(t, saw, "the checker's negative control: without it the claim propagates")
	})
}
