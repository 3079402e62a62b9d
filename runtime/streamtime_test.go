package runtime

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/serde"
	"github.com/causeway-stream/causeway/framework/taskmgr"
	"github.com/causeway-stream/causeway/operators"
)

// Stream time is part of the task's checkpoint: a record that was already
// late before a rebuild (restart, abort, reassignment) is still dropped as
// late after it, instead of reopening a closed window (KAFKA-7994).
func TestLateRecordAfterRebuildIsDroppedAsLate(t *testing.T) {
	topo, err := framework.NewBuilder("windows").Processor("count",
		operators.WindowedAggregate(serde.Codec[string, string]{Key: serde.String(), Value: serde.String()}, serde.Int64(), "counts",
			operators.Tumbling(time.Minute, 0), func() int64 { return 0 }, func(string, string, int64) (int64, error) { return 1, nil }),
		framework.From("clicks"), framework.To("counts"), framework.Stores(framework.WindowStore("counts", time.Hour))).Build()
	require.NoError(t, err)
	fake := newFakeKafka(t)
	w := newFakeWorker(t, fake, topo, map[string]int32{"clicks": 1, "counts": 1})
	clicks := causal.Channel{Topic: "clicks"}
	base := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	fake.sendAt(clicks, "a", base.Add(30*time.Second))
	fake.sendAt(clicks, "b", base.Add(5*time.Minute)) // closes the 10:00 window
	drainAndCommit(t, w)
	require.Len(t, fake.outputs("counts"), 2)

	rt := taskObject(t, w, "count/0")
	w.rebuild([]*taskmgr.Task{rt})
	require.NoError(t, w.fate.Fatal())
	require.Equal(t, StateRunning, rt.State())
	fake.sendAt(clicks, "late", base.Add(40*time.Second))
	drainAndCommit(t, w)
	assert.Len(t, fake.outputs("counts"), 2, "the late record reopened a closed window after the rebuild")
	assert.InDelta(t, 1, testutil.ToFloat64(w.metrics.Dropped.WithLabelValues("count/0", "late")), 0, "the late record is counted as dropped")
}
