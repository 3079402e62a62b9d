package taskmgr

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
)

type noOffsets struct{}

func (noOffsets) Committed([]causal.Channel) (map[causal.Channel]int64, error) {
	return map[causal.Channel]int64{}, nil
}
func (noOffsets) Watermarks(causal.Channel) (int64, int64, error) { return 0, 0, nil }

func nothingRestored([]*Task) (map[string]*Restored, error) { return nil, nil }

func TestNewRefusesAnIncompleteConfig(t *testing.T) {
	topo, err := framework.NewBuilder("t").Processor("p", func() framework.Processor {
		return framework.ProcessorFunc(func(framework.Context, framework.Record) error { return nil })
	}, framework.From("in")).Build()
	require.NoError(t, err)
	full := Config{Topology: topo, Partitions: map[string]int32{"in": 1}, Offsets: noOffsets{}, Restore: nothingRestored}
	for _, tc := range []struct {
		name   string
		change func(*Config)
		want   string
	}{
		{"complete", func(*Config) {}, ""},
		{"no topology", func(c *Config) { c.Topology = nil }, "no topology"},
		{"no partitions", func(c *Config) { c.Partitions = nil }, "no partition counts"},
		{"no offsets", func(c *Config) { c.Offsets = nil }, "no offsets"},
		{"no restore", func(c *Config) { c.Restore = nil }, "no restore"},
		{"claims without ends", func(c *Config) { c.CheckClaims = true }, "ClaimEnd"},
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
	m, err := New(Config{Topology: topo, Partitions: map[string]int32{"in": 3}, Offsets: noOffsets{}, Restore: nothingRestored})
	require.NoError(t, err)
	ts := m.Create([]causal.Channel{{Topic: "in", Partition: 0}, {Topic: "in", Partition: 1}, {Topic: "in", Partition: 2}})
	require.Len(t, ts, 3)
	require.NoError(t, m.Build(ts))
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
			assert.Equal(t, tc.id, got.ID)
			if tc.skip {
				assert.Equal(t, poisoned.Record, skip.Record)
			}
		})
	}
}
