package driver_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/driver"
	"github.com/causeway-stream/causeway/framework/serde"
)

// The driver's tasks live by the worker's rules (the task manager they
// share): a task fails alone, is moved past its poison record into the
// dead-letter topic, restarts alone, and claims are checked where they
// enter.

var errPoison = errors.New("poison")

// upper forwards every value upper-cased, and fails on "poison". Dead
// letters go to "dlq".
func upper(t *testing.T, opts ...framework.ProcessorOpt) *framework.Topology {
	t.Helper()
	topo, err := framework.NewBuilder("upper").DeadLetterTopic("dlq").
		Processor("upper", func() framework.Processor {
			return framework.ProcessorFunc(func(ctx framework.Context, rec framework.Record) error {
				if string(rec.Value) == "poison" {
					return errPoison
				}
				return ctx.Forward(framework.Record{Key: rec.Key, Value: []byte(strings.ToUpper(string(rec.Value)))})
			})
		}, append([]framework.ProcessorOpt{framework.From("in"), framework.To("out")}, opts...)...).
		Build()
	require.NoError(t, err)
	return topo
}

func pipeValues(t *testing.T, d *driver.Driver, partition int32, values ...string) {
	t.Helper()
	for _, v := range values {
		_, _, err := d.Pipe("in", framework.Record{Key: []byte(v), Value: []byte(v)}, driver.ToPartition(partition))
		require.NoError(t, err)
	}
}

func values(t *testing.T, d *driver.Driver, topic string) []string {
	t.Helper()
	recs, err := d.Records(topic)
	require.NoError(t, err)
	var out []string
	for _, r := range recs {
		out = append(out, string(r.Value))
	}
	return out
}

func TestFailedTaskStopsAloneAndSkipMovesItPastTheRecord(t *testing.T) {
	d, err := driver.New(upper(t), driver.Partitions("in", 2), driver.Partitions("out", 2))
	require.NoError(t, err)
	pipeValues(t, d, 0, "a", "poison", "b")
	pipeValues(t, d, 1, "x")
	err = d.Run()
	require.ErrorIs(t, err, errPoison)
	assert.ErrorContains(t, err, "upper/0")
	assert.Contains(t, d.Failed(), "upper/0")
	assert.NotContains(t, d.Failed(), "upper/1")
	// The failed task failed part-way through its work since the last
	// commit, so none of that work commits (not even A); the other
	// partition went on.
	assert.ElementsMatch(t, []string{"X"}, values(t, d, "out"))

	// Nothing moves while it is failed, and a restart meets the record
	// again.
	pipeValues(t, d, 1, "y")
	require.NoError(t, d.Run())
	require.NoError(t, d.RestartTask("upper/0"))
	require.ErrorIs(t, d.Run(), errPoison)
	assert.ElementsMatch(t, []string{"X", "Y"}, values(t, d, "out"))

	skipped, err := d.SkipRecord("upper/0")
	require.NoError(t, err)
	assert.Equal(t, causal.Entry{Channel: causal.Channel{Topic: "in", Partition: 0}, Offset: 1}, skipped)
	require.NoError(t, d.Run())
	assert.Empty(t, d.Failed())
	assert.ElementsMatch(t, []string{"A", "B", "X", "Y"}, values(t, d, "out"), "lost or duplicated around the skip")
	dead, err := d.Records(d.DeadLetterTopic())
	require.NoError(t, err)
	require.Len(t, dead, 1)
	assert.Equal(t, "poison", string(dead[0].Value))
	reason, _ := dead[0].Header(framework.HeaderDLQError)
	assert.Contains(t, string(reason), "skipped by an operator")

	_, err = d.SkipRecord("upper/0")
	assert.ErrorIs(t, err, driver.ErrNotFailed)
	_, err = d.SkipRecord("upper/9")
	assert.ErrorIs(t, err, driver.ErrNoTask)
}

func TestProcessingErrorUnderDeadLetterReachesTheDeadLetterTopic(t *testing.T) {
	d, err := driver.New(upper(t, framework.OnProcessingError(framework.DeadLetter)))
	require.NoError(t, err)
	pipeValues(t, d, 0, "a", "poison", "b")
	require.NoError(t, d.Run())
	assert.Equal(t, []string{"A", "B"}, values(t, d, "out"))
	dead, err := d.Records(d.DeadLetterTopic())
	require.NoError(t, err)
	require.Len(t, dead, 1)
	stage, _ := dead[0].Header(framework.HeaderDLQStage)
	assert.Equal(t, framework.StageProcess, string(stage))
}

// counter counts records per key in a store named after the processor;
// while *broken is set it fails on "poison".
func counter(name string, broken *bool) func() framework.Processor {
	return func() framework.Processor {
		return framework.ProcessorFunc(func(ctx framework.Context, rec framework.Record) error {
			if *broken && string(rec.Value) == "poison" {
				return errPoison
			}
			s, err := ctx.KeyValueStore(name)
			if err != nil {
				return err
			}
			n := int64(0)
			if v, ok, err := s.Get(rec.Key); err != nil {
				return err
			} else if ok {
				if n, err = serde.Int64().Deserialize(v); err != nil {
					return err
				}
			}
			nb, err := serde.Int64().Serialize(n + 1)
			if err != nil {
				return err
			}
			return s.Put(rec.Key, nb)
		})
	}
}

func storeCount(t *testing.T, d *driver.Driver, task, store, key string) int64 {
	t.Helper()
	s, err := d.Store(task, store)
	require.NoError(t, err)
	v, ok, err := s.Get([]byte(key))
	require.NoError(t, err)
	require.True(t, ok, "%s has no %q", task, key)
	n, err := serde.Int64().Deserialize(v)
	require.NoError(t, err)
	return n
}

// Two processors read one channel; one fails on a record the other takes
// in, and the other holds what it took in, waiting for a cause on a
// lagging channel. Once the cause of the failure is fixed, restarting the
// failed task rewinds the shared channel to its committed offset; the
// other task, not rebuilt, must not receive again what it holds (its gate
// would refuse it as out of order).
func TestRestartingOneReaderOfASharedChannelLeavesTheOtherAlone(t *testing.T) {
	broken, healthy := true, false
	topo, err := framework.NewBuilder("shared").
		Processor("first", counter("first", &broken), framework.From("in"), framework.Stores(framework.KeyValueStore("first"))).
		Processor("second", counter("second", &healthy), framework.From("in", "other"), framework.Stores(framework.KeyValueStore("second"))).
		Build()
	require.NoError(t, err)
	d, err := driver.New(topo)
	require.NoError(t, err)
	var client causal.Session
	d.Pause("other", 0)
	_, _, err = d.Pipe("other", framework.Record{Key: []byte("cause"), Value: []byte("cause")}, driver.InSession(&client))
	require.NoError(t, err)
	for _, v := range []string{"k", "poison", "k"} {
		_, _, err = d.Pipe("in", framework.Record{Key: []byte(v), Value: []byte(v)}, driver.InSession(&client))
		require.NoError(t, err)
	}
	require.ErrorIs(t, d.Run(), errPoison)
	second, err := d.Store("second/0", "second")
	require.NoError(t, err)

	broken = false
	require.NoError(t, d.RestartTask("first/0"))
	require.NoError(t, d.Run())
	d.Resume("other", 0)
	require.NoError(t, d.Run())
	assert.Equal(t, int64(2), storeCount(t, d, "first/0", "first", "k"))
	assert.Equal(t, int64(1), storeCount(t, d, "first/0", "first", "poison"))
	assert.Equal(t, int64(2), storeCount(t, d, "second/0", "second", "k"))
	assert.Equal(t, int64(1), storeCount(t, d, "second/0", "second", "cause"))
	again, err := d.Store("second/0", "second")
	require.NoError(t, err)
	assert.Same(t, second, again, "second was rebuilt by a restart of first")
}

// A claim that names no record, entering from outside, is bad input of
// the record that carries it, caught by the task that receives it.
func TestImpossibleClaimIsCaughtWhereItEnters(t *testing.T) {
	for _, tc := range []struct {
		name  string
		claim causal.Entry
	}{
		{"beyond the end", causal.Entry{Channel: causal.Channel{Topic: "in"}, Offset: 1_000_000}},
		{"no such topic", causal.Entry{Channel: causal.Channel{Topic: "nosuchtopic"}, Offset: 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := driver.New(upper(t))
			require.NoError(t, err)
			pipeValues(t, d, 0, "a")
			clock, err := causal.NewClock(tc.claim)
			require.NoError(t, err)
			_, _, err = d.Pipe("in", framework.Record{Key: []byte("b"), Value: []byte("b")}.WithHeader(causal.HeaderKey, causal.EncodeClock(clock)))
			require.NoError(t, err)
			err = d.Run()
			require.Error(t, err)
			assert.ErrorContains(t, err, "in/0@1 claims "+tc.claim.Channel.String())
			assert.Equal(t, []string{"A"}, values(t, d, "out"))
		})
	}
}
