package task_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework/task"
)

func TestCheckpointCodec(t *testing.T) {
	at := time.Unix(1_700_000_000, 123)
	tests := []struct {
		name string
		give task.Checkpoint
	}{
		{"with stream time", task.Checkpoint{Next: map[string]int64{"a": 3, "b": 0}, StreamTime: at, Gate: []byte{1, 2}}},
		{"without stream time", task.Checkpoint{Next: map[string]int64{"a": 1}, Gate: []byte{9}}},
		{"empty", task.Checkpoint{Next: map[string]int64{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := task.DecodeCheckpoint(tt.give.Encode())
			require.NoError(t, err)
			assert.Equal(t, tt.give.Next, got.Next)
			assert.True(t, tt.give.StreamTime.Equal(got.StreamTime), "stream time %v, want %v", got.StreamTime, tt.give.StreamTime)
			assert.Equal(t, string(tt.give.Gate), string(got.Gate))
		})
	}
	// A version 1 checkpoint, written before stream time was kept, still
	// reads: no stream time, and its gate bytes intact.
	v1 := []byte{1, 1, 1, 'a', 7, 0xAA}
	got, err := task.DecodeCheckpoint(v1)
	require.NoError(t, err)
	assert.Equal(t, map[string]int64{"a": 7}, got.Next)
	assert.True(t, got.StreamTime.IsZero())
	assert.Equal(t, []byte{0xAA}, got.Gate)
	for _, bad := range [][]byte{nil, {3}, {2, 1, 5, 'a'}, {2, 1, 1, 'a'}} {
		_, err = task.DecodeCheckpoint(bad)
		assert.ErrorIs(t, err, task.ErrBadCheckpoint, "%v", bad)
	}
}

// A snapshot's checkpoint carries its offsets by topic, its stream time
// and its gate.
func TestSnapshotCheckpoint(t *testing.T) {
	at := time.Unix(1_700_000_000, 0)
	snap := task.Snapshot{Offsets: []causal.Entry{{Channel: causal.Channel{Topic: "a"}, Offset: 4}, {Channel: causal.Channel{Topic: "b"}, Offset: 9}},
		Gate: []byte{7}, StreamTime: at}
	assert.Equal(t, task.Checkpoint{Next: map[string]int64{"a": 4, "b": 9}, Gate: []byte{7}, StreamTime: at}, snap.Checkpoint())
}
