package task_test

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/serde"
	"github.com/causeway-stream/causeway/framework/task"
)

type recorder struct{ events []framework.DropEvent }

func (r *recorder) Dropped(_ string, ev framework.DropEvent) { r.events = append(r.events, ev) }
func (r *recorder) Delivered(string, time.Duration)          {}

// numbers forwards values that parse as int64 varints, doubled.
func numbers() framework.Processor {
	return framework.ProcessorFunc(func(ctx framework.Context, rec framework.Record) error {
		if err := ctx.Forward(framework.Record{Value: []byte("emitted before decoding")}); err != nil {
			return err
		}
		n, err := strconv.ParseInt(string(rec.Value), 10, 64)
		if err != nil {
			return framework.ValueError(rec, err)
		}
		return ctx.Forward(framework.Record{Key: rec.Key, Value: []byte(strconv.FormatInt(2*n, 10))})
	})
}

func newTask(t *testing.T, policy framework.BadInputPolicy, obs task.Observer) *task.Task {
	t.Helper()
	b := framework.NewBuilder("t").Processor("double", numbers, framework.From("in"), framework.To("out"))
	if policy != framework.FailTask {
		b.OnBadInput(policy, "dlq")
	}
	topo, err := b.Build()
	require.NoError(t, err)
	tk, err := task.New(task.Config{Topology: topo, Processor: "double", Partition: 0,
		OutputPartitions: func(string) (int32, error) { return 1, nil }, Observer: obs})
	require.NoError(t, err)
	require.NoError(t, tk.Seed("in", 0))
	require.NoError(t, tk.Start())
	return tk
}

func in(off int64, v string) framework.Record {
	return framework.Record{Topic: "in", Offset: off, Value: []byte(v), Headers: []framework.Header{{Key: "trace", Value: []byte("t-1")}}}
}

func TestBadInputPolicies(t *testing.T) {
	t.Run("fail task (default)", func(t *testing.T) {
		obs := &recorder{}
		tk := newTask(t, framework.FailTask, obs)
		err := tk.Receive(in(0, "x"))
		require.ErrorIs(t, err, framework.ErrDeserialize)
		assert.Contains(t, err.Error(), "in/0 at offset 0")
		assert.ErrorIs(t, tk.Receive(in(1, "1")), framework.ErrDeserialize, "the failure is sticky")
		assert.True(t, tk.Broken())
		_, err = tk.Snapshot()
		assert.ErrorIs(t, err, framework.ErrDeserialize, "a failed task has nothing to commit")
		assert.Empty(t, obs.events)
	})
	t.Run("log and skip", func(t *testing.T) {
		obs := &recorder{}
		tk := newTask(t, framework.LogAndSkip, obs)
		require.NoError(t, tk.Receive(in(0, "x")))
		require.NoError(t, tk.Receive(in(1, "21")))
		outs := tk.TakeOutputs()
		var values []string
		for _, o := range outs {
			values = append(values, string(o.Record.Value))
		}
		assert.Equal(t, []string{"emitted before decoding", "42"}, values, "outputs of the bad record are discarded")
		require.Len(t, obs.events, 1)
		assert.Equal(t, "skipped", obs.events[0].Reason)
		snap, err := tk.Snapshot()
		require.NoError(t, err)
		assert.EqualValues(t, 2, snap.Offsets[0].Offset, "a skipped record counts as delivered")
	})
	t.Run("dead letter", func(t *testing.T) {
		obs := &recorder{}
		tk := newTask(t, framework.DeadLetter, obs)
		require.NoError(t, tk.Receive(in(0, "x")))
		outs := tk.TakeOutputs()
		require.Len(t, outs, 1)
		dl := outs[0]
		assert.Equal(t, "dlq", dl.Topic)
		assert.Equal(t, "x", string(dl.Record.Value))
		for k, want := range map[string]string{
			framework.HeaderDLQTopic: "in", framework.HeaderDLQPartition: "0", framework.HeaderDLQOffset: "0", "trace": "t-1",
		} {
			got, ok := dl.Record.Header(k)
			require.True(t, ok, k)
			assert.Equal(t, want, string(got), k)
		}
		msg, _ := dl.Record.Header(framework.HeaderDLQError)
		assert.Contains(t, string(msg), "invalid syntax")
		_, stamped := dl.Record.Header(causal.HeaderKey)
		assert.False(t, stamped, "a dead letter keeps the record's own clock header, and this one had none")
		require.Len(t, obs.events, 1)
		assert.Equal(t, "dead-letter", obs.events[0].Reason)
	})
}

// A processor error that is not about bad input always fails the task.
func TestProcessorErrorFailsTask(t *testing.T) {
	boom := errors.New("boom")
	topo, err := framework.NewBuilder("t").Processor("p", func() framework.Processor {
		return framework.ProcessorFunc(func(framework.Context, framework.Record) error { return boom })
	}, framework.From("in")).OnBadInput(framework.LogAndSkip, "").Build()
	require.NoError(t, err)
	tk, err := task.New(task.Config{Topology: topo, Processor: "p"})
	require.NoError(t, err)
	require.NoError(t, tk.Seed("in", 0))
	require.NoError(t, tk.Start())
	assert.ErrorIs(t, tk.Receive(in(0, "1")), boom)
	assert.ErrorIs(t, tk.Err(), boom)
}

func TestContextRejectsUndeclaredNames(t *testing.T) {
	var emitErr, kvErr, winErr error
	topo, err := framework.NewBuilder("t").Processor("p", func() framework.Processor {
		return framework.ProcessorFunc(func(ctx framework.Context, rec framework.Record) error {
			emitErr = ctx.Emit("nope", rec)
			_, kvErr = ctx.KeyValueStore("w")
			_, winErr = ctx.WindowStore("missing")
			return nil
		})
	}, framework.From("in"), framework.To("out"), framework.Stores(framework.WindowStore("w", time.Hour))).Build()
	require.NoError(t, err)
	tk, err := task.New(task.Config{Topology: topo, Processor: "p", OutputPartitions: func(string) (int32, error) { return 1, nil }})
	require.NoError(t, err)
	require.NoError(t, tk.Seed("in", 0))
	require.NoError(t, tk.Start())
	require.NoError(t, tk.Receive(in(0, "1")))
	assert.ErrorIs(t, emitErr, framework.ErrUnknownOutput)
	assert.ErrorIs(t, kvErr, framework.ErrUnknownStore, "a window store is not a key-value store")
	assert.ErrorIs(t, winErr, framework.ErrUnknownStore)
}

// Stream-time punctuation fires as record timestamps pass each interval.
func TestStreamTimePunctuation(t *testing.T) {
	var fired []time.Time
	topo, err := framework.NewBuilder("t").Processor("p", func() framework.Processor {
		return &streamTicker{fired: &fired}
	}, framework.From("in")).Build()
	require.NoError(t, err)
	tk, err := task.New(task.Config{Topology: topo, Processor: "p"})
	require.NoError(t, err)
	require.NoError(t, tk.Seed("in", 0))
	require.NoError(t, tk.Start())
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, sec := range []int{0, 30, 59, 61, 62, 200} {
		rec := in(int64(i), "1")
		rec.Timestamp = t0.Add(time.Duration(sec) * time.Second)
		require.NoError(t, tk.Receive(rec))
	}
	assert.Equal(t, []time.Time{t0.Add(61 * time.Second), t0.Add(200 * time.Second)}, fired)
}

type streamTicker struct{ fired *[]time.Time }

func (p *streamTicker) Init(framework.Context) error { return nil }
func (p *streamTicker) Close() error                 { return nil }
func (p *streamTicker) Process(ctx framework.Context, rec framework.Record) error {
	if rec.Offset == 0 {
		_, err := ctx.Schedule(time.Minute, framework.StreamTime, func(_ framework.Context, now time.Time) error {
			*p.fired = append(*p.fired, now)
			return nil
		})
		return err
	}
	return nil
}

// A corrupt clock header fails the task, naming channel and offset, under
// every bad-input policy but DeadLetter: skipping it would lose its claims
// with only a log line to show for it.
func TestCorruptClockFailsTask(t *testing.T) {
	tk := newTask(t, framework.LogAndSkip, &recorder{})
	rec := in(0, "1").WithHeader(causal.HeaderKey, []byte{9})
	err := tk.Receive(rec)
	require.ErrorIs(t, err, causal.ErrCorruptClock)
	assert.Contains(t, err.Error(), "in/0 at offset 0")
	assert.ErrorIs(t, tk.Status().Err, causal.ErrCorruptClock)
}

// Under DeadLetter a corrupt clock header sends its record to the
// dead-letter topic, taken in as claiming nothing, and the task goes on.
func TestCorruptClockUnderDeadLetter(t *testing.T) {
	obs := &recorder{}
	tk := newTask(t, framework.DeadLetter, obs)
	require.NoError(t, tk.Receive(in(0, "1").WithHeader(causal.HeaderKey, []byte{9})))
	require.NoError(t, tk.Receive(in(1, "2")))
	outs := tk.TakeOutputs()
	require.Len(t, outs, 3)
	assert.Equal(t, "dlq", outs[0].Topic)
	stage, _ := outs[0].Record.Header(framework.HeaderDLQStage)
	assert.Equal(t, framework.StageClock, string(stage))
	assert.Equal(t, "1", string(outs[0].Record.Value))
	clock, _ := outs[0].Record.Header(causal.HeaderKey)
	assert.Equal(t, []byte{9}, clock, "the dead letter keeps the header as it came")
	assert.Equal(t, "out", outs[2].Topic)
	assert.Equal(t, "4", string(outs[2].Record.Value))
	snap, err := tk.Snapshot()
	require.NoError(t, err)
	assert.EqualValues(t, 2, snap.Offsets[0].Offset)
}

// A record an operator skips is dead-lettered with the reason, even when
// its clock header is corrupt, and the records after it are processed.
func TestSkipMovesPastTheRecord(t *testing.T) {
	topo, err := framework.NewBuilder("t").Processor("double", numbers, framework.From("in"), framework.To("out")).Build()
	require.NoError(t, err)
	tk, err := task.New(task.Config{Topology: topo, Processor: "double", DeadLetterTopic: "dead",
		OutputPartitions: func(string) (int32, error) { return 1, nil },
		Skip:             []task.Skip{{Record: causal.Entry{Channel: causal.Channel{Topic: "in"}, Offset: 1}, Reason: "operator skipped it"}}})
	require.NoError(t, err)
	require.NoError(t, tk.Seed("in", 0))
	require.NoError(t, tk.Start())
	require.NoError(t, tk.Receive(in(0, "1")))
	require.NoError(t, tk.Receive(in(1, "x").WithHeader(causal.HeaderKey, []byte{9})))
	require.NoError(t, tk.Receive(in(2, "3")))
	var got []string
	for _, o := range tk.TakeOutputs() {
		got = append(got, o.Topic+":"+string(o.Record.Value))
	}
	assert.Equal(t, []string{"out:emitted before decoding", "out:2", "dead:x", "out:emitted before decoding", "out:6"}, got)
	_, err = task.New(task.Config{Topology: topo, Processor: "double", Skip: []task.Skip{{}},
		OutputPartitions: func(string) (int32, error) { return 1, nil }})
	assert.ErrorContains(t, err, "needs a dead-letter topic")
}

// A task that refused a corrupt record can still commit everything before
// it, and nothing of it.
func TestCorruptClockLeavesEarlierWorkCommittable(t *testing.T) {
	tk := newTask(t, framework.FailTask, &recorder{})
	require.NoError(t, tk.Receive(in(0, "1")))
	require.Error(t, tk.Receive(in(1, "2").WithHeader(causal.HeaderKey, []byte{9})))
	assert.False(t, tk.Broken(), "a refused record does not void the snapshot")
	snap, err := tk.Snapshot()
	require.NoError(t, err)
	assert.EqualValues(t, 1, snap.Offsets[0].Offset, "commit up to, not past, the corrupt record")
	assert.Len(t, tk.TakeOutputs(), 2, "the outputs of the record before it stay")
}

// Keys decide the output partition as Kafka's default partitioner does,
// unless the output keeps the task's partition; keyless records always stay
// on it.
func TestOutputPlacement(t *testing.T) {
	key := []byte("foobar")
	byKey := framework.PartitionFor(key, 7)
	const taskPartition = 3
	require.NotEqual(t, int32(taskPartition), byKey, "the test needs the two placements to differ")
	tests := []struct {
		name string
		opts []framework.OutputOpt
		key  []byte
		want int32
	}{
		{"keyed, default", nil, key, byKey},
		{"keyed, KeepPartition", []framework.OutputOpt{framework.KeepPartition()}, key, taskPartition},
		{"keyless, default", nil, nil, taskPartition},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			topo, err := framework.NewBuilder("t").Processor("p", func() framework.Processor {
				return framework.ProcessorFunc(func(ctx framework.Context, rec framework.Record) error { return ctx.Forward(rec) })
			}, framework.From("in"), framework.To("out", tt.opts...)).Build()
			require.NoError(t, err)
			tk, err := task.New(task.Config{Topology: topo, Processor: "p", Partition: taskPartition,
				OutputPartitions: func(string) (int32, error) { return 7, nil }})
			require.NoError(t, err)
			require.NoError(t, tk.Seed("in", 0))
			require.NoError(t, tk.Start())
			v, err := serde.String().Serialize("v")
			require.NoError(t, err)
			require.NoError(t, tk.Receive(framework.Record{Topic: "in", Partition: taskPartition, Key: tt.key, Value: v}))
			outs := tk.TakeOutputs()
			require.Len(t, outs, 1)
			assert.Equal(t, tt.want, outs[0].Partition)
		})
	}
}

// forwardingTask is a started task of a processor that forwards every
// record of topic in to topic out, of one partition.
func forwardingTask(t *testing.T) *task.Task {
	t.Helper()
	topo, err := framework.NewBuilder("t").Processor("p", func() framework.Processor {
		return framework.ProcessorFunc(func(ctx framework.Context, rec framework.Record) error { return ctx.Forward(rec) })
	}, framework.From("in"), framework.To("out")).Build()
	require.NoError(t, err)
	tk, err := task.New(task.Config{Topology: topo, Processor: "p", OutputPartitions: func(string) (int32, error) { return 1, nil }})
	require.NoError(t, err)
	require.NoError(t, tk.Seed("in", 0))
	require.NoError(t, tk.Start())
	return tk
}

// An output's stamp and header list stay as they were until ReleaseOutputs
// or ReuseCarved after the output was taken; from then on the next outputs
// are carved from the same memory, and carving them allocates nothing.
// ReleaseOutputs also lets go of the outputs handed out; ReuseCarved, called
// after every batch, leaves them.
func TestReleaseOutputsReusesOutputMemory(t *testing.T) {
	for _, tc := range []struct {
		name    string
		release func(*task.Task)
		// clears says whether release lets go of the outputs handed out.
		clears bool
	}{
		{"ReleaseOutputs", (*task.Task).ReleaseOutputs, true},
		{"ReuseCarved", (*task.Task).ReuseCarved, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testOutputMemoryReuse(t, tc.release, tc.clears)
		})
	}
}

func testOutputMemoryReuse(t *testing.T, release func(*task.Task), clears bool) {
	tk := forwardingTask(t)
	recs := make([]framework.Record, 5000)
	for i := range recs {
		recs[i] = in(int64(i), "v")
	}
	stampOf := func(o task.Output) []byte {
		for _, h := range o.Record.Headers {
			if h.Key == causal.HeaderKey {
				return h.Value
			}
		}
		t.Fatalf("output of %v has no stamp", o.From)
		return nil
	}
	// wantFrom checks that out's stamp claims exactly the record it came
	// from.
	wantFrom := func(out task.Output, off int64) {
		t.Helper()
		clock, err := causal.DecodeClock(stampOf(out))
		require.NoError(t, err)
		got, _ := clock.Get(causal.Channel{Topic: "in"})
		require.Equal(t, off, got, "the stamp of the output of in@%d", off)
	}
	take := func(off int64) task.Output {
		t.Helper()
		require.NoError(t, tk.Receive(recs[off]))
		outs := tk.TakeOutputs()
		require.Len(t, outs, 1)
		return outs[0]
	}
	first := take(0)
	// Output 1 is emitted but not taken: a release now must not reuse
	// anything, or output 1 would lose its stamp to output 2's.
	require.NoError(t, tk.Receive(recs[1]))
	release(tk)
	second := tk.TakeOutputs()[0]
	third := take(2)
	wantFrom(first, 0)
	wantFrom(second, 1)
	wantFrom(third, 2)
	assert.NotSame(t, &stampOf(first)[0], &stampOf(third)[0], "a release with an output not taken reused its memory")

	// Everything taken: the next output is carved where the first was.
	release(tk)
	fourth := take(3)
	wantFrom(fourth, 3)
	assert.Same(t, &stampOf(first)[0], &stampOf(fourth)[0], "the stamp after a release is not carved where the first was")
	assert.Same(t, &first.Record.Headers[0], &fourth.Record.Headers[0], "the header list after a release is not carved where the first was")

	// Through more than a slab of each between releases, a round of
	// outputs allocates nothing once the slabs are there.
	next := int64(4)
	round := func() {
		for range 1000 {
			// No assertions here: boxing their arguments allocates.
			if err := tk.Receive(recs[next]); err != nil || len(tk.TakeOutputs()) != 1 {
				t.Fatalf("record %d: %v, or not one output", next, err)
			}
			next++
		}
		release(tk)
	}
	round()
	assert.Zero(t, testing.AllocsPerRun(2, round), "allocations in a round of outputs between releases")

	// Outputs handed out stay in the outbox's arrays, pointing to their
	// records' bytes, until ReleaseOutputs clears them.
	take(next)
	assert.Positive(t, tk.StaleOutputs(), "no output kept after TakeOutputs: the test sees nothing")
	release(tk)
	if clears {
		assert.Zero(t, tk.StaleOutputs(), "outputs still held after a release")
	} else {
		assert.Positive(t, tk.StaleOutputs(), "outputs let go of by a release that should cost nothing a record")
	}
}

// An output's headers are its record's, less any clock header, with its
// stamp last, whatever headers the outputs carved from the same memory
// before it had: the header lists are reused after each release, and a
// record whose only header is its clock (or that has none) takes a
// shorter way to its list than one with other headers.
func TestOutputHeadersAcrossReuse(t *testing.T) {
	tk := forwardingTask(t)
	upstream, err := causal.NewClock(causal.Entry{Channel: causal.Channel{Topic: "up"}, Offset: 0})
	require.NoError(t, err)
	clock := framework.Header{Key: causal.HeaderKey, Value: causal.EncodeClock(upstream)}
	trace := framework.Header{Key: "trace", Value: []byte("t-1")}
	span := framework.Header{Key: "span", Value: []byte("s-1")}
	// Each round runs after a release, so its list lands where the one
	// before it was.
	rounds := []struct {
		name string
		in   []framework.Header
		want []string // the output's header keys, the stamp last
	}{
		{"two others and a clock", []framework.Header{trace, clock, span}, []string{"trace", "span", causal.HeaderKey}},
		{"the clock alone", []framework.Header{clock}, []string{causal.HeaderKey}},
		{"one other", []framework.Header{trace}, []string{"trace", causal.HeaderKey}},
		{"none", nil, []string{causal.HeaderKey}},
		{"a clock before another", []framework.Header{clock, span}, []string{"span", causal.HeaderKey}},
		{"the clock alone again", []framework.Header{clock}, []string{causal.HeaderKey}},
	}
	var first *framework.Header
	for i, r := range rounds {
		require.NoError(t, tk.Receive(framework.Record{Topic: "in", Offset: int64(i), Value: []byte("v"), Headers: r.in}), r.name)
		outs := tk.TakeOutputs()
		require.Len(t, outs, 1, r.name)
		hs := outs[0].Record.Headers
		var keys []string
		for _, h := range hs {
			keys = append(keys, h.Key)
		}
		require.Equal(t, r.want, keys, r.name)
		for _, h := range hs[:len(hs)-1] {
			assert.Equal(t, map[string]string{"trace": "t-1", "span": "s-1"}[h.Key], string(h.Value), "%s: header %s", r.name, h.Key)
		}
		stamp, err := causal.DecodeClock(hs[len(hs)-1].Value)
		require.NoError(t, err, r.name)
		got, _ := stamp.Get(causal.Channel{Topic: "in"})
		assert.Equal(t, int64(i), got, "%s: the stamp's claim on the input", r.name)
		if first == nil {
			first = &hs[0]
		}
		assert.Same(t, first, &hs[0], "%s: the list is not carved where the first was, so nothing here is reused", r.name)
		tk.ReleaseOutputs()
	}
}

// Every output names the record it came from and the topic it goes to,
// and one built without a timestamp takes that record's, while records
// from two topics, with timestamps in two locations, and outputs to two
// topics change from one round to the next. The outbox's slots are
// reused (a round's outputs land where those of two rounds before did),
// so the rounds are laid out for each slot to see every change.
func TestOutputsTakeTheirRecordsOrigin(t *testing.T) {
	topo, err := framework.NewBuilder("t").Processor("p", func() framework.Processor {
		return framework.ProcessorFunc(func(ctx framework.Context, rec framework.Record) error {
			return ctx.Emit(string(rec.Value), framework.Record{Value: rec.Value})
		})
	}, framework.From("a", "b"), framework.To("x"), framework.To("y")).Build()
	require.NoError(t, err)
	tk, err := task.New(task.Config{Topology: topo, Processor: "p", OutputPartitions: func(string) (int32, error) { return 1, nil }})
	require.NoError(t, err)
	require.NoError(t, tk.Seed("a", 0))
	require.NoError(t, tk.Seed("b", 0))
	require.NoError(t, tk.Start())
	base := time.Date(2026, 12, 4, 1, 0, 0, 0, time.UTC)
	tokyo := time.FixedZone("JST", 9*3600)
	offsets := map[string]int64{}
	for i := range 12 {
		// Rounds two apart (the same outbox array) differ in input
		// topic when i/2 changes parity, and in output topic when i/4
		// does.
		topic, ts, out := "a", base.Add(time.Duration(i)*time.Second), "x"
		if i/2%2 == 1 {
			topic, ts = "b", ts.In(tokyo)
		}
		if i/4%2 == 1 {
			out = "y"
		}
		rec := framework.Record{Topic: topic, Offset: offsets[topic], Value: []byte(out), Timestamp: ts}
		offsets[topic]++
		require.NoError(t, tk.Receive(rec))
		outs := tk.TakeOutputs()
		require.Len(t, outs, 1)
		assert.Equal(t, causal.Entry{Channel: causal.Channel{Topic: topic}, Offset: rec.Offset}, outs[0].From, "round %d", i)
		assert.Equal(t, out, outs[0].Topic, "round %d", i)
		assert.Equal(t, out, outs[0].Record.Topic, "round %d", i)
		assert.Equal(t, ts, outs[0].Record.Timestamp, "round %d", i)
		assert.Equal(t, ts.Location(), outs[0].Record.Timestamp.Location(), "round %d", i)
	}
}
