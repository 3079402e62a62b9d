package kstest

import (
	"strconv"
	"testing"

	"github.com/causeway-stream/causeway/framework/dsl"
	"github.com/causeway-stream/causeway/framework/serde"
)

// number is Kafka Streams' Serdes.Integer() in these cases, written as
// its decimal text so that inputs and outputs read as the Java test's.
var number = serde.Codec[string, int]{Key: serde.String(), Value: serde.JSON[int]()}

// CogroupedKStreamImplTest: streams cogrouped into one aggregate, each
// with its aggregator; an aggregate's timestamp is the latest of its
// records'. Where the Java test stops reading before the last outputs,
// the case lists them too, made by the same rule (marked "then").
func TestCogroupedKStreamImpl(t *testing.T) {
	concat := func(_ string, v, acc string) (string, error) { return acc + v, nil }
	strSum := func(_ string, v string, acc int) (int, error) {
		n, err := strconv.Atoi(v)
		return acc + n, err
	}
	sum := func(_ string, v int, acc int) (int, error) { return acc + v, nil }
	// MockAggregator's TOSTRING_ADDER and TOSTRING_REMOVER, and
	// MockInitializer.STRING_INIT.
	adder := func(_ string, v, acc string) (string, error) { return acc + "+" + v, nil }
	remover := func(_ string, v, acc string) (string, error) { return acc + "-" + v, nil }
	zero := func() string { return "0" }
	empty := func() string { return "" }
	one := func(b *dsl.Builder) dsl.Grouped[string, string] { return dsl.From(b, "one", text).GroupByKey() }
	two := func(b *dsl.Builder) dsl.Grouped[string, string] { return dsl.From(b, "two", text).GroupByKey() }
	toText := func(_ string, n int) (string, error) { return strconv.Itoa(n), nil }
	shared := []in{{"one", "k1", "A", 0}, {"one", "k2", "A", 1}, {"one", "k1", "A", 10}, {"one", "k2", "A", 100},
		{"two", "k2", "B", 100}, {"two", "k2", "B", 200}, {"two", "k1", "B", 1}, {"two", "k2", "B", 500}, {"two", "k1", "B", 500},
		{"two", "k2", "B", 500}, {"two", "k3", "B", 500}, {"two", "k2", "B", 100}}
	sums := []in{{"one", "k1", "1", 0}, {"one", "k2", "1", 1}, {"one", "k1", "1", 10}, {"one", "k2", "1", 100},
		{"two", "k2", "2", 100}, {"two", "k2", "2", 200}, {"two", "k1", "2", 1}, {"two", "k2", "2", 500}, {"two", "k1", "2", 500},
		{"two", "k2", "3", 500}, {"two", "k3", "2", 500}, {"two", "k2", "2", 100}}
	sumsWant := []kv{{"k1", "1", 0}, {"k2", "1", 1}, {"k1", "2", 10}, {"k2", "2", 100}, {"k2", "4", 100}, {"k2", "6", 200},
		{"k1", "4", 10}, {"k2", "8", 500}, {"k1", "6", 500}, {"k2", "11", 500},
		{"k3", "2", 500}, {"k2", "13", 500}} // then
	runAll(t, []kcase{
		{
			from: "CogroupedKStreamImplTest.shouldCogroupAndAggregateSingleKStreams",
			build: func(b *dsl.Builder) {
				dsl.Cogroup(one(b), concat).Aggregate("store", empty, nil).ToStream().To("out")
			},
			in:   []in{{"one", "k1", "A", 0}, {"one", "k2", "B", 0}, {"one", "k2", "B", 0}, {"one", "k1", "A", 0}},
			want: []kv{{"k1", "A", 0}, {"k2", "B", 0}, {"k2", "BB", 0}, {"k1", "AA", 0}},
		},
		{
			from: "CogroupedKStreamImplTest.testCogroupHandleNullValues",
			build: func(b *dsl.Builder) {
				dsl.Cogroup(one(b), concat).Aggregate("store", empty, nil).ToStream().To("out")
			},
			in:      []in{{"one", "k1", "A", 0}, {"one", "k2", "B", 0}, {"one", "k2", null, 0}, {"one", "k2", "B", 0}, {"one", "k1", "A", 0}},
			want:    []kv{{"k1", "A", 0}, {"k2", "B", 0}, {"k2", "BB", 0}, {"k1", "AA", 0}},
			noValue: 1,
		},
		{
			from: "CogroupedKStreamImplTest.shouldCogroupAndAggregateTwoKStreamsWithDistinctKeys",
			build: func(b *dsl.Builder) {
				dsl.CogroupWith(dsl.Cogroup(one(b), concat), two(b), concat).Aggregate("store", empty, nil).ToStream().To("out")
			},
			in: []in{{"one", "k1", "A", 0}, {"one", "k1", "A", 1}, {"one", "k1", "A", 10}, {"one", "k1", "A", 100},
				{"two", "k2", "B", 100}, {"two", "k2", "B", 200}, {"two", "k2", "B", 1}, {"two", "k2", "B", 500}, {"two", "k2", "B", 500},
				{"two", "k2", "B", 100}},
			want: []kv{{"k1", "A", 0}, {"k1", "AA", 1}, {"k1", "AAA", 10}, {"k1", "AAAA", 100}, {"k2", "B", 100}, {"k2", "BB", 200},
				{"k2", "BBB", 200}, {"k2", "BBBB", 500}, {"k2", "BBBBB", 500}, {"k2", "BBBBBB", 500}},
		},
		{
			from: "CogroupedKStreamImplTest.shouldCogroupAndAggregateTwoKStreamsWithSharedKeys",
			build: func(b *dsl.Builder) {
				dsl.CogroupWith(dsl.Cogroup(one(b), concat), two(b), concat).Aggregate("store", empty, nil).ToStream().To("out")
			},
			in: shared,
			want: []kv{{"k1", "A", 0}, {"k2", "A", 1}, {"k1", "AA", 10}, {"k2", "AA", 100}, {"k2", "AAB", 100}, {"k2", "AABB", 200},
				{"k1", "AAB", 10}, {"k2", "AABBB", 500}, {"k1", "AABB", 500}, {"k2", "AABBBB", 500},
				{"k3", "B", 500}, {"k2", "AABBBBB", 500}}, // then
		},
		{
			from: "CogroupedKStreamImplTest.shouldAllowDifferentOutputTypeInCoGroup (the Integer aggregate written as text)",
			build: func(b *dsl.Builder) {
				table := dsl.CogroupWith(dsl.Cogroup(one(b), strSum), two(b), strSum).Aggregate("store1", func() int { return 0 }, serde.JSON[int]())
				dsl.MapValues(table.ToStream(), toText).To("out")
			},
			in: sums, want: sumsWant,
		},
		{
			from: "CogroupedKStreamImplTest.shouldCoGroupStreamsWithDifferentInputTypes (Integers as text)",
			build: func(b *dsl.Builder) {
				ints := dsl.From(b, "two", number).GroupByKey()
				table := dsl.CogroupWith(dsl.Cogroup(one(b), strSum), ints, sum).Aggregate("store1", func() int { return 0 }, serde.JSON[int]())
				dsl.MapValues(table.ToStream(), toText).To("out")
			},
			in: sums, want: sumsWant,
		},
		{
			from: "CogroupedKStreamImplTest.testCogroupKeyMixedAggregators",
			build: func(b *dsl.Builder) {
				dsl.CogroupWith(dsl.Cogroup(one(b), remover), two(b), adder).Aggregate("store1", zero, serde.String()).ToStream().To("out")
			},
			in: []in{{"one", "k1", "1", 0}, {"one", "k2", "1", 1}, {"one", "k1", "1", 10}, {"one", "k2", "1", 100},
				{"two", "k1", "2", 500}, {"two", "k2", "2", 500}, {"two", "k1", "2", 500}, {"two", "k2", "2", 100}},
			want: []kv{{"k1", "0-1", 0}, {"k2", "0-1", 1}, {"k1", "0-1-1", 10}, {"k2", "0-1-1", 100}, {"k1", "0-1-1+2", 500},
				{"k2", "0-1-1+2", 500}, {"k1", "0-1-1+2+2", 500}, {"k2", "0-1-1+2+2", 500}},
		},
		{
			from: "Causeway's own: a stream grouped by a new key is repartitioned before it is cogrouped",
			build: func(b *dsl.Builder) {
				byFirstLetter := dsl.GroupBy(dsl.From(b, "two", text), func(_ string, v string) (string, error) { return v[:1], nil })
				dsl.CogroupWith(dsl.Cogroup(one(b), concat), byFirstLetter, adder).Aggregate("letters", empty, nil).ToStream().To("out")
			},
			in:   []in{{"one", "a", "x", 0}, {"two", "k1", "apple", 5}, {"two", "k2", "berry", 6}, {"one", "b", "y", 7}, {"two", "k3", "avocado", 3}},
			want: []kv{{"a", "x", 0}, {"a", "x+apple", 5}, {"b", "+berry", 6}, {"b", "+berryy", 7}, {"a", "x+apple+avocado", 5}},
		},
	})
}
