package taskmgr

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/store"
	"github.com/causeway-stream/causeway/framework/task"
)

type noOffsets struct{}

func (noOffsets) Committed([]causal.Channel) (map[causal.Channel]int64, error) {
	return map[causal.Channel]int64{}, nil
}
func (noOffsets) Watermarks(causal.Channel) (int64, int64, error) { return 0, 0, nil }
func (noOffsets) ClaimEnd(causal.Entry) (int64, error)            { return -1, nil }

func TestNewRefusesAnIncompleteConfig(t *testing.T) {
	topo, err := framework.NewBuilder("t").Processor("p", func() framework.Processor {
		return framework.ProcessorFunc(func(framework.Context, framework.Record) error { return nil })
	}, framework.From("in")).Build()
	require.NoError(t, err)
	full := Config{Topology: topo, Partitions: map[string]int32{"in": 1}, Offsets: noOffsets{}}
	for _, tc := range []struct {
		name   string
		change func(*Config)
		want   string
	}{
		{"complete", func(*Config) {}, ""},
		{"no topology", func(c *Config) { c.Topology = nil }, "no topology"},
		{"no partitions", func(c *Config) { c.Partitions = nil }, "no partition counts"},
		{"no offsets", func(c *Config) { c.Offsets = nil }, "no offsets"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := full
			tc.change(&cfg)
			_, err := New(cfg)
			if tc.want == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, tc.want)
		})
	}
}

func TestRequestServesOnlyAFailedTask(t *testing.T) {
	topo, err := framework.NewBuilder("t").Processor("p", func() framework.Processor {
		return framework.ProcessorFunc(func(framework.Context, framework.Record) error { return nil })
	}, framework.From("in")).Build()
	require.NoError(t, err)
	m, err := New(Config{Topology: topo, Partitions: map[string]int32{"in": 3}, Offsets: noOffsets{}})
	require.NoError(t, err)
	ts := m.Create([]causal.Channel{{Topic: "in", Partition: 0}, {Topic: "in", Partition: 1}, {Topic: "in", Partition: 2}})
	require.Len(t, ts, 3)
	require.NoError(t, m.Build(ts, nil))
	poisoned := &UnsatisfiableClaimError{Record: causal.Entry{Channel: causal.Channel{Topic: "in", Partition: 1}, Offset: 7}}
	m.Fail(ts[1], poisoned)
	m.Fail(ts[2], errors.New("offset out of range"))
	for _, tc := range []struct {
		name string
		id   string
		skip bool
		want error
	}{
		{"restart a running task", "p/0", false, ErrNotFailed},
		{"skip on a running task", "p/0", true, ErrNotFailed},
		{"unknown task", "p/9", false, ErrNoTask},
		{"restart a failed task", "p/1", false, nil},
		{"skip the record a failure names", "p/1", true, nil},
		{"skip a failure naming no record", "p/2", true, ErrNoRecord},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, skip, err := m.Request(tc.id, tc.skip)
			if tc.want != nil {
				assert.ErrorIs(t, err, tc.want)
				assert.Nil(t, got)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.id, got.id)
			if tc.skip {
				assert.Equal(t, poisoned.Record, skip.Record)
			}
		})
	}
}

// groupAt answers with fixed committed offsets, and watermarks [0, 100).
type groupAt map[causal.Channel]int64

func (g groupAt) Committed([]causal.Channel) (map[causal.Channel]int64, error) { return g, nil }
func (groupAt) Watermarks(causal.Channel) (int64, int64, error)                { return 0, 100, nil }
func (groupAt) ClaimEnd(causal.Entry) (int64, error)                           { return 100, nil }

// A task restoring beside a running reader of the same channel receives
// nothing, keeps the group from committing past what it has not read, and
// once finished reads the channel again from where it resumes while the
// other reader skips what it had.
func TestARestoringTaskHoldsTheGroupAtItsChannels(t *testing.T) {
	pass := func() framework.Processor {
		return framework.ProcessorFunc(func(framework.Context, framework.Record) error { return nil })
	}
	topo, err := framework.NewBuilder("t").
		Processor("p", pass, framework.From("in")).
		Processor("q", pass, framework.From("in")).Build()
	require.NoError(t, err)
	in := causal.Channel{Topic: "in"}
	m, err := New(Config{Topology: topo, Partitions: map[string]int32{"in": 1}, Offsets: groupAt{in: 5}})
	require.NoError(t, err)
	ts := m.Create([]causal.Channel{in})
	require.Len(t, ts, 2)
	p, q := ts[0], ts[1]
	require.NoError(t, m.Build([]*Task{p}, nil))
	cold, err := m.Prepare([]*Task{q})
	require.NoError(t, err)
	require.Equal(t, []*Task{q}, cold)
	assert.Equal(t, Restoring, q.state)
	m.Started(m.Starts(m.Tasks()))

	r := m.Route(in)
	for off := int64(5); off < 10; off++ {
		assert.False(t, m.Deliver(r, framework.Record{Topic: "in", Offset: off, Value: []byte("v")}))
	}
	work, _ := m.Pending()
	require.Len(t, work, 1, "only the running task commits")
	fresh := map[*Task]task.Snapshot{work[0].Task: work[0].Snap}
	assert.Equal(t, int64(10), work[0].Snap.Offsets[0].Offset, "the running task read on")
	assert.Equal(t, map[causal.Channel]int64{in: 5}, m.GroupOffsets(fresh), "the group moved past what the restoring task has not read")
	m.Committed(fresh, nil)

	require.NoError(t, m.Finish(cold, nil))
	assert.Equal(t, Running, q.state)
	assert.Equal(t, map[causal.Channel]int64{in: 5}, m.Rewind(cold))
	for off := int64(5); off < 12; off++ {
		m.Deliver(r, framework.Record{Topic: "in", Offset: off, Value: []byte("v")})
	}
	for _, tt := range []*Task{p, q} {
		snap, err := tt.task.Snapshot()
		require.NoError(t, err)
		assert.Equal(t, int64(12), snap.Offsets[0].Offset, tt.id)
		assert.Equal(t, Running, tt.state, tt.id)
	}
}

// Build builds a task without stores from the committed state it is
// given: its stores hold the changes and it resumes from the checkpoint's
// offsets. Prepare and Finish without Opened build on stores in memory.
func TestBuildRestoresWhatItIsGiven(t *testing.T) {
	topo, err := framework.NewBuilder("t").Processor("p", func() framework.Processor {
		return framework.ProcessorFunc(func(framework.Context, framework.Record) error { return nil })
	}, framework.From("in"), framework.Stores(framework.KeyValueStore("s"))).Build()
	require.NoError(t, err)
	m, err := New(Config{Topology: topo, Partitions: map[string]int32{"in": 2}, Offsets: groupAt{}})
	require.NoError(t, err)
	ts := m.Create([]causal.Channel{{Topic: "in"}, {Topic: "in", Partition: 1}})
	require.Len(t, ts, 2)
	restored := map[string]*Restored{ts[0].id: {
		Stores:     map[string][]store.Change{"s": {{Key: []byte("k"), Value: []byte("v")}}},
		Checkpoint: &task.Checkpoint{Next: map[string]int64{"in": 7}},
	}}
	require.NoError(t, m.Build(ts[:1], restored))
	assert.Equal(t, Running, ts[0].state)
	assert.Equal(t, int64(7), ts[0].committed["in"])
	kv, err := ts[0].stores.Store("s")
	require.NoError(t, err)
	v, ok, err := kv.Get([]byte("k"))
	require.NoError(t, err)
	require.True(t, ok, "the restored change is in the store")
	assert.Equal(t, []byte("v"), v)

	cold, err := m.Prepare(ts[1:])
	require.NoError(t, err)
	require.Equal(t, ts[1:], cold)
	assert.Nil(t, ts[1].stores, "a prepared task has no stores until its owner opens them")
	require.NoError(t, m.Finish(cold, nil))
	assert.Equal(t, Running, ts[1].state)
	assert.NotNil(t, ts[1].stores)
}

// A worker rebalancing cooperatively adds and removes tasks while the
// others run: Create makes only the tasks it has not got, and Close
// leaves the routes of the tasks it keeps, with where their channels are
// read to.
func TestTasksComeAndGoWhileTheOthersRun(t *testing.T) {
	topo, err := framework.NewBuilder("t").Processor("p", func() framework.Processor {
		return framework.ProcessorFunc(func(framework.Context, framework.Record) error { return nil })
	}, framework.From("a", "b")).Build()
	require.NoError(t, err)
	m, err := New(Config{Topology: topo, Partitions: map[string]int32{"a": 3, "b": 3}, Offsets: noOffsets{}})
	require.NoError(t, err)
	ch := func(topic string, p int32) causal.Channel { return causal.Channel{Topic: topic, Partition: p} }
	first := m.Create([]causal.Channel{ch("a", 0), ch("b", 0), ch("a", 1), ch("b", 1)})
	require.Len(t, first, 2)
	require.NoError(t, m.Build(first, nil))
	m.Started(map[causal.Channel]int64{ch("a", 0): 5, ch("b", 0): 7, ch("a", 1): 0, ch("b", 1): 0})

	added := m.Create([]causal.Channel{ch("a", 0), ch("b", 0), ch("a", 1), ch("b", 1), ch("a", 2), ch("b", 2)})
	require.Len(t, added, 1, "only the task not there yet")
	assert.Equal(t, "p/2", added[0].ID())
	require.NoError(t, m.Build(added, nil))

	gone := m.Reading([]causal.Channel{ch("a", 1), ch("b", 1)})
	require.Len(t, gone, 1)
	assert.Equal(t, "p/1", gone[0].ID())
	m.Close(gone)
	var ids []string
	for _, tk := range m.Tasks() {
		ids = append(ids, tk.ID())
	}
	assert.Equal(t, []string{"p/0", "p/2"}, ids)
	assert.Nil(t, m.Route(ch("a", 1)), "no route of a channel no task reads")
	require.NotNil(t, m.Route(ch("b", 0)))
	assert.Equal(t, int64(6), m.Route(ch("b", 0)).Position(), "a kept channel is read to where it was")
	assert.Nil(t, gone[0].Task(), "the task closed")
}
