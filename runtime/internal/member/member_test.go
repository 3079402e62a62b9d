package member

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/runtime/internal/transport"
)

// engine records what the loop told it, and stops the loop on the
// record its stopOn says.
type engine struct {
	loop    *Loop
	calls   []string
	commits int
	stopOn  string
	stopErr error
	// stopAfterCommits stops the loop on that many commits.
	stopAfterCommits int
	// closeFirst, when set, is closed before the engine stops the loop:
	// Stop called while the engine waited.
	closeFirst chan struct{}
}

func (e *engine) Between()        { e.calls = append(e.calls, "between") }
func (e *engine) Clock(time.Time) {}
func (e *engine) Record(m *transport.Message) {
	e.calls = append(e.calls, "record "+string(m.Value))
	if string(m.Value) == e.stopOn {
		if e.closeFirst != nil {
			close(e.closeFirst)
		}
		e.loop.Fate.Stop(e.stopErr)
	}
}
func (e *engine) Position(ch causal.Channel, next int64) {
	e.calls = append(e.calls, fmt.Sprintf("position %s %d", ch, next))
}
func (e *engine) PartitionError(ch causal.Channel, err error) {
	e.calls = append(e.calls, fmt.Sprintf("partition error %s", ch))
}
func (e *engine) Handled() { e.calls = append(e.calls, "handled") }
func (e *engine) Commit(time.Time) {
	e.calls = append(e.calls, "commit")
	if e.commits++; e.commits == e.stopAfterCommits {
		e.loop.Fate.Stop(e.stopErr)
	}
}

// consumer hands out its batches, one a poll, then nothing.
type consumer struct{ batches [][]transport.Event }

func (c *consumer) poll(_ time.Duration, max int, events *[]transport.Event) int {
	if len(c.batches) == 0 {
		return 0
	}
	b := c.batches[0]
	n := min(len(b), max)
	*events = append(*events, b[:n]...)
	if c.batches[0] = b[n:]; len(c.batches[0]) == 0 {
		c.batches = c.batches[1:]
	}
	return n
}

func record(v string) transport.Event {
	return transport.Event{Kind: transport.EventRecord, Msg: transport.Message{Topic: "in", Value: []byte(v)}}
}

// clock advances by step at every read.
func clock(step time.Duration) func() time.Time {
	now := time.Unix(1_700_000_000, 0)
	return func() time.Time { now = now.Add(step); return now }
}

func TestNewRefusesWhatItCannotRun(t *testing.T) {
	_, err := New(nil, Options{})
	require.Error(t, err)
	_, err = New((&consumer{}).poll, Options{Batch: -1})
	require.Error(t, err)
	l, err := New((&consumer{}).poll, Options{})
	require.NoError(t, err)
	assert.Equal(t, 512, l.Batch(), "the default batch")
}

// The loop hands each event to the engine method for its kind, in order,
// tells it when a batch is handled, and stops on a fatal error of the
// client, or a partition's error of the fatal class, without handing it
// the rest of the batch.
func TestRunSortsEventsAndStopsOnFatalOnes(t *testing.T) {
	ch := causal.Channel{Topic: "in", Partition: 0}
	fatal := errors.New("fenced")
	for _, c := range []struct {
		name   string
		ending transport.Event
	}{
		{"a fatal event", transport.Event{Kind: transport.EventFatal, Err: fatal}},
		{"a partition's fatal error", transport.Event{Kind: transport.EventPartitionError, Msg: transport.Message{Topic: "in"}, Err: &transport.ClientError{Class: transport.ClassFatal, Err: fatal}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cons := &consumer{batches: [][]transport.Event{{
				record("a"),
				{Kind: transport.EventPosition, Msg: transport.Message{Topic: "in", Offset: 7}},
				{Kind: transport.EventPartitionError, Msg: transport.Message{Topic: "in"}, Err: errors.New("passing")},
				{Kind: transport.EventError, Err: errors.New("logged")},
				c.ending,
				record("never"),
			}}}
			l, err := New(cons.poll, Options{Now: clock(time.Millisecond), CommitInterval: time.Hour})
			require.NoError(t, err)
			e := &engine{loop: l}
			err = l.Run(e, make(chan struct{}))
			require.ErrorIs(t, err, fatal)
			assert.Equal(t, []string{"between", "record a", "position " + ch.String() + " 7", "partition error " + ch.String()}, e.calls)
		})
	}
}

// Stop closed between rounds ends the run with no error and no last
// commit; an engine that stops the loop with an error waiting on a stopped
// cluster ends it with ErrStoppedWaiting when stop is closed, and with its
// error when it is not.
func TestRunEndsOnStopAndOnTheFate(t *testing.T) {
	t.Run("stop closed", func(t *testing.T) {
		stop := make(chan struct{})
		close(stop)
		l, err := New((&consumer{batches: [][]transport.Event{{record("a")}}}).poll, Options{})
		require.NoError(t, err)
		e := &engine{loop: l}
		require.NoError(t, l.Run(e, stop))
		assert.Empty(t, e.calls)
	})
	for _, c := range []struct {
		name        string
		err         error
		closeStop   bool
		wantWaiting bool
	}{
		{"stopped while waiting", fmt.Errorf("commit: %w", transport.ErrStopped), true, true},
		{"stopped error without a stop", fmt.Errorf("commit: %w", transport.ErrStopped), false, false},
		{"another error", errors.New("broken"), true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			stop := make(chan struct{})
			l, err := New((&consumer{batches: [][]transport.Event{{record("a"), record("b")}}}).poll, Options{})
			require.NoError(t, err)
			e := &engine{loop: l, stopOn: "a", stopErr: c.err}
			if c.closeStop {
				e.closeFirst = stop
			}
			err = l.Run(e, stop)
			require.ErrorIs(t, err, c.err)
			assert.Equal(t, c.wantWaiting, errors.Is(err, ErrStoppedWaiting), "%v", err)
			assert.Equal(t, []string{"between", "record a"}, e.calls, "nothing after the fatal record, not even Handled")
		})
	}
}

// Between is called once every CheckEvery events while records flow,
// never at every record.
func TestBetweenComesWhenIdleAndEveryCheckEveryEvents(t *testing.T) {
	var batches [][]transport.Event
	for i := range 5 {
		batches = append(batches, []transport.Event{record(fmt.Sprint(i)), record(fmt.Sprint(i))})
	}
	batches = append(batches, []transport.Event{{Kind: transport.EventFatal, Err: errors.New("end")}})
	cons := &consumer{batches: batches}
	l, err := New(cons.poll, Options{CheckEvery: 4, CommitInterval: time.Hour, Now: clock(time.Millisecond)})
	require.NoError(t, err)
	e := &engine{loop: l}
	require.Error(t, l.Run(e, make(chan struct{})))
	var got []string
	for _, c := range e.calls {
		if c == "between" || c == "handled" {
			got = append(got, c)
		}
	}
	// Two events a batch, a look every four: before the 1st, 3rd and 5th.
	assert.Equal(t, []string{"between", "handled", "handled", "between", "handled", "handled", "between", "handled"}, got)
}

// A handled batch stays in the loop's array for the next batch to write
// over, but once the consumer has nothing to give the loop lets go of
// it: an idle member keeps no fetched record alive through it.
func TestAnIdleLoopLetsGoOfHandledEvents(t *testing.T) {
	cons := &consumer{batches: [][]transport.Event{{record("a"), record("b"), record("c")}, {record("d")}}}
	l, err := New(cons.poll, Options{})
	require.NoError(t, err)
	e := &engine{loop: l}
	for range 2 {
		require.Positive(t, l.Poll())
		l.Handle(e)
		require.Empty(t, l.polled)
	}
	kept := l.polled[:3]
	assert.Equal(t, "c", string(kept[2].Msg.Value), "the events are cleared after every batch already")
	require.Zero(t, l.Poll())
	l.Handle(e) // the consumer had nothing
	assert.Equal(t, []transport.Event{{}, {}, {}}, kept, "an idle loop still holds events it handled")
	assert.Equal(t, []string{"record a", "record b", "record c", "handled", "record d", "handled"}, e.calls)
}

// A due commit waits while the consumer hands out full batches, which say
// it has more records ready, but never past a tenth of the interval; a
// batch that is not full, or none, lets it go ahead at once.
func TestCommitDueWaitsForReadyRecordsUpToATenthOfTheInterval(t *testing.T) {
	const batch = 512
	l, err := New((&consumer{}).poll, Options{Batch: batch, CommitInterval: 100 * time.Millisecond})
	require.NoError(t, err)
	next := time.Unix(1_700_000_000, 0)
	for _, c := range []struct {
		name   string
		over   time.Duration // how far past next the loop is
		polled int
		want   bool
	}{
		{"not due, full batch", -time.Millisecond, batch, false},
		{"not due, batch not full", -time.Millisecond, 3, false},
		{"due, batch not full", 0, batch - 1, true},
		{"due, nothing polled", 0, 0, true},
		{"due, full batch", 0, batch, false},
		{"overdue within the tenth, full batch", 9 * time.Millisecond, batch, false},
		{"overdue by the tenth, full batch", 10 * time.Millisecond, batch, true},
		{"overdue past the tenth, full batch", 50 * time.Millisecond, batch, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			l.time = next.Add(c.over)
			assert.Equal(t, c.want, l.commitDue(next, c.polled))
		})
	}
}

// The engine commits once a commit interval has gone by, not before.
func TestRunCommitsAtTheInterval(t *testing.T) {
	var batches [][]transport.Event
	for i := range 30 {
		batches = append(batches, []transport.Event{record(fmt.Sprint(i))})
	}
	cons := &consumer{batches: batches}
	// Each poll reads the clock once: 10 ms a poll, a commit every 100 ms.
	l, err := New(cons.poll, Options{CommitInterval: 100 * time.Millisecond, Now: clock(10 * time.Millisecond)})
	require.NoError(t, err)
	e := &engine{loop: l, stopAfterCommits: 2, stopErr: errors.New("enough")}
	require.Error(t, l.Run(e, make(chan struct{})))
	records := 0
	var between []int
	for _, c := range e.calls {
		switch c {
		case "commit":
			between = append(between, records)
			records = 0
		case "between", "handled":
		default:
			records++
		}
	}
	assert.Equal(t, []int{10, 10}, between, "records handled before each commit")
}
