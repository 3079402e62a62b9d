package taskmgr

import (
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/task"
)

// recordingTransaction records what a commit wrote, refuses the outputs of
// the tasks in unsound, and fails its begin or commit when told to.
type recordingTransaction struct {
	skipBegin bool
	unsound   map[string]bool
	commitErr error
	sent      []string
	written   []string
	offsets   map[causal.Channel]int64
}

func (tx *recordingTransaction) Begin(dirty bool) (bool, error) { return dirty && !tx.skipBegin, nil }

func (tx *recordingTransaction) SendOutputs(t *Task) (bool, error) {
	tx.sent = append(tx.sent, t.ID())
	return !tx.unsound[t.ID()], nil
}

func (tx *recordingTransaction) WriteState(t *Task, snap task.Snapshot) ([]byte, bool, error) {
	tx.written = append(tx.written, t.ID())
	return nil, true, nil
}

func (tx *recordingTransaction) Commit(offsets map[causal.Channel]int64) error {
	tx.offsets = offsets
	return tx.commitErr
}

// The one commit path: every task's outputs go out, a task that failed on
// one keeps its share (state and offsets) out, and nothing counts as
// committed until the transaction has committed.
func TestCommitLeavesOutTheShareOfATaskThatFailedOnAnOutput(t *testing.T) {
	topo, err := framework.NewBuilder("t").Processor("p", func() framework.Processor {
		return framework.ProcessorFunc(func(framework.Context, framework.Record) error { return nil })
	}, framework.From("in")).Build()
	require.NoError(t, err)
	in0, in1 := causal.Channel{Topic: "in", Partition: 0}, causal.Channel{Topic: "in", Partition: 1}
	setUp := func(t *testing.T) (*Manager, []*Task) {
		m, err := New(Config{Topology: topo, Partitions: map[string]int32{"in": 2}, Offsets: groupAt{}})
		require.NoError(t, err)
		ts := m.Create([]causal.Channel{in0, in1})
		require.NoError(t, m.Build(ts, nil))
		for _, ch := range []causal.Channel{in0, in1} {
			for off := range int64(3) {
				m.Deliver(m.Route(ch), framework.Record{Topic: ch.Topic, Partition: ch.Partition, Offset: off})
			}
		}
		return m, ts
	}
	t.Run("one task refused", func(t *testing.T) {
		m, ts := setUp(t)
		tx := &recordingTransaction{unsound: map[string]bool{"p/1": true}}
		committed, err := m.Commit(tx)
		require.NoError(t, err)
		assert.True(t, committed)
		assert.Equal(t, []string{"p/0", "p/1"}, tx.sent)
		assert.Equal(t, []string{"p/0"}, tx.written)
		assert.Equal(t, map[causal.Channel]int64{in0: 3, in1: 0}, tx.offsets)
		assert.Equal(t, int64(3), ts[0].Committed()["in"])
		assert.Equal(t, int64(0), ts[1].Committed()["in"])
	})
	t.Run("the commit fails", func(t *testing.T) {
		m, ts := setUp(t)
		tx := &recordingTransaction{commitErr: errors.New("fenced")}
		committed, err := m.Commit(tx)
		assert.ErrorContains(t, err, "fenced")
		assert.False(t, committed)
		assert.Equal(t, int64(0), ts[0].Committed()["in"], "nothing counts as committed")
	})
	t.Run("nothing to begin", func(t *testing.T) {
		m, _ := setUp(t)
		tx := &recordingTransaction{skipBegin: true}
		committed, err := m.Commit(tx)
		require.NoError(t, err)
		assert.False(t, committed)
		assert.Empty(t, tx.sent)
		assert.Nil(t, tx.offsets)
	})
}

// A record dropped on purpose counts once its drop is committed: an
// aborted transaction's drops happen again when the rebuilt task reads
// the records again, and counting them at the drop counted them twice.
func TestDropsCountOnceCommitted(t *testing.T) {
	topo, err := framework.NewBuilder("t").Processor("p", func() framework.Processor {
		return framework.ProcessorFunc(func(ctx framework.Context, rec framework.Record) error {
			ctx.Report(framework.DropEvent{Reason: "unmatched", Record: rec})
			return nil
		})
	}, framework.From("in")).Build()
	require.NoError(t, err)
	in0 := causal.Channel{Topic: "in"}
	metrics := unregisteredMetrics()
	m, err := New(Config{Topology: topo, Partitions: map[string]int32{"in": 1}, Offsets: groupAt{}, Metrics: metrics})
	require.NoError(t, err)
	ts := m.Create([]causal.Channel{in0})
	require.NoError(t, m.Build(ts, nil))
	dropped := func() float64 { return testutil.ToFloat64(metrics.Dropped.WithLabelValues("p/0", "unmatched")) }
	deliver := func(from, to int64) {
		for off := from; off < to; off++ {
			m.Deliver(m.Route(in0), framework.Record{Topic: "in", Offset: off})
		}
	}

	deliver(0, 2)
	assert.Zero(t, dropped(), "nothing counts before the commit")
	_, err = m.Commit(&recordingTransaction{commitErr: errors.New("aborted")})
	require.Error(t, err)
	rebuild := m.Aborted()
	require.Len(t, rebuild, 1)
	_, err = m.Rebuild(rebuild, nil)
	require.NoError(t, err)
	assert.Zero(t, dropped(), "an aborted transaction's drops do not count")

	deliver(0, 3) // read again, and one more
	committed, err := m.Commit(&recordingTransaction{})
	require.NoError(t, err)
	require.True(t, committed)
	assert.Equal(t, 3.0, dropped(), "each record dropped counts once")
}
