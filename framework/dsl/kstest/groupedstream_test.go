package kstest

import (
	"strconv"
	"testing"

	"github.com/causeway-stream/causeway/framework/dsl"
	"github.com/causeway-stream/causeway/framework/serde"
)

// KGroupedStreamImplTest's materialized aggregations over its
// processData: an aggregate carries the latest time of its key's records
// (KStreamAggregate and KStreamReduce take the larger of the record's and
// the aggregate's), so C at 3 after A at 5 gives a result at 5; a record
// without a value is skipped and reported. The Java tests assert each
// key's last value and time; the cases list every update, made by the
// same rule.
func TestKGroupedStreamImplAggregations(t *testing.T) {
	data := []in{{"topic", "1", "A", 5}, {"topic", "2", "B", 1}, {"topic", "1", "C", 3}, {"topic", "1", "D", 10},
		{"topic", "3", "E", 8}, {"topic", "3", "F", 9}, {"topic", "3", null, 0}}
	grouped := func(b *dsl.Builder) dsl.Grouped[string, string] { return dsl.From(b, "topic", text).GroupByKey() }
	runAll(t, []kcase{
		{
			from: "KGroupedStreamImplTest.shouldAggregateAndMaterializeResults", in: data, noValue: 1,
			build: func(b *dsl.Builder) {
				dsl.Aggregate(grouped(b), "aggregate", stringInit, toStringAdder, serde.String()).ToStream().To("out")
			},
			want: []kv{{"1", "0+A", 5}, {"2", "0+B", 1}, {"1", "0+A+C", 5}, {"1", "0+A+C+D", 10}, {"3", "0+E", 8}, {"3", "0+E+F", 9}},
		},
		{
			from: "KGroupedStreamImplTest.shouldReduceAndMaterializeResults", in: data, noValue: 1,
			build: func(b *dsl.Builder) {
				grouped(b).Reduce("reduce", func(acc, v string) (string, error) { return acc + "+" + v, nil }).ToStream().To("out")
			},
			want: []kv{{"1", "A", 5}, {"2", "B", 1}, {"1", "A+C", 5}, {"1", "A+C+D", 10}, {"3", "E", 8}, {"3", "E+F", 9}},
		},
		{
			from: "KGroupedStreamImplTest.shouldCountAndMaterializeResults (counts as text)", in: data, noValue: 1,
			build: func(b *dsl.Builder) {
				dsl.MapValues(grouped(b).Count("count").ToStream(), func(_ string, n int64) (string, error) {
					return strconv.FormatInt(n, 10), nil
				}).To("out")
			},
			want: []kv{{"1", "1", 5}, {"2", "1", 1}, {"1", "2", 5}, {"1", "3", 10}, {"3", "1", 8}, {"3", "2", 9}},
		},
	})
}
