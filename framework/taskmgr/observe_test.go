package taskmgr

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
)

// A task logs the first record without a key it skips, and counts every
// one; other reasons are logged each time.
func TestNullKeysAreLoggedOncePerTask(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	topo, err := framework.NewBuilder("t").Processor("p", func() framework.Processor {
		return framework.ProcessorFunc(func(framework.Context, framework.Record) error { return nil })
	}, framework.From("in")).Build()
	require.NoError(t, err)
	metrics := unregisteredMetrics()
	m, err := New(Config{Topology: topo, Partitions: map[string]int32{"in": 2}, Offsets: noOffsets{}, Log: zap.New(core), Metrics: metrics})
	require.NoError(t, err)
	ts := m.Create([]causal.Channel{{Topic: "in"}, {Topic: "in", Partition: 1}})
	a, b := m.observerOf(ts[0]), m.observerOf(ts[1])
	for range 3 {
		a.Dropped("p/0", framework.DropEvent{Reason: framework.DropNullKey})
	}
	b.Dropped("p/1", framework.DropEvent{Reason: framework.DropNullKey})
	a.Dropped("p/0", framework.DropEvent{Reason: "late"})
	a.Dropped("p/0", framework.DropEvent{Reason: "late"})

	warns := map[string]int{}
	for _, e := range logs.FilterLevelExact(zapcore.WarnLevel).All() {
		warns[e.ContextMap()["task"].(string)+" "+e.ContextMap()["reason"].(string)]++
	}
	assert.Equal(t, map[string]int{"p/0 null-key": 1, "p/1 null-key": 1, "p/0 late": 2}, warns)
	assert.Equal(t, 2, logs.FilterLevelExact(zapcore.DebugLevel).Len(), "the other null keys at debug level")
	assert.Zero(t, testutil.ToFloat64(metrics.Dropped.WithLabelValues("p/0", framework.DropNullKey)), "counted once committed")
	a.committed("p/0")
	assert.Equal(t, 3.0, testutil.ToFloat64(metrics.Dropped.WithLabelValues("p/0", framework.DropNullKey)), "every one counted")
}
