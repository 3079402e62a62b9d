package kstest

import (
	"testing"

	"github.com/causeway-stream/causeway/framework/dsl"
	"github.com/causeway-stream/causeway/framework/serde"
)

// slidingAggregate is the topology of KStreamSlidingWindowAggregateTest:
// topic grouped by key in sliding windows, folded with init and
// toStringAdder (or reduced by concatenation when init is nil), to "out".
func slidingAggregate(w dsl.SlidingWindows, final bool, init func() string) func(b *dsl.Builder) {
	return func(b *dsl.Builder) {
		sliding := dsl.SlidingWindowedBy(dsl.From(b, "topic", text).GroupByKey(), w)
		if final {
			sliding = sliding.EmitOnWindowClose()
		}
		if init == nil {
			sliding.Reduce("agg", func(acc, v string) (string, error) { return acc + "+" + v, nil }).ToStream().To("out")
			return
		}
		dsl.SlidingAggregate(sliding, "agg", init, toStringAdder, serde.String()).ToStream().To("out")
	}
}

// earlyUpdates and earlyFinal are what testEarlyRecordsSmallInput and
// testEarlyNoGracePeriodSmallInput both assert, but for the last record's
// window, which the first test values 7 and the second 6.
func earlyUpdates(last string) map[int64][]string {
	return map[int64][]string{
		0:  {"0+1@0", "0+1+2@5", "0+1+2+3@6", "0+1+2+3+4@6", "0+1+2+3+4+5@13", "0+1+2+3+4+5+6@13"},
		1:  {"0+2@5", "0+2+3@6", "0+2+3+4@6", "0+2+3+4+5@13", "0+2+3+4+5+6@13"},
		4:  {"0+2+3@6", "0+2+3+5@13", "0+2+3+5+6@13"},
		6:  {"0+3@6", "0+3+5@13", "0+3+5+6@13"},
		7:  {"0+5@13", "0+5+6@13"},
		11: {"0+5@13"},
		20: {last},
	}
}

var earlyFinal = map[int64][]string{
	0: {"0+1+2+3+4+5+6@13"}, 1: {"0+2+3+4+5+6@13"}, 4: {"0+2+3+5+6@13"}, 6: {"0+3+5+6@13"},
	7: {"0+5+6@13"}, 11: {"0+5@13"},
}

func TestSlidingWindowAggregation(t *testing.T) {
	d10g5 := dsl.SlidingWindows{Difference: ms(10), Grace: ms(5)}
	smallIn := keyed("topic", "A", "1", 10, "A", "2", 10, "A", "3", 14, "A", "4", 15, "A", "5", 20, "A", "6", 22, "A", "7", 30)
	reduceIn := keyed("topic", "A", "1", 10, "A", "2", 14, "A", "3", 15, "A", "4", 22, "A", "5", 26, "A", "6", 30)
	earlyIn := keyed("topic", "A", "1", 0, "A", "2", 5, "A", "3", 6, "A", "4", 3, "A", "5", 13, "A", "6", 10, "A", "7", 70)
	repeatedIn := keyed("topic", "A", "1", 0, "A", "2", 2, "A", "3", 4, "A", "4", 0, "A", "5", 2, "A", "6", 2, "A", "7", 0, "A", "8", 7)
	earlyNoGraceIn := keyed("topic", "A", "1", 0, "A", "2", 5, "A", "3", 6, "A", "4", 3, "A", "5", 13, "A", "6", 10, "A", "6", 70)
	noGraceIn := keyed("topic", "A", "1", 100, "A", "2", 105, "A", "3", 106, "A", "4", 103, "A", "5", 113, "A", "6", 110)
	byGraceIn := keyed("topic", "k", "100", 200, "k", "0", 100, "k", "1", 101, "k", "2", 102, "k", "3", 103, "k", "4", 104,
		"k", "5", 105, "k", "6", 15, "k", "101", 300, "k", "102", 400)
	d50 := dsl.SlidingWindows{Difference: ms(50)}
	runAll(t, []kcase{
		{
			from:  "KStreamSlidingWindowAggregateTest.testAggregateSmallInput (ON_WINDOW_UPDATE)",
			build: slidingAggregate(d10g5, false, stringInit), in: smallIn, d: ms(10),
			byStart: map[int64][]string{
				0: {"0+1@10", "0+1+2@10"}, 4: {"0+1+2+3@14"}, 5: {"0+1+2+3+4@15"}, 10: {"0+1+2+3+4+5@20"},
				11: {"0+3@14", "0+3+4@15", "0+3+4+5@20"}, 12: {"0+3+4+5+6@22"},
				15: {"0+4@15", "0+4+5@20", "0+4+5+6@22"}, 16: {"0+5@20", "0+5+6@22"},
				20: {"0+5+6+7@30"}, 21: {"0+6@22", "0+6+7@30"}, 23: {"0+7@30"},
			},
		},
		{
			from:  "KStreamSlidingWindowAggregateTest.testAggregateSmallInput (ON_WINDOW_CLOSE)",
			build: slidingAggregate(d10g5, true, stringInit), in: smallIn, d: ms(10),
			byStart: map[int64][]string{
				0: {"0+1+2@10"}, 4: {"0+1+2+3@14"}, 5: {"0+1+2+3+4@15"}, 10: {"0+1+2+3+4+5@20"},
				11: {"0+3+4+5@20"}, 12: {"0+3+4+5+6@22"},
			},
		},
		{
			from:  "KStreamSlidingWindowAggregateTest.testReduceSmallInput (ON_WINDOW_UPDATE)",
			build: slidingAggregate(d10g5, false, nil), in: reduceIn, d: ms(10),
			byStart: map[int64][]string{
				0: {"1@10"}, 4: {"1+2@14"}, 5: {"1+2+3@15"}, 11: {"2@14", "2+3@15"}, 12: {"2+3+4@22"},
				15: {"3@15", "3+4@22"}, 16: {"4@22", "4+5@26"}, 20: {"4+5+6@30"}, 23: {"5@26", "5+6@30"}, 27: {"6@30"},
			},
		},
		{
			from:  "KStreamSlidingWindowAggregateTest.testReduceSmallInput (ON_WINDOW_CLOSE)",
			build: slidingAggregate(d10g5, true, nil), in: reduceIn, d: ms(10),
			byStart: map[int64][]string{0: {"1@10"}, 4: {"1+2@14"}, 5: {"1+2+3@15"}, 11: {"2+3@15"}, 12: {"2+3+4@22"}},
		},
		{
			from:  "KStreamSlidingWindowAggregateTest.testEarlyRecordsSmallInput (ON_WINDOW_UPDATE)",
			build: slidingAggregate(d50, false, stringInit), in: earlyIn, d: ms(50),
			byStart: earlyUpdates("0+7@70"),
		},
		{
			from:  "KStreamSlidingWindowAggregateTest.testEarlyRecordsSmallInput (ON_WINDOW_CLOSE)",
			build: slidingAggregate(d50, true, stringInit), in: earlyIn, d: ms(50),
			byStart: earlyFinal,
		},
		{
			from:  "KStreamSlidingWindowAggregateTest.testEarlyRecordsRepeatedInput (ON_WINDOW_UPDATE)",
			build: slidingAggregate(dsl.SlidingWindows{Difference: ms(5)}, false, stringInit), in: repeatedIn, d: ms(5),
			byStart: map[int64][]string{
				0: {"0+1@0", "0+1+2@2", "0+1+2+3+4+5@4", "0+1+2+3+4+5+6@4", "0+1+2+3@4", "0+1+2+3+4@4", "0+1+2+3+4+5+6+7@4"},
				1: {"0+2+3+5+6@4", "0+2@2", "0+2+3@4", "0+2+3+5@4"},
				2: {"0+2+3+5+6+8@7"},
				3: {"0+3@4", "0+3+8@7"},
				5: {"0+8@7"},
			},
		},
		{
			from:  "KStreamSlidingWindowAggregateTest.testEarlyRecordsRepeatedInput (ON_WINDOW_CLOSE)",
			build: slidingAggregate(dsl.SlidingWindows{Difference: ms(5)}, true, stringInit), in: repeatedIn, d: ms(5),
			byStart: map[int64][]string{0: {"0+1+2+3+4+5+6+7@4"}, 1: {"0+2+3+5+6@4"}},
		},
		{
			from:  "KStreamSlidingWindowAggregateTest.testEarlyNoGracePeriodSmallInput (ON_WINDOW_UPDATE)",
			build: slidingAggregate(d50, false, stringInit), in: earlyNoGraceIn, d: ms(50),
			byStart: earlyUpdates("0+6@70"),
		},
		{
			from:  "KStreamSlidingWindowAggregateTest.testEarlyNoGracePeriodSmallInput (ON_WINDOW_CLOSE)",
			build: slidingAggregate(d50, true, stringInit), in: earlyNoGraceIn, d: ms(50),
			byStart: earlyFinal,
		},
		{
			from:  "KStreamSlidingWindowAggregateTest.testNoGracePeriodSmallInput (ON_WINDOW_UPDATE)",
			build: slidingAggregate(d50, false, stringInit), in: noGraceIn, d: ms(50),
			byStart: map[int64][]string{
				50: {"0+1@100"}, 55: {"0+1+2@105"}, 56: {"0+1+2+3@106", "0+1+2+3+4@106"},
				63:  {"0+1+2+3+4+5@113", "0+1+2+3+4+5+6@113"},
				101: {"0+2@105", "0+2+3@106", "0+2+3+4@106", "0+2+3+4+5@113", "0+2+3+4+5+6@113"},
				104: {"0+2+3@106", "0+2+3+5@113", "0+2+3+5+6@113"},
				106: {"0+3@106", "0+3+5@113", "0+3+5+6@113"},
				107: {"0+5@113", "0+5+6@113"},
				111: {"0+5@113"},
			},
		},
		{
			from:  "KStreamSlidingWindowAggregateTest.testNoGracePeriodSmallInput (ON_WINDOW_CLOSE)",
			build: slidingAggregate(d50, true, stringInit), in: noGraceIn, d: ms(50),
			byStart: map[int64][]string{50: {"0+1@100"}, 55: {"0+1+2@105"}, 56: {"0+1+2+3+4@106"}},
		},
		{
			// Kafka Streams meters the seven records; none of them is in a
			// window: the first six make only windows already closed, and
			// 15's own window [15,25] has closed too.
			from:  "KStreamSlidingWindowAggregateTest.shouldLogAndMeterWhenSkippingExpiredWindowByGrace (ON_WINDOW_UPDATE)",
			build: slidingAggregate(dsl.SlidingWindows{Difference: ms(10), Grace: ms(90)}, false, stringInit),
			in:    byGraceIn,
			key:   windowKey(ms(10)),
			want:  []kv{{"k@[190,200)", "0+100", 200}, {"k@[290,300)", "0+101", 300}, {"k@[390,400)", "0+102", 400}},
			late:  7,
		},
		{
			from:  "KStreamSlidingWindowAggregateTest.shouldLogAndMeterWhenSkippingExpiredWindowByGrace (ON_WINDOW_CLOSE)",
			build: slidingAggregate(dsl.SlidingWindows{Difference: ms(10), Grace: ms(90)}, true, stringInit),
			in:    byGraceIn,
			key:   windowKey(ms(10)),
			want:  []kv{{"k@[190,200)", "0+100", 200}, {"k@[290,300)", "0+101", 300}},
			late:  7,
		},
	})
}
