package kstest

import (
	"testing"

	"github.com/causeway-stream/causeway/framework/dsl"
	"github.com/causeway-stream/causeway/operators"
)

// SuppressScenarioTest's final-results scenarios count one key's records,
// written out as they change ("raw") and suppressed until their windows
// close, which is EmitOnWindowClose here.
func TestSuppressScenarios(t *testing.T) {
	timeCount := func(w operators.Windows, final bool) func(b *dsl.Builder) {
		return func(b *dsl.Builder) {
			windowed := dsl.WindowedBy(dsl.From(b, "topic", text).GroupByKey(), w)
			if final {
				windowed = windowed.EmitOnWindowClose()
			}
			dsl.MapValues(windowed.Count("counts").ToStream(), countString).To("out")
		}
	}
	records := func(at ...int64) []in {
		out := make([]in, len(at))
		for i, ms := range at {
			out[i] = in{"topic", "k1", "v1", ms}
		}
		return out
	}
	timeIn := records(0, 1, 2, 1, 0, 5, 0)
	jumpIn := records(0, 1, 2, 0, 3, 0, 4, 0, 30)
	slidingIn := records(10, 11, 10, 13, 10, 24, 5, 7, 90)
	sessionIn := append(records(0, 5, 1), in{"topic", "k2", "v1", 11}, in{"topic", "k1", "v1", 5}, in{"topic", "k1", "v1", 30})
	runAll(t, []kcase{
		{
			from:  "SuppressScenarioTest.shouldSupportFinalResultsForTimeWindows (raw)",
			build: timeCount(operators.Tumbling(ms(2), ms(1)), false), in: timeIn, key: windowKey(ms(2)),
			want: []kv{{"k1@[0,2)", "1", 0}, {"k1@[0,2)", "2", 1}, {"k1@[2,4)", "1", 2}, {"k1@[0,2)", "3", 1}, {"k1@[0,2)", "4", 1},
				{"k1@[4,6)", "1", 5}},
			late: 1,
		},
		{
			from:  "SuppressScenarioTest.shouldSupportFinalResultsForTimeWindows (suppressed)",
			build: timeCount(operators.Tumbling(ms(2), ms(1)), true), in: timeIn, key: windowKey(ms(2)),
			want: []kv{{"k1@[0,2)", "4", 1}, {"k1@[2,4)", "1", 2}},
			late: 1,
		},
		{
			from:  "SuppressScenarioTest.shouldSupportFinalResultsForTimeWindowsWithLargeJump (raw)",
			build: timeCount(operators.Tumbling(ms(2), ms(2)), false), in: jumpIn, key: windowKey(ms(2)),
			want: []kv{{"k1@[0,2)", "1", 0}, {"k1@[0,2)", "2", 1}, {"k1@[2,4)", "1", 2}, {"k1@[0,2)", "3", 1}, {"k1@[2,4)", "2", 3},
				{"k1@[0,2)", "4", 1}, {"k1@[4,6)", "1", 4}, {"k1@[30,32)", "1", 30}},
			late: 1,
		},
		{
			from:  "SuppressScenarioTest.shouldSupportFinalResultsForTimeWindowsWithLargeJump (suppressed)",
			build: timeCount(operators.Tumbling(ms(2), ms(2)), true), in: jumpIn, key: windowKey(ms(2)),
			want: []kv{{"k1@[0,2)", "4", 1}, {"k1@[2,4)", "2", 3}, {"k1@[4,6)", "1", 4}},
			late: 1,
		},
		{
			from: "SuppressScenarioTest.shouldSupportFinalResultsForSlidingWindows (raw)",
			build: func(b *dsl.Builder) {
				sliding := dsl.SlidingWindowedBy(dsl.From(b, "topic", text).GroupByKey(), dsl.SlidingWindows{Difference: ms(5), Grace: ms(15)})
				dsl.MapValues(sliding.Count("counts").ToStream(), countString).To("out")
			},
			in:     slidingIn,
			key:    windowKey(ms(5)),
			sorted: true,
			want: []kv{{"k1@[11,16)", "1", 11}, {"k1@[11,16)", "2", 13}, {"k1@[12,17)", "1", 13}, {"k1@[19,24)", "1", 24},
				{"k1@[5,10)", "1", 10}, {"k1@[5,10)", "2", 10}, {"k1@[5,10)", "3", 10}, {"k1@[5,10)", "4", 10}, {"k1@[5,10)", "5", 10},
				{"k1@[6,11)", "2", 11}, {"k1@[6,11)", "3", 11}, {"k1@[6,11)", "4", 11}, {"k1@[6,11)", "5", 11},
				{"k1@[8,13)", "4", 13}, {"k1@[8,13)", "5", 13}, {"k1@[85,90)", "1", 90}},
		},
		{
			from: "SuppressScenarioTest.shouldSupportFinalResultsForSlidingWindows (suppressed)",
			build: func(b *dsl.Builder) {
				sliding := dsl.SlidingWindowedBy(dsl.From(b, "topic", text).GroupByKey(), dsl.SlidingWindows{Difference: ms(5), Grace: ms(15)})
				dsl.MapValues(sliding.EmitOnWindowClose().Count("counts").ToStream(), countString).To("out")
			},
			in:  slidingIn,
			key: windowKey(ms(5)),
			want: []kv{{"k1@[5,10)", "5", 10}, {"k1@[6,11)", "5", 11}, {"k1@[8,13)", "5", 13}, {"k1@[11,16)", "2", 13},
				{"k1@[12,17)", "1", 13}, {"k1@[19,24)", "1", 24}},
		},
		{
			from:  "SuppressScenarioTest.shouldSupportFinalResultsForSessionWindows (raw)",
			build: sessionCount(dsl.SessionWindows{Gap: ms(5)}, false), in: sessionIn, key: sessionKey,
			want: []kv{{"k1@[0,0]", "1", 0}, {"k1@[0,0]", null, 0}, {"k1@[0,5]", "2", 5}, {"k1@[0,5]", null, 5}, {"k1@[0,5]", "3", 5},
				{"k2@[11,11]", "1", 11}, {"k1@[30,30]", "1", 30}},
			late: 1,
		},
		{
			from:  "SuppressScenarioTest.shouldSupportFinalResultsForSessionWindows (suppressed)",
			build: sessionCount(dsl.SessionWindows{Gap: ms(5)}, true), in: sessionIn, key: sessionKey,
			want: []kv{{"k1@[0,5]", "3", 5}, {"k2@[11,11]", "1", 11}},
			late: 1,
		},
	})
}
