package kstest

import (
	"testing"

	"github.com/causeway-stream/causeway/framework/dsl"
	"github.com/causeway-stream/causeway/framework/serde"
	"github.com/causeway-stream/causeway/operators"
)

// timeAggregate is the topology of KStreamWindowAggregateTest: topic
// grouped by key, cut into time windows, folded with init and
// toStringAdder into a string, to "out".
func timeAggregate(w operators.Windows, final bool, init func() string) func(b *dsl.Builder) {
	return func(b *dsl.Builder) {
		windowed := dsl.WindowedBy(dsl.From(b, "topic", text).GroupByKey(), w)
		if final {
			windowed = windowed.EmitOnWindowClose()
		}
		dsl.WindowedAggregate(windowed, "agg", init, toStringAdder, serde.String()).ToStream().To("out")
	}
}

func emptyInit() string { return "" }

// keyed pipes key=value at each time into topic.
func keyed(topic string, recs ...any) []in {
	var out []in
	for i := 0; i+2 < len(recs); i += 3 {
		out = append(out, in{topic, recs[i].(string), recs[i+1].(string), int64(recs[i+2].(int))})
	}
	return out
}

func TestTimeWindowAggregation(t *testing.T) {
	hop10by5 := operators.Hopping(ms(10), ms(5), ms(100))
	aggBasicIn := keyed("topic",
		"A", "1", 0, "B", "2", 1, "C", "3", 2, "D", "4", 3, "A", "1", 4,
		"A", "1", 5, "B", "2", 6, "D", "4", 7, "B", "2", 8, "C", "3", 9,
		"A", "1", 10, "B", "2", 11, "D", "4", 12, "B", "2", 13, "C", "3", 14,
		"B", "1", 3, "B", "2", 2, "B", "3", 9)
	expiredIn := keyed("topic", "k", "100", 100, "k", "0", 0, "k", "1", 1, "k", "2", 2, "k", "3", 3, "k", "4", 4,
		"k", "5", 5, "k", "6", 6, "k", "105", 105, "k", "106", 106)
	byGraceIn := keyed("topic", "k", "100", 200, "k", "0", 100, "k", "1", 101, "k", "2", 102, "k", "3", 103, "k", "4", 104,
		"k", "5", 105, "k", "6", 6)
	hop10by5grace5 := operators.Hopping(ms(10), ms(5), ms(5))
	progressIn := keyed("topic", "A", "1", 0, "B", "2", 5, "C", "3", 15, "D", "4", 15, "E", "5", 19)
	interval0In := keyed("topic", "A", "1", 0, "A", "1", 5, "B", "2", 10, "C", "3", 15, "D", "4", 20)
	runAll(t, []kcase{
		{
			from:  "KStreamWindowAggregateTest.testAggBasic (ON_WINDOW_UPDATE)",
			build: timeAggregate(hop10by5, false, stringInit),
			in:    aggBasicIn,
			key:   windowKey(ms(10)),
			want: []kv{
				{"A@[0,10)", "0+1", 0}, {"B@[0,10)", "0+2", 1}, {"C@[0,10)", "0+3", 2}, {"D@[0,10)", "0+4", 3},
				{"A@[0,10)", "0+1+1", 4},
				{"A@[0,10)", "0+1+1+1", 5}, {"A@[5,15)", "0+1", 5},
				{"B@[0,10)", "0+2+2", 6}, {"B@[5,15)", "0+2", 6},
				{"D@[0,10)", "0+4+4", 7}, {"D@[5,15)", "0+4", 7},
				{"B@[0,10)", "0+2+2+2", 8}, {"B@[5,15)", "0+2+2", 8},
				{"C@[0,10)", "0+3+3", 9}, {"C@[5,15)", "0+3", 9},
				{"A@[5,15)", "0+1+1", 10}, {"A@[10,20)", "0+1", 10},
				{"B@[5,15)", "0+2+2+2", 11}, {"B@[10,20)", "0+2", 11},
				{"D@[5,15)", "0+4+4", 12}, {"D@[10,20)", "0+4", 12},
				{"B@[5,15)", "0+2+2+2+2", 13}, {"B@[10,20)", "0+2+2", 13},
				{"C@[5,15)", "0+3+3", 14}, {"C@[10,20)", "0+3", 14},
				{"B@[0,10)", "0+2+2+2+1", 8},
				{"B@[0,10)", "0+2+2+2+1+2", 8},
				{"B@[0,10)", "0+2+2+2+1+2+3", 9}, {"B@[5,15)", "0+2+2+2+2+3", 13},
			},
		},
		{
			// Grace 100: no window closes.
			from:  "KStreamWindowAggregateTest.testAggBasic (ON_WINDOW_CLOSE)",
			build: timeAggregate(hop10by5, true, stringInit),
			in:    aggBasicIn,
			key:   windowKey(ms(10)),
		},
		{
			// Kafka Streams meters each window a record misses (7); here a
			// record is late when no window takes it: 0 to 4 (5 and 6 still
			// go to [5,15)).
			from:  "KStreamWindowAggregateTest.shouldLogAndMeterWhenSkippingExpiredWindow (ON_WINDOW_UPDATE)",
			build: timeAggregate(operators.Hopping(ms(10), ms(5), ms(90)), false, emptyInit),
			in:    expiredIn,
			key:   windowKey(ms(10)),
			want: []kv{
				{"k@[95,105)", "+100", 100}, {"k@[100,110)", "+100", 100},
				{"k@[5,15)", "+5", 5}, {"k@[5,15)", "+5+6", 6},
				{"k@[100,110)", "+100+105", 105}, {"k@[105,115)", "+105", 105},
				{"k@[100,110)", "+100+105+106", 106}, {"k@[105,115)", "+105+106", 106},
			},
			late: 5,
		},
		{
			from:  "KStreamWindowAggregateTest.shouldLogAndMeterWhenSkippingExpiredWindow (ON_WINDOW_CLOSE)",
			build: timeAggregate(operators.Hopping(ms(10), ms(5), ms(90)), true, emptyInit),
			in:    expiredIn,
			key:   windowKey(ms(10)),
			want:  []kv{{"k@[5,15)", "+5+6", 6}},
			late:  5,
		},
		{
			from:  "KStreamWindowAggregateTest.shouldLogAndMeterWhenSkippingExpiredWindowByGrace (ON_WINDOW_UPDATE)",
			build: timeAggregate(operators.Tumbling(ms(10), ms(90)), false, emptyInit),
			in:    byGraceIn,
			key:   windowKey(ms(10)),
			want:  []kv{{"k@[200,210)", "+100", 200}},
			late:  7,
		},
		{
			from:  "KStreamWindowAggregateTest.shouldLogAndMeterWhenSkippingExpiredWindowByGrace (ON_WINDOW_CLOSE)",
			build: timeAggregate(operators.Tumbling(ms(10), ms(90)), true, emptyInit),
			in:    byGraceIn,
			key:   windowKey(ms(10)),
			late:  7,
		},
		{
			from:  "KStreamWindowAggregateTest.shouldNotEmitFinalIfNotProgressEnough (ON_WINDOW_UPDATE)",
			build: timeAggregate(hop10by5grace5, false, stringInit),
			in:    progressIn,
			key:   windowKey(ms(10)),
			want: []kv{
				{"A@[0,10)", "0+1", 0}, {"B@[0,10)", "0+2", 5}, {"B@[5,15)", "0+2", 5},
				{"C@[10,20)", "0+3", 15}, {"C@[15,25)", "0+3", 15},
				{"D@[10,20)", "0+4", 15}, {"D@[15,25)", "0+4", 15},
				{"E@[10,20)", "0+5", 19}, {"E@[15,25)", "0+5", 19},
			},
		},
		{
			// Stream time 15 closes [0,10); 15 again and 19 close nothing new.
			from:  "KStreamWindowAggregateTest.shouldNotEmitFinalIfNotProgressEnough (ON_WINDOW_CLOSE)",
			build: timeAggregate(hop10by5grace5, true, stringInit),
			in:    progressIn,
			key:   windowKey(ms(10)),
			want:  []kv{{"A@[0,10)", "0+1", 0}, {"B@[0,10)", "0+2", 5}},
		},
		{
			from:  "KStreamWindowAggregateTest.shouldEmitWithInterval0 (ON_WINDOW_UPDATE)",
			build: timeAggregate(hop10by5grace5, false, stringInit),
			in:    interval0In,
			key:   windowKey(ms(10)),
			want: []kv{
				{"A@[0,10)", "0+1", 0}, {"A@[0,10)", "0+1+1", 5}, {"A@[5,15)", "0+1", 5},
				{"B@[5,15)", "0+2", 10}, {"B@[10,20)", "0+2", 10},
				{"C@[10,20)", "0+3", 15}, {"C@[15,25)", "0+3", 15},
				{"D@[15,25)", "0+4", 20}, {"D@[20,30)", "0+4", 20},
			},
		},
		{
			from:  "KStreamWindowAggregateTest.shouldEmitWithInterval0 (ON_WINDOW_CLOSE)",
			build: timeAggregate(hop10by5grace5, true, stringInit),
			in:    interval0In,
			key:   windowKey(ms(10)),
			want:  []kv{{"A@[0,10)", "0+1+1", 5}, {"A@[5,15)", "0+1", 5}, {"B@[5,15)", "0+2", 10}},
		},
		{
			// A new processor (here: the task restarted from its commit)
			// emits no window that closed before it.
			from:         "KStreamWindowAggregateTest.shouldEmitFromLastEmitTime (ON_WINDOW_CLOSE)",
			build:        timeAggregate(hop10by5grace5, true, stringInit),
			in:           keyed("topic", "A", "1", 0, "B", "2", 5, "C", "3", 15, "D", "4", 25),
			restartAfter: 3,
			key:          windowKey(ms(10)),
			want: []kv{
				{"A@[0,10)", "0+1", 0}, {"B@[0,10)", "0+2", 5},
				{"B@[5,15)", "0+2", 5}, {"C@[10,20)", "0+3", 15},
			},
		},
	})
}
