package task_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/store"
	"github.com/causeway-stream/causeway/framework/task"
)

// policyTask builds a task of a processor that emits "partial" and then
// fails with boom on values "bad", and forwards the others; opts set its
// error policies.
func policyTask(t *testing.T, obs task.Observer, opts ...framework.ProcessorOpt) *task.Task {
	t.Helper()
	boom := errors.New("boom")
	proc := func() framework.Processor {
		return framework.ProcessorFunc(func(ctx framework.Context, rec framework.Record) error {
			if string(rec.Value) == "bad" {
				if err := ctx.Forward(framework.Record{Value: []byte("partial")}); err != nil {
					return err
				}
				return boom
			}
			return ctx.Forward(framework.Record{Key: rec.Key, Value: rec.Value})
		})
	}
	topo, err := framework.NewBuilder("t").
		Processor("p", proc, append([]framework.ProcessorOpt{framework.From("in"), framework.To("out")}, opts...)...).
		DeadLetterTopic("dlq").Build()
	require.NoError(t, err)
	tk, err := task.New(task.Config{Topology: topo, Processor: "p",
		OutputPartitions: func(string) (int32, error) { return 1, nil }, Observer: obs})
	require.NoError(t, err)
	require.NoError(t, tk.Seed("in", 0))
	require.NoError(t, tk.Start())
	return tk
}

func header(t *testing.T, rec framework.Record, key string) string {
	t.Helper()
	v, ok := rec.Header(key)
	require.True(t, ok, "header %s", key)
	return string(v)
}

// An error a processor returns goes through its processing error policy.
func TestProcessingErrorPolicies(t *testing.T) {
	tests := []struct {
		name       string
		give       []framework.ProcessorOpt
		wantFail   bool
		wantTopics []string // of the outputs after "bad" then "ok"
		wantReason string
	}{
		{name: "default fails the task", wantFail: true},
		{name: "fail task", give: []framework.ProcessorOpt{framework.OnProcessingError(framework.FailTask)}, wantFail: true},
		{name: "log and skip", give: []framework.ProcessorOpt{framework.OnProcessingError(framework.LogAndSkip)},
			wantTopics: []string{"out"}, wantReason: "skipped"},
		{name: "dead letter", give: []framework.ProcessorOpt{framework.OnProcessingError(framework.DeadLetter)},
			wantTopics: []string{"dlq", "out"}, wantReason: "dead-letter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obs := &recorder{}
			tk := policyTask(t, obs, tt.give...)
			err := tk.Receive(in(0, "bad"))
			if tt.wantFail {
				require.Error(t, err)
				assert.Contains(t, err.Error(), "in/0@0")
				assert.True(t, tk.Broken())
				return
			}
			require.NoError(t, err)
			require.NoError(t, tk.Receive(in(1, "ok")))
			outs := tk.TakeOutputs()
			var topics []string
			for _, o := range outs {
				topics = append(topics, o.Topic)
				assert.NotEqual(t, "partial", string(o.Record.Value), "outputs of the failed record are discarded")
			}
			assert.Equal(t, tt.wantTopics, topics)
			if outs[0].Topic == "dlq" {
				assert.Equal(t, framework.StageProcess, header(t, outs[0].Record, framework.HeaderDLQStage))
				assert.Equal(t, "boom", header(t, outs[0].Record, framework.HeaderDLQError))
				assert.Equal(t, "0", header(t, outs[0].Record, framework.HeaderDLQOffset))
				assert.Equal(t, "bad", string(outs[0].Record.Value))
			}
			require.Len(t, obs.events, 1)
			assert.Equal(t, tt.wantReason, obs.events[0].Reason)
			snap, err := tk.Snapshot()
			require.NoError(t, err)
			assert.EqualValues(t, 2, snap.Offsets[0].Offset, "the failed record counts as delivered")
		})
	}
}

// An output Kafka refuses goes through the production error policy, which
// knows the input record that emitted it.
func TestProductionErrorPolicies(t *testing.T) {
	refused := errors.New("message too large")
	tests := []struct {
		name      string
		give      framework.BadInputPolicy
		keepValue bool
		wantErr   bool
		wantDLQ   bool
	}{
		{name: "fail task (default)", give: framework.FailTask, wantErr: true},
		{name: "log and skip", give: framework.LogAndSkip},
		{name: "dead letter without the value", give: framework.DeadLetter, wantDLQ: true},
		{name: "dead letter with the value", give: framework.DeadLetter, keepValue: true, wantDLQ: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obs := &recorder{}
			tk := policyTask(t, obs, framework.OnProductionError(tt.give))
			require.NoError(t, tk.Receive(in(0, "a")))
			require.NoError(t, tk.Receive(in(1, "big")))
			outs := tk.TakeOutputs()
			require.Len(t, outs, 2)
			assert.EqualValues(t, 1, outs[1].From.Offset, "an output knows its input record")
			err := tk.ProductionError(outs[1], refused, tt.keepValue)
			if tt.wantErr {
				require.ErrorIs(t, err, refused)
				assert.Contains(t, err.Error(), "output to out emitted for input in/0@1")
				assert.True(t, tk.Broken(), "the refused output's input must not be committed")
				return
			}
			require.NoError(t, err)
			again := tk.TakeOutputs()
			if !tt.wantDLQ {
				assert.Empty(t, again)
				require.Len(t, obs.events, 1)
				assert.Equal(t, "skipped", obs.events[0].Reason)
				return
			}
			require.Len(t, again, 1)
			dl := again[0].Record
			assert.Equal(t, "dlq", again[0].Topic)
			assert.Equal(t, framework.StageProduce, header(t, dl, framework.HeaderDLQStage))
			assert.Equal(t, "out", header(t, dl, framework.HeaderDLQOutput))
			assert.Equal(t, "1", header(t, dl, framework.HeaderDLQOffset))
			if tt.keepValue {
				assert.Equal(t, "big", string(dl.Value))
			} else {
				assert.Nil(t, dl.Value)
			}
			snap, err := tk.Snapshot()
			require.NoError(t, err)
			assert.EqualValues(t, 2, snap.Offsets[0].Offset)
		})
	}
}

func TestDeadLetterPolicyNeedsATopic(t *testing.T) {
	_, err := framework.NewBuilder("t").Processor("p", numbers, framework.From("in"),
		framework.OnProductionError(framework.DeadLetter)).Build()
	assert.ErrorContains(t, err, "needs a dead-letter topic")
}

// Rebuild brings back what was committed: stores, the gate's resume
// point (records below it are replays), and stream time.
func TestRebuildFromCommitted(t *testing.T) {
	topo, err := framework.NewBuilder("t").Processor("p", func() framework.Processor {
		return framework.ProcessorFunc(func(ctx framework.Context, rec framework.Record) error {
			kv, err := ctx.KeyValueStore("seen")
			if err != nil {
				return err
			}
			return kv.Put(rec.Value, []byte(ctx.StreamTime().UTC().Format(time.RFC3339)))
		})
	}, framework.From("in"), framework.Stores(framework.KeyValueStore("seen"))).Build()
	require.NoError(t, err)
	at := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	tk, err := task.Rebuild(task.Config{Topology: topo, Processor: "p"}, task.Committed{
		Stores:     map[string][]store.Change{"seen": {{Key: []byte("old"), Value: []byte("x")}}},
		Checkpoint: &task.Checkpoint{StreamTime: at, Next: map[string]int64{"in": 5}},
	})
	require.NoError(t, err)
	require.NoError(t, tk.Receive(framework.Record{Topic: "in", Offset: 4, Value: []byte("replayed")}))
	require.NoError(t, tk.Receive(framework.Record{Topic: "in", Offset: 5, Value: []byte("new"), Timestamp: at.Add(-time.Hour)}))
	kv, ok := tk.KeyValueStore("seen")
	require.True(t, ok)
	for key, want := range map[string]string{"old": "x", "new": at.Format(time.RFC3339)} {
		got, found, err := kv.Get([]byte(key))
		require.NoError(t, err)
		require.True(t, found, key)
		assert.Equal(t, want, string(got), key)
	}
	_, found, err := kv.Get([]byte("replayed"))
	require.NoError(t, err)
	assert.False(t, found, "a record below the committed offset is a replay")
	_, err = task.Rebuild(task.Config{Topology: topo, Processor: "p"}, task.Committed{Stores: map[string][]store.Change{"nope": nil}})
	assert.ErrorIs(t, err, framework.ErrUnknownStore)
}
