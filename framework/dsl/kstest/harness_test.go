// Package kstest holds cases ported from Kafka Streams' own unit tests
// (apache/kafka, streams/src/test): the same inputs, in the same order,
// with the same timestamps, and the records the Java test asserts, key,
// value and timestamp. Each case names the test class and method it comes
// from. Kafka Streams' record caches, which merge updates before they
// reach the next processor, have no counterpart here: where a Java test
// asserts cached output, the case takes the assertion the test makes for
// an uncached store, or the emit-on-close one.
package kstest

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/driver"
	"github.com/causeway-stream/causeway/framework/dsl"
	"github.com/causeway-stream/causeway/framework/serde"
	"github.com/causeway-stream/causeway/operators"
)

// null stands for a missing value (a tombstone) in inputs and outputs;
// noKey for a missing key in inputs.
const (
	null  = "<null>"
	noKey = "<no key>"
)

// text is the codec of string keys and values, Kafka Streams'
// Serdes.String().
var text = serde.Codec[string, string]{Key: serde.String(), Value: serde.String()}

// in is one input record: topic, key, value (null for none) and
// timestamp in milliseconds.
type in struct {
	topic, key, value string
	ms                int64
}

// kv is one output record as a Java test asserts it: key, value and
// timestamp (KeyValueTimestamp).
type kv struct {
	key, value string
	ms         int64
}

func (r kv) String() string { return fmt.Sprintf("%s:%s@%d", r.key, r.value, r.ms) }

// kcase is one ported case: the topology, its inputs, and what the
// output topic "out" must hold.
type kcase struct {
	// from names the Kafka Streams test class and method.
	from  string
	build func(b *dsl.Builder)
	in    []in
	// key renders an output key; nil reads it as a string.
	key  func(t *testing.T, b []byte) string
	want []kv
	// anyOutput: the Java test asserts only what was dropped, not the
	// output, so want is not checked.
	anyOutput bool
	// byStart, for KStreamSlidingWindowAggregateTest's gatherOutput: the
	// set of "value@timestamp" that reached each window start (windows of
	// size d); checked instead of want when not nil.
	byStart map[int64][]string
	d       time.Duration
	// check, when set, asserts what the topology saw besides its output.
	check func(t *testing.T)
	// restartAfter restarts every task from its last commit after that
	// many inputs (0: never), where the Java test makes a new processor.
	restartAfter int
	// sorted: the Java test sorts the output by key, then timestamp,
	// before it compares.
	sorted bool
	// late, skipped, noValue and nullKey count the records reported
	// dropped for each reason, where the Java test meters them.
	late, skipped, noValue, nullKey int
}

// run pipes the inputs one by one (each processed before the next, as
// TopologyTestDriver does) and checks what reached "out".
func (c kcase) run(t *testing.T) {
	t.Helper()
	b := dsl.NewBuilder("kstest")
	c.build(b)
	topo, err := b.Build()
	require.NoError(t, err)
	d, err := driver.New(topo)
	require.NoError(t, err)
	for i, r := range c.in {
		if c.restartAfter > 0 && i == c.restartAfter {
			for _, st := range d.Tasks() {
				require.NoError(t, d.RestartTask(st.ID))
			}
		}
		pipeOne(t, d, r)
	}
	out, err := d.Records("out")
	if !errors.Is(err, driver.ErrUnknownTopic) { // a topology that writes nothing
		require.NoError(t, err)
	}
	got := make([]kv, 0, len(out))
	for _, r := range out {
		k := string(r.Key)
		if c.key != nil {
			k = c.key(t, r.Key)
		}
		v := null
		if r.Value != nil {
			v = string(r.Value)
		}
		got = append(got, kv{k, v, r.Timestamp.UnixMilli()})
	}
	switch {
	case c.byStart != nil:
		assert.Equal(t, sets(c.byStart), gather(t, out, c.d), "%s: what reached each window, as a set", c.from)
	case c.sorted:
		byKeyThenTime := func(a, b kv) int { return cmp.Or(strings.Compare(a.key, b.key), cmp.Compare(a.ms, b.ms)) }
		slices.SortStableFunc(got, byKeyThenTime)
		want := slices.Clone(c.want)
		slices.SortStableFunc(want, byKeyThenTime)
		assert.Equal(t, render(want), render(got), "%s: what reached the output, by key then timestamp", c.from)
	case !c.anyOutput:
		assert.Equal(t, render(c.want), render(got), "%s: what reached the output, in order", c.from)
	}
	if c.check != nil {
		c.check(t)
	}
	dropped := map[string]int{}
	for _, x := range d.Dropped() {
		dropped[x.Event.Reason]++
	}
	assert.Equal(t, c.late, dropped["late"], "%s: records dropped as late", c.from)
	assert.Equal(t, c.skipped, dropped["skipped"], "%s: records skipped", c.from)
	assert.Equal(t, c.noValue, dropped["no-value"], "%s: records without a value", c.from)
	assert.Equal(t, c.nullKey, dropped[framework.DropNullKey], "%s: records without a key", c.from)
}

// pipeOne writes one input record and runs the topology until it is idle,
// as TopologyTestDriver's pipeInput does.
func pipeOne(t *testing.T, d *driver.Driver, r in) {
	t.Helper()
	rec := framework.Record{Key: []byte(r.key), Timestamp: time.UnixMilli(r.ms).UTC()}
	if r.key == noKey {
		rec.Key = nil
	}
	if r.value != null {
		rec.Value = []byte(r.value)
	}
	_, _, err := d.Pipe(r.topic, rec)
	require.NoError(t, err)
	require.NoError(t, d.Run())
}

func render(rs []kv) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.String()
	}
	return out
}

// runAll runs the cases, each as a subtest named after its origin.
func runAll(t *testing.T, cases []kcase) {
	for _, c := range cases {
		t.Run(strings.ReplaceAll(c.from, " ", "_"), c.run)
	}
}

// windowKey renders a time-windowed key of window size size as
// "key@[start,end)" in milliseconds, as Kafka Streams prints a Windowed.
func windowKey(size time.Duration) func(t *testing.T, b []byte) string {
	return func(t *testing.T, b []byte) string {
		w, err := operators.WindowedKey(serde.String(), size).Deserialize(b)
		require.NoError(t, err)
		return fmt.Sprintf("%s@[%d,%d)", w.Key, w.Start.UnixMilli(), w.End.UnixMilli())
	}
}

// sessionKey renders a session-windowed key as "key@[start,end]".
func sessionKey(t *testing.T, b []byte) string {
	w, err := operators.SessionWindowedKey(serde.String()).Deserialize(b)
	require.NoError(t, err)
	return fmt.Sprintf("%s@[%d,%d]", w.Key, w.Start.UnixMilli(), w.End.UnixMilli())
}

// ms is a duration in milliseconds.
func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

// stringInit and toStringAdder are Kafka Streams' MockInitializer.STRING_INIT
// and MockAggregator.TOSTRING_ADDER.
func stringInit() string { return "0" }

func toStringAdder(_ string, v, agg string) (string, error) { return agg + "+" + v, nil }

// countString renders a windowed count as its decimal string, for
// outputs.
func countString(_ operators.Windowed[string], n int64) (string, error) { return fmt.Sprint(n), nil }

// gather is KStreamSlidingWindowAggregateTest.gatherOutput: the set of
// value@timestamp of each window start, whatever the key.
func gather(t *testing.T, out []framework.Record, d time.Duration) map[int64][]string {
	got := map[int64][]string{}
	for _, r := range out {
		w, err := operators.WindowedKey(serde.String(), d).Deserialize(r.Key)
		require.NoError(t, err)
		start := w.Start.UnixMilli()
		got[start] = append(got[start], fmt.Sprintf("%s@%d", r.Value, r.Timestamp.UnixMilli()))
	}
	return sets(got)
}

// sets sorts each list and drops repeats.
func sets(m map[int64][]string) map[int64][]string {
	out := map[int64][]string{}
	for k, v := range m {
		v = slices.Clone(v)
		slices.Sort(v)
		out[k] = slices.Compact(v)
	}
	return out
}
