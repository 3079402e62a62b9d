package kstest

import (
	"testing"
	"time"

	"github.com/causeway-stream/causeway/framework/dsl"
)

// KTableSuppressProcessorTest's untilTimeLimit cases on a table read
// from a topic: the Java test hands the processor changes itself; here
// they are records of the table's topic, each value an 8-byte text where
// the Java test has a Long. Its windowed cases are left out: windowed
// aggregates here end in EmitOnWindowClose, not in a table to suppress.
func TestKTableSuppressUntilTimeLimit(t *testing.T) {
	const long = "12345678" // ARBITRARY_LONG, as 8 bytes
	suppressed := func(limit time.Duration, buffer dsl.SuppressBuffer) func(b *dsl.Builder) {
		return func(b *dsl.Builder) {
			dsl.TableFrom(b, "topic", "rows", text).SuppressUntilTimeLimit("buffer", limit, buffer).ToStream().To("out")
		}
	}
	day := 24 * time.Hour
	runAll(t, []kcase{
		{
			from:  "KTableSuppressProcessorTest.zeroTimeLimitShouldImmediatelyEmit",
			build: suppressed(0, dsl.BufferUnbounded()),
			in:    []in{{"topic", "hey", long, 8765}},
			want:  []kv{{"hey", long, 8765}},
		},
		{
			from:  "KTableSuppressProcessorTest.intermediateSuppressionShouldBufferAndEmitLater (the tick a deletion of a key with no row)",
			build: suppressed(time.Millisecond, dsl.BufferUnbounded()),
			in:    []in{{"topic", "hey", "1", 0}, {"topic", "tick", null, 1}},
			want:  []kv{{"hey", "1", 0}},
		},
		{
			from:  "KTableSuppressProcessorTest.suppressShouldNotDropTombstonesForKTable (a row deleted)",
			build: suppressed(0, dsl.BufferMaxRecords(0)),
			in:    []in{{"topic", "hey", long, 50}, {"topic", "hey", null, 100}},
			want:  []kv{{"hey", long, 50}, {"hey", null, 100}},
		},
		{
			from:  "KTableSuppressProcessorTest.suppressShouldEmitWhenOverRecordCapacity",
			build: suppressed(100*day, dsl.BufferMaxRecords(1)),
			in:    []in{{"topic", "hey", long, 100}, {"topic", "dummyKey", long, 101}},
			want:  []kv{{"hey", long, 100}},
		},
		{
			from:  "KTableSuppressProcessorTest.suppressShouldEmitWhenOverByteCapacity",
			build: suppressed(100*day, dsl.BufferMaxBytes(60)),
			in:    []in{{"topic", "hey", long, 100}, {"topic", "dummyKey", long, 101}},
			want:  []kv{{"hey", long, 100}},
		},
		{
			from:  "Causeway's own: a key changed while buffered keeps its place and takes its latest value and timestamp",
			build: suppressed(10*time.Millisecond, dsl.BufferUnbounded()),
			in: []in{{"topic", "a", "1", 0}, {"topic", "b", "1", 3}, {"topic", "a", "2", 5}, {"topic", "a", "3", 9},
				{"topic", "c", "1", 10}, {"topic", "b", "2", 12}, {"topic", "d", "1", 30}},
			want: []kv{{"a", "3", 9}, {"b", "2", 12}, {"c", "1", 10}},
		},
		{
			from:  "Causeway's own: the same, the task restarted from its last commit with a, b and c buffered",
			build: suppressed(10*time.Millisecond, dsl.BufferUnbounded()),
			in: []in{{"topic", "a", "1", 0}, {"topic", "b", "1", 3}, {"topic", "a", "2", 5}, {"topic", "a", "3", 9},
				{"topic", "c", "1", 10}, {"topic", "b", "2", 12}, {"topic", "d", "1", 30}},
			restartAfter: 4,
			want:         []kv{{"a", "3", 9}, {"b", "2", 12}, {"c", "1", 10}},
		},
	})
}
