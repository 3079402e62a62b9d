package kstest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/framework/dsl"
	"github.com/causeway-stream/causeway/framework/serde"
	"github.com/causeway-stream/causeway/operators"
)

// baseKey renders a windowed key of either layout by its key alone, as
// the windowed cogroup tests' assertOutputKeyValueTimestamp compares it.
func baseKey(sessions bool, size time.Duration) func(t *testing.T, b []byte) string {
	return func(t *testing.T, b []byte) string {
		keys := operators.WindowedKey(serde.String(), size)
		if sessions {
			keys = operators.SessionWindowedKey(serde.String())
		}
		w, err := keys.Deserialize(b)
		require.NoError(t, err)
		return w.Key
	}
}

// cogroupedTwo is the tests' setup: "topic" folded in with TOSTRING_ADDER
// and, when both, "topic2" with TOSTRING_REMOVER.
func cogroupedTwo(b *dsl.Builder, both bool) dsl.Cogrouped[string, string] {
	adder := func(_ string, v, acc string) (string, error) { return acc + "+" + v, nil }
	remover := func(_ string, v, acc string) (string, error) { return acc + "-" + v, nil }
	c := dsl.Cogroup(dsl.From(b, "topic", text).GroupByKey(), adder)
	if both {
		c = dsl.CogroupWith(c, dsl.From(b, "topic2", text).GroupByKey(), remover)
	}
	return c
}

// TimeWindowedCogroupedKStreamImplTest: a cogroup in time windows of
// 500 ms (hopping by 200 where said), no grace.
func TestTimeWindowedCogroupedKStreamImpl(t *testing.T) {
	windows := func(both bool, advance time.Duration) func(b *dsl.Builder) {
		return func(b *dsl.Builder) {
			cogroupedTwo(b, both).WindowedBy(operators.Hopping(ms(500), advance, 0)).
				Aggregate("windows", stringInit, serde.String()).ToStream().To("out")
		}
	}
	key := baseKey(false, ms(500))
	runAll(t, []kcase{
		{
			from: "TimeWindowedCogroupedKStreamImplTest.timeWindowAggregateTestStreamsTest", build: windows(true, ms(500)), key: key,
			in: []in{{"topic", "k1", "A", 0}, {"topic", "k2", "A", 0}, {"topic", "k2", "A", 1}, {"topic", "k1", "A", 2},
				{"topic", "k1", "B", 3}, {"topic", "k2", "B", 3}, {"topic", "k2", "B", 4}, {"topic", "k1", "B", 4}},
			want: []kv{{"k1", "0+A", 0}, {"k2", "0+A", 0}, {"k2", "0+A+A", 1}, {"k1", "0+A+A", 2},
				{"k1", "0+A+A+B", 3}, {"k2", "0+A+A+B", 3}, {"k2", "0+A+A+B+B", 4}, {"k1", "0+A+A+B+B", 4}},
		},
		{
			from: "TimeWindowedCogroupedKStreamImplTest.timeWindowMixAggregatorsTest", build: windows(true, ms(500)), key: key,
			in: []in{{"topic", "k1", "A", 0}, {"topic", "k2", "A", 0}, {"topic", "k2", "A", 1}, {"topic", "k1", "A", 2},
				{"topic2", "k1", "B", 3}, {"topic2", "k2", "B", 3}, {"topic2", "k2", "B", 4}, {"topic2", "k1", "B", 4}},
			want: []kv{{"k1", "0+A", 0}, {"k2", "0+A", 0}, {"k2", "0+A+A", 1}, {"k1", "0+A+A", 2},
				{"k1", "0+A+A-B", 3}, {"k2", "0+A+A-B", 3}, {"k2", "0+A+A-B-B", 4}, {"k1", "0+A+A-B-B", 4}},
		},
		{
			from: "TimeWindowedCogroupedKStreamImplTest.timeWindowAggregateManyWindowsTest", build: windows(false, ms(500)), key: key,
			in:   []in{{"topic", "k1", "A", 0}, {"topic", "k2", "A", 499}, {"topic", "k2", "A", 500}, {"topic", "k1", "A", 500}},
			want: []kv{{"k1", "0+A", 0}, {"k2", "0+A", 499}, {"k2", "0+A", 500}, {"k1", "0+A", 500}},
		},
		{
			from: "TimeWindowedCogroupedKStreamImplTest.timeWindowAggregateOverlappingWindowsTest", build: windows(false, ms(200)), key: key,
			in: []in{{"topic", "k1", "A", 0}, {"topic", "k2", "A", 0}, {"topic", "k1", "B", 250}, {"topic", "k2", "B", 250},
				{"topic", "k2", "A", 500}, {"topic", "k1", "A", 500}},
			want: []kv{{"k1", "0+A", 0}, {"k2", "0+A", 0}, {"k1", "0+A+B", 250}, {"k1", "0+B", 250}, {"k2", "0+A+B", 250}, {"k2", "0+B", 250},
				{"k2", "0+B+A", 500}, {"k2", "0+A", 500}, {"k1", "0+B+A", 500}, {"k1", "0+A", 500}},
		},
		{
			from: "TimeWindowedCogroupedKStreamImplTest.timeWindowMixAggregatorsManyWindowsTest", build: windows(true, ms(500)), key: key,
			in: []in{{"topic", "k1", "A", 0}, {"topic", "k2", "A", 0}, {"topic", "k2", "A", 1}, {"topic", "k1", "A", 2},
				{"topic2", "k1", "B", 3}, {"topic2", "k2", "B", 3}, {"topic2", "k2", "B", 501}, {"topic2", "k1", "B", 501}},
			want: []kv{{"k1", "0+A", 0}, {"k2", "0+A", 0}, {"k2", "0+A+A", 1}, {"k1", "0+A+A", 2},
				{"k1", "0+A+A-B", 3}, {"k2", "0+A+A-B", 3}, {"k2", "0-B", 501}, {"k1", "0-B", 501}},
		},
	})
}

// SessionWindowedCogroupedKStreamImplTest: a cogroup in sessions, the
// merger joining two aggregates with "+".
func TestSessionWindowedCogroupedKStreamImpl(t *testing.T) {
	merger := func(_ string, a, b string) (string, error) { return a + "+" + b, nil }
	sessions := func(both bool, w dsl.SessionWindows) func(b *dsl.Builder) {
		return func(b *dsl.Builder) {
			cogroupedTwo(b, both).SessionWindowedBy(w).Aggregate("sessions", stringInit, merger, serde.String()).ToStream().To("out")
		}
	}
	key := baseKey(true, 0)
	gap500 := dsl.SessionWindows{Gap: ms(500)}
	gap100 := dsl.SessionWindows{Gap: ms(100), Grace: 24 * time.Hour}
	mixed := []in{{"topic", "k1", "A", 0}, {"topic", "k2", "A", 0}, {"topic", "k2", "A", 1}, {"topic", "k1", "A", 2}, {"topic2", "k1", "B", 3}}
	runAll(t, []kcase{
		{
			from: "SessionWindowedCogroupedKStreamImplTest.sessionWindowAggregateTest", build: sessions(false, gap500), key: key,
			in:   []in{{"topic", "k1", "A", 0}, {"topic", "k2", "A", 0}, {"topic", "k1", "B", 599}, {"topic", "k2", "B", 607}},
			want: []kv{{"k1", "0+A", 0}, {"k2", "0+A", 0}, {"k1", "0+B", 599}, {"k2", "0+B", 607}},
		},
		{
			from: "SessionWindowedCogroupedKStreamImplTest.sessionWindowAggregate2Test", build: sessions(false, gap500), key: key,
			in:   []in{{"topic", "k1", "A", 0}, {"topic", "k1", "A", 0}, {"topic", "k2", "B", 599}, {"topic", "k1", "B", 607}},
			want: []kv{{"k1", "0+A", 0}, {"k1", null, 0}, {"k1", "0+0+A+A", 0}, {"k2", "0+B", 599}, {"k1", "0+B", 607}},
		},
		{
			from: "SessionWindowedCogroupedKStreamImplTest.sessionWindowAggregateTest2StreamsTest", build: sessions(true, gap100), key: key,
			in: []in{{"topic", "k1", "A", 0}, {"topic", "k1", "A", 84}, {"topic", "k1", "A", 113}, {"topic", "k1", "A", 199},
				{"topic", "k1", "B", 300}, {"topic", "k2", "B", 301}, {"topic", "k2", "B", 400}, {"topic", "k1", "B", 400}},
			want: []kv{{"k1", "0+A", 0}, {"k1", null, 0}, {"k1", "0+0+A+A", 84}, {"k1", null, 84}, {"k1", "0+0+0+A+A+A", 113},
				{"k1", null, 113}, {"k1", "0+0+0+0+A+A+A+A", 199}, {"k1", "0+B", 300}, {"k2", "0+B", 301}, {"k2", null, 301},
				{"k2", "0+0+B+B", 400}, {"k1", null, 300}, {"k1", "0+0+B+B", 400}},
		},
		{
			from: "SessionWindowedCogroupedKStreamImplTest.sessionWindowMixAggregatorsTest", build: sessions(true, gap100), key: key,
			in: append(mixed, in{"topic2", "k2", "B", 3}, in{"topic2", "k2", "B", 444}, in{"topic2", "k1", "B", 444}),
			want: []kv{{"k1", "0+A", 0}, {"k2", "0+A", 0}, {"k2", null, 0}, {"k2", "0+0+A+A", 1}, {"k1", null, 0}, {"k1", "0+0+A+A", 2},
				{"k1", null, 2}, {"k1", "0+0+0+A+A-B", 3}, {"k2", null, 1}, {"k2", "0+0+0+A+A-B", 3}, {"k2", "0-B", 444}, {"k1", "0-B", 444}},
		},
		{
			from: "SessionWindowedCogroupedKStreamImplTest.sessionWindowMixAggregatorsManyWindowsTest", build: sessions(true, gap100), key: key,
			in: append(mixed, in{"topic2", "k2", "B", 500}, in{"topic2", "k2", "B", 501}, in{"topic2", "k1", "B", 501}),
			want: []kv{{"k1", "0+A", 0}, {"k2", "0+A", 0}, {"k2", null, 0}, {"k2", "0+0+A+A", 1}, {"k1", null, 0}, {"k1", "0+0+A+A", 2},
				{"k1", null, 2}, {"k1", "0+0+0+A+A-B", 3}, {"k2", "0-B", 500}, {"k2", null, 500}, {"k2", "0+0-B-B", 501}, {"k1", "0-B", 501}},
		},
	})
}

// SlidingWindowedCogroupedKStreamImplTest: a cogroup in sliding windows
// of 500 ms with a grace of 2 s.
func TestSlidingWindowedCogroupedKStreamImpl(t *testing.T) {
	sliding := func(both bool) func(b *dsl.Builder) {
		return func(b *dsl.Builder) {
			cogroupedTwo(b, both).SlidingWindowedBy(dsl.SlidingWindows{Difference: ms(500), Grace: ms(2000)}).
				Aggregate("sliding", stringInit, serde.String()).ToStream().To("out")
		}
	}
	runAll(t, []kcase{
		{
			from: "SlidingWindowedCogroupedKStreamImplTest.slidingWindowAggregateStreamsTest", build: sliding(true), key: windowKey(ms(500)),
			in: []in{{"topic", "k1", "A", 500}, {"topic", "k2", "A", 500}, {"topic", "k2", "A", 501}, {"topic", "k1", "A", 502},
				{"topic", "k1", "B", 503}, {"topic", "k2", "B", 503}, {"topic", "k2", "B", 504}, {"topic", "k1", "B", 504}},
			want: []kv{
				{"k1@[0,500)", "0+A", 500},
				{"k2@[0,500)", "0+A", 500},
				{"k2@[501,1001)", "0+A", 501}, {"k2@[1,501)", "0+A+A", 501},
				{"k1@[501,1001)", "0+A", 502}, {"k1@[2,502)", "0+A+A", 502},
				{"k1@[501,1001)", "0+A+B", 503}, {"k1@[503,1003)", "0+B", 503}, {"k1@[3,503)", "0+A+A+B", 503},
				{"k2@[501,1001)", "0+A+B", 503}, {"k2@[502,1002)", "0+B", 503}, {"k2@[3,503)", "0+A+A+B", 503},
				{"k2@[502,1002)", "0+B+B", 504}, {"k2@[501,1001)", "0+A+B+B", 504}, {"k2@[504,1004)", "0+B", 504}, {"k2@[4,504)", "0+A+A+B+B", 504},
				{"k1@[503,1003)", "0+B+B", 504}, {"k1@[501,1001)", "0+A+B+B", 504}, {"k1@[504,1004)", "0+B", 504}, {"k1@[4,504)", "0+A+A+B+B", 504},
			},
		},
		{
			from: "SlidingWindowedCogroupedKStreamImplTest.slidingWindowAggregateOverlappingWindowsTest", build: sliding(false), key: baseKey(false, ms(500)),
			in: []in{{"topic", "k1", "A", 500}, {"topic", "k2", "A", 500}, {"topic", "k1", "B", 750}, {"topic", "k2", "B", 750},
				{"topic", "k2", "A", 1000}, {"topic", "k1", "A", 1000}},
			want: []kv{{"k1", "0+A", 500}, {"k2", "0+A", 500}, {"k1", "0+B", 750}, {"k1", "0+A+B", 750}, {"k2", "0+B", 750}, {"k2", "0+A+B", 750},
				{"k2", "0+B+A", 1000}, {"k2", "0+A", 1000}, {"k2", "0+A+B+A", 1000}, {"k1", "0+B+A", 1000}, {"k1", "0+A", 1000}, {"k1", "0+A+B+A", 1000}},
		},
		{
			// The kept records are read back after a restart: a window
			// folded again from them gives what it gave before.
			from: "Causeway's own: a sliding cogroup's kept records survive a restart", build: sliding(true), key: baseKey(false, ms(500)),
			in:           []in{{"topic", "k1", "A", 500}, {"topic2", "k1", "B", 600}, {"topic", "k1", "C", 700}},
			restartAfter: 2,
			want:         []kv{{"k1", "0+A", 500}, {"k1", "0-B", 600}, {"k1", "0+A-B", 600}, {"k1", "0-B+C", 700}, {"k1", "0+C", 700}, {"k1", "0+A-B+C", 700}},
		},
	})
}
