package upstream

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
)

func TestPlanUpstream(t *testing.T) {
	pass := func() framework.Processor {
		return framework.ProcessorFunc(func(framework.Context, framework.Record) error { return nil })
	}
	tests := []struct {
		name   string
		build  func(b *framework.Builder) *framework.Builder
		via    map[string][]string
		cyclic bool
	}{{
		name: "the store's own inputs only",
		build: func(b *framework.Builder) *framework.Builder {
			return b.Processor("store", pass, framework.From("a", "b"))
		},
		via: map[string][]string{},
	}, {
		name: "two hops, and a branch that leads elsewhere",
		build: func(b *framework.Builder) *framework.Builder {
			return b.Processor("first", pass, framework.From("lines"), framework.To("mid"), framework.To("elsewhere")).
				Processor("second", pass, framework.From("mid"), framework.To("words")).
				Processor("store", pass, framework.From("words")).
				Processor("other", pass, framework.From("elsewhere"), framework.To("sink"))
		},
		via: map[string][]string{"lines": {"mid"}, "mid": {"words"}},
	}, {
		name: "an input read by the store and by a processor before it",
		build: func(b *framework.Builder) *framework.Builder {
			return b.Processor("enrich", pass, framework.From("orders"), framework.To("enriched")).
				Processor("store", pass, framework.From("orders", "enriched"))
		},
		via: map[string][]string{"orders": {"enriched"}},
	}, {
		name: "a cycle before the store",
		build: func(b *framework.Builder) *framework.Builder {
			return b.AllowCycles().
				Processor("ping", pass, framework.From("a"), framework.To("b")).
				Processor("pong", pass, framework.From("b"), framework.To("a")).
				Processor("store", pass, framework.From("b"))
		},
		via:    map[string][]string{"a": {"b"}, "b": {"a"}},
		cyclic: true,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			topo, err := tt.build(framework.NewBuilder("plan")).Build()
			require.NoError(t, err)
			plan := NewPlan(topo, "store")
			assert.Equal(t, tt.via, plan.via)
			assert.Equal(t, tt.cyclic, plan.cyclic)
		})
	}
}

// fixedCluster answers with fixed committed offsets and ends.
type fixedCluster struct {
	committed, ends map[causal.Channel]int64
}

func (c fixedCluster) GroupCommitted(_ context.Context, chs []causal.Channel) (map[causal.Channel]int64, error) {
	out := map[causal.Channel]int64{}
	for _, ch := range chs {
		if off, ok := c.committed[ch]; ok {
			out[ch] = off
		}
	}
	return out, nil
}

func (c fixedCluster) Ends(_ context.Context, chs []causal.Channel) (map[causal.Channel]int64, error) {
	out := map[causal.Channel]int64{}
	for _, ch := range chs {
		out[ch] = c.ends[ch]
	}
	return out, nil
}

// A claim two processors up becomes, once committed there, a claim on the
// last record of each partition of the output that leads to the store;
// left uncommitted, it is given up at the deadline.
func TestFollowTurnsClaimsUpstreamIntoClaimsOnTheStoresInputs(t *testing.T) {
	pass := func() framework.Processor {
		return framework.ProcessorFunc(func(framework.Context, framework.Record) error { return nil })
	}
	topo, err := framework.NewBuilder("f").
		Processor("split", pass, framework.From("lines"), framework.To("words")).
		Processor("store", pass, framework.From("words")).Build()
	require.NoError(t, err)
	plan := NewPlan(topo, "store")
	lines0 := causal.Channel{Topic: "lines", Partition: 0}
	words0, words1 := causal.Channel{Topic: "words", Partition: 0}, causal.Channel{Topic: "words", Partition: 1}
	after, err := causal.NewClock(causal.Entry{Channel: lines0, Offset: 3}, causal.Entry{Channel: words1, Offset: 2}, causal.Entry{Channel: causal.Channel{Topic: "elsewhere"}, Offset: 8})
	require.NoError(t, err)
	direct, further, err := plan.Direct(after)
	require.NoError(t, err)
	assert.True(t, further)
	assert.Equal(t, map[causal.Channel]int64{words1: 2}, maps.Collect(direct.All()), "the claim on an input kept, the one elsewhere dropped")

	partitions := map[string]int32{"lines": 1, "words": 2}
	committed := fixedCluster{committed: map[causal.Channel]int64{lines0: 4}, ends: map[causal.Channel]int64{words0: 10, words1: 1}}
	got, err := NewView(committed, partitions, nil, nil).Follow(context.Background(), plan, after, time.Now().Add(time.Minute))
	require.NoError(t, err)
	assert.Equal(t, map[causal.Channel]int64{words0: 9, words1: 2}, maps.Collect(got.All()))

	now := time.Unix(1_700_000_000, 0)
	slept := 0
	lagging := fixedCluster{committed: map[causal.Channel]int64{lines0: 3}}
	view := NewView(lagging, partitions, func() time.Time { return now }, func(context.Context, time.Duration) error {
		slept++
		now = now.Add(50 * time.Millisecond)
		return nil
	})
	_, err = view.Follow(context.Background(), plan, after, now.Add(time.Second))
	assert.ErrorIs(t, err, ErrNotCommitted)
	assert.Greater(t, slept, 3, "it looked again until the deadline")
}
