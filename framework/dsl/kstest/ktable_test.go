package kstest

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/causeway-stream/causeway/framework/dsl"
)

// even is KTableFilterTest's predicate, on the text of a number.
func even(_ string, v string) bool {
	n, _ := strconv.Atoi(v)
	return n%2 == 0
}

// filtered reads topic1 as a table and writes its filter (or filterNot)
// table's changes to "out".
func filtered(not bool) func(b *dsl.Builder) {
	return func(b *dsl.Builder) {
		t := dsl.TableFrom(b, "topic1", "table1", text)
		if not {
			t = t.FilterNot("table3", even)
		} else {
			t = t.Filter("table2", even)
		}
		t.ToStream().To("out")
	}
}

// KTableFilterTest.doTestKTable's inputs: four rows, then two deletions.
var filterIn = []in{{"topic1", "A", "1", 10}, {"topic1", "B", "2", 5}, {"topic1", "C", "3", 8}, {"topic1", "D", "4", 14},
	{"topic1", "A", null, 18}, {"topic1", "B", null, 15}}

func TestKTableFilter(t *testing.T) {
	runAll(t, []kcase{
		{
			from: "KTableFilterTest.shouldPassThroughOnMaterialization (filter; every table here is materialized)", build: filtered(false), in: filterIn,
			want: []kv{{"A", null, 10}, {"B", "2", 5}, {"C", null, 8}, {"D", "4", 14}, {"A", null, 18}, {"B", null, 15}},
		},
		{
			from: "KTableFilterTest.shouldPassThroughOnMaterialization (filterNot)", build: filtered(true), in: filterIn,
			want: []kv{{"A", "1", 10}, {"B", null, 5}, {"C", "3", 8}, {"D", null, 14}, {"A", null, 18}, {"B", null, 15}},
		},
		{
			from: "KTableMapValuesTest.testKTable and testQueryableKTable (every table here is materialized)", build: firstDigit,
			in:   []in{{"topic1", "A", "1", 5}, {"topic1", "B", "2", 25}, {"topic1", "C", "3", 20}, {"topic1", "D", "4", 10}},
			want: []kv{{"A", "1", 5}, {"B", "2", 25}, {"C", "3", 20}, {"D", "4", 10}},
		},
		{
			from: "KTableMapValuesTest.testNotSendingOldValue (the new values, through toStream)", build: firstDigit,
			in: []in{{"topic1", "A", "01", 5}, {"topic1", "B", "01", 10}, {"topic1", "C", "01", 15}, {"topic1", "A", "02", 10}, {"topic1", "B", "02", 8},
				{"topic1", "A", "03", 20}, {"topic1", "A", null, 30}},
			want: []kv{{"A", "1", 5}, {"B", "1", 10}, {"C", "1", 15}, {"A", "2", 10}, {"B", "2", 8}, {"A", "3", 20}, {"A", null, 30}},
		},
	})
}

// firstDigit is KTableMapValuesTest's mapValues: the number a value's
// text means (the test's charAt(0) - 48 on one digit, Integer.valueOf on
// two), written as text.
func firstDigit(b *dsl.Builder) {
	t := dsl.TableFrom(b, "topic1", "table1", text)
	dsl.TableMapValues(t, "table2", func(_, v string) (string, error) {
		n, err := strconv.Atoi(v)
		return strconv.Itoa(n), err
	}, nil).ToStream().To("out")
}

// A filtered table is a table like any other: a stream joins the rows it
// keeps, and not those it leaves out, as they change.
func TestAStreamJoinsAFilteredTable(t *testing.T) {
	runAll(t, []kcase{{
		from: "Causeway's own: a stream-table join against KTable.filter",
		build: func(b *dsl.Builder) {
			evens := dsl.TableFrom(b, "tableTopic", "table", text).Filter("evens", even)
			dsl.Join(dsl.From(b, "streamTopic", text), evens, func(_, v, row string) (string, error) { return v + "+" + row, nil }).To("out")
		},
		in: []in{{"tableTopic", "A", "1", 0}, {"tableTopic", "B", "2", 0}, {"streamTopic", "A", "x", 1}, {"streamTopic", "B", "y", 2},
			{"tableTopic", "A", "4", 3}, {"tableTopic", "B", "5", 3}, {"streamTopic", "A", "z", 4}, {"streamTopic", "B", "w", 5}},
		want: []kv{{"B", "y+2", 2}, {"A", "z+4", 4}},
	}})
}

func TestKStreamToTable(t *testing.T) {
	stringTables := func(b *dsl.Builder) (dsl.Table[string, string], dsl.Table[string, string]) {
		return dsl.From(b, "left", text).ToTable("left-table"), dsl.From(b, "right", text).ToTable("right-table")
	}
	runAll(t, []kcase{
		{
			from: "KStreamImplTest.shouldSupportKeyChangeKTableFromKStream (the new keys as text)",
			build: func(b *dsl.Builder) {
				byIndex := dsl.Map(dsl.From(b, "input", text), func(k, v string) (string, string, error) { return strconv.Itoa(int(k[0] - 'A')), v, nil })
				byIndex.ToTable("table").ToStream().To("out")
			},
			in: []in{{"input", "A", "01", 5}, {"input", "B", "02", 100}, {"input", "C", "03", 0}, {"input", "D", "04", 0},
				{"input", "A", "05", 10}, {"input", "A", "06", 8}},
			want: []kv{{"0", "01", 5}, {"1", "02", 100}, {"2", "03", 0}, {"3", "04", 0}, {"0", "05", 10}, {"0", "06", 8}},
		},
		{
			from: "KStreamImplTest.shouldSupportTableTableJoinWithKStreamToKTable",
			build: func(b *dsl.Builder) {
				l, r := stringTables(b)
				dsl.JoinTables(l, r, func(_ string, lv, rv string) (string, error) { return lv + "+" + rv, nil }).ToStream().To("out")
			},
			in: []in{{"right", "lhs1", "rhsValue1", 0}, {"right", "rhs2", "rhsValue2", 0}, {"right", "lhs3", "rhsValue3", 0},
				{"left", "lhs1", "lhsValue1", 0}, {"left", "lhs2", "lhsValue2", 0}, {"left", "lhs3", "lhsValue3", 0}, {"left", "lhs1", "lhsValue4", 0}},
			want: []kv{{"lhs1", "lhsValue1+rhsValue1", 0}, {"lhs3", "lhsValue3+rhsValue3", 0}, {"lhs1", "lhsValue4+rhsValue1", 0}},
		},
		{
			from: "KStreamImplTest.shouldSupportStreamTableJoinWithKStreamToKTable",
			build: func(b *dsl.Builder) {
				table := dsl.From(b, "tableTopic", text).ToTable("table")
				dsl.Join(dsl.From(b, "streamTopic", text), table, func(_, v, row string) (string, error) { return v + "+" + row, nil }).To("out")
			},
			in: []in{{"tableTopic", "lhs1", "rhsValue1", 0}, {"tableTopic", "rhs2", "rhsValue2", 0}, {"tableTopic", "lhs3", "rhsValue3", 0},
				{"streamTopic", "lhs1", "lhsValue1", 0}, {"streamTopic", "lhs2", "lhsValue2", 0}, {"streamTopic", "lhs3", "lhsValue3", 0}},
			want: []kv{{"lhs1", "lhsValue1+rhsValue1", 0}, {"lhs3", "lhsValue3+rhsValue3", 0}},
		},
		{
			from: "Causeway's own: KStream.toTable takes a record without a value as a deletion",
			build: func(b *dsl.Builder) {
				dsl.From(b, "input", text).ToTable("table").ToStream().To("out")
			},
			in:   []in{{"input", "A", "1", 0}, {"input", "A", null, 1}, {"input", "B", "2", 2}},
			want: []kv{{"A", "1", 0}, {"A", null, 1}, {"B", "2", 2}},
		},
	})
}

// tableAggregate reads topic1 as a table, regroups it with selector and
// aggregates the groups with KTableAggregateTest's string adder and
// remover from "0", into "out".
func tableAggregate(selector func(k, v string) (string, string, bool, error)) func(b *dsl.Builder) {
	return func(b *dsl.Builder) {
		g := dsl.GroupTable(dsl.TableFrom(b, "topic1", "table1", text), "regrouped", selector, text)
		dsl.AggregateTable(g, "topic1-Canonized", func() string { return "0" },
			func(_, v, agg string) (string, error) { return agg + "+" + v, nil },
			func(_, v, agg string) (string, error) { return agg + "-" + v, nil }, nil).ToStream().To("out")
	}
}

func TestKGroupedTableAggregate(t *testing.T) {
	count := func(b *dsl.Builder) {
		g := dsl.GroupTable(dsl.TableFrom(b, "count-test-input", "table1", text), "by-value",
			func(_, v string) (string, string, bool, error) { return v, v, true, nil }, text)
		dsl.MapValues(dsl.CountTable(g, "count").ToStream(), func(_ string, n int64) (string, error) { return strconv.FormatInt(n, 10), nil }).To("out")
	}
	runAll(t, []kcase{
		{
			from:  "KTableAggregateTest.testAggBasic (a row that keeps its group: one result, its old value taken out and its new one added)",
			build: tableAggregate(func(k, v string) (string, string, bool, error) { return k, v, true, nil }),
			in: []in{{"topic1", "A", "1", 10}, {"topic1", "B", "2", 15}, {"topic1", "A", "3", 20}, {"topic1", "B", "4", 18},
				{"topic1", "C", "5", 5}, {"topic1", "D", "6", 25}, {"topic1", "B", "7", 15}, {"topic1", "C", "8", 10}},
			want: []kv{{"A", "0+1", 10}, {"B", "0+2", 15}, {"A", "0+1-1+3", 20}, {"B", "0+2-2+4", 18}, {"C", "0+5", 5}, {"D", "0+6", 25},
				{"B", "0+2-2+4-4+7", 18}, {"C", "0+5-5+8", 10}},
		},
		{
			from: "KTableAggregateTest.testAggRepartition (a row that moves: taken out of its old group, then added to its new one; no group for \"null\" and \"NULL\")",
			build: tableAggregate(func(k, v string) (string, string, bool, error) {
				if k == "null" || k == "NULL" {
					return "", "", false, nil
				}
				return v, v, true, nil
			}),
			in: []in{{"topic1", "A", "1", 10}, {"topic1", "A", null, 15}, {"topic1", "A", "1", 12}, {"topic1", "B", "2", 20},
				{"topic1", "null", "3", 25}, {"topic1", "B", "4", 23}, {"topic1", "NULL", "5", 24}, {"topic1", "B", "7", 22}},
			want: []kv{{"1", "0+1", 10}, {"1", "0+1-1", 15}, {"1", "0+1-1+1", 15}, {"2", "0+2", 20}, {"2", "0+2-2", 23},
				{"4", "0+4", 23}, {"4", "0+4-4", 23}, {"7", "0+7", 22}},
		},
		{
			from:  "KTableAggregateTest.testCount",
			build: count,
			in: []in{{"count-test-input", "A", "green", 10}, {"count-test-input", "B", "green", 9}, {"count-test-input", "A", "blue", 12},
				{"count-test-input", "C", "yellow", 15}, {"count-test-input", "D", "green", 11}},
			want: []kv{{"green", "1", 10}, {"green", "2", 10}, {"green", "1", 12}, {"blue", "1", 12}, {"yellow", "1", 15}, {"green", "2", 12}},
		},
	})
}

// setOf and setText are KTableReduceTest's sets of strings, as the sorted
// text of their members joined by commas.
func setOf(text string) map[string]bool {
	out := map[string]bool{}
	for _, m := range strings.Split(text, ",") {
		if m != "" {
			out[m] = true
		}
	}
	return out
}

func setText(s map[string]bool) string {
	members := slices.Sorted(maps.Keys(s))
	return strings.Join(members, ",")
}

func TestKGroupedTableReduce(t *testing.T) {
	runAll(t, []kcase{{
		from: "KTableReduceTest.shouldAddAndSubtract (the changes from a table regrouped by its own key)",
		build: func(b *dsl.Builder) {
			g := dsl.GroupTable(dsl.TableFrom(b, "topic1", "table1", text), "regrouped",
				func(k, v string) (string, string, bool, error) { return k, v, true, nil }, text)
			dsl.ReduceTable(g, "myStore",
				func(acc, v string) (string, error) { // union
					u := setOf(acc)
					maps.Copy(u, setOf(v))
					return setText(u), nil
				},
				func(acc, v string) (string, error) { // difference
					d := setOf(acc)
					for m := range setOf(v) {
						delete(d, m)
					}
					return setText(d), nil
				}).ToStream().To("out")
		},
		in:   []in{{"topic1", "A", "a", 10}, {"topic1", "A", "b", 15}, {"topic1", "A", null, 12}},
		want: []kv{{"A", "a", 10}, {"A", "b", 15}, {"A", "", 15}},
	}})
}

// KGroupedTableImplTest's cases that check results, each as the output's
// last value per key (what the Java test reads from the store), the
// output in full here. Numbers go as text.
func TestKGroupedTableImpl(t *testing.T) {
	selectValue := func(_, v string) (string, string, bool, error) { return v, v, true, nil }
	processData := []in{{"input", "A", "1", 10}, {"input", "B", "1", 50}, {"input", "C", "1", 30}, {"input", "D", "2", 40}, {"input", "E", "2", 60}}
	runAll(t, []kcase{
		{
			from: "KGroupedTableImplTest.shouldReduce (assertReduced: A 5@50, B 6@30 at the end)",
			build: func(b *dsl.Builder) {
				g := dsl.GroupTable(dsl.TableFrom(b, "input", "store", text), "projected", func(k, v string) (string, string, bool, error) {
					f, err := strconv.ParseFloat(v, 64)
					return k, strconv.Itoa(int(f)), true, err
				}, text)
				add := func(a, v string) (string, error) {
					x, _ := strconv.Atoi(a)
					y, _ := strconv.Atoi(v)
					return strconv.Itoa(x + y), nil
				}
				sub := func(a, v string) (string, error) {
					x, _ := strconv.Atoi(a)
					y, _ := strconv.Atoi(v)
					return strconv.Itoa(x - y), nil
				}
				dsl.ReduceTable(g, "reduced", add, sub).ToStream().To("out")
			},
			in: []in{{"input", "A", "1.1", 10}, {"input", "B", "2.2", 11}, {"input", "A", "2.6", 30}, {"input", "B", "1.3", 30},
				{"input", "A", "5.7", 50}, {"input", "B", "6.2", 20}},
			want: []kv{{"A", "1", 10}, {"B", "2", 11}, {"A", "2", 30}, {"B", "1", 30}, {"A", "5", 50}, {"B", "6", 30}},
		},
		{
			from: "KGroupedTableImplTest.shouldCountAndMaterializeResults (1: 3@50, 2: 2@60 at the end)",
			build: func(b *dsl.Builder) {
				g := dsl.GroupTable(dsl.TableFrom(b, "input", "table", text), "by-value", selectValue, text)
				dsl.MapValues(dsl.CountTable(g, "count").ToStream(), func(_ string, n int64) (string, error) { return strconv.FormatInt(n, 10), nil }).To("out")
			},
			in:   processData,
			want: []kv{{"1", "1", 10}, {"1", "2", 50}, {"1", "3", 50}, {"2", "1", 40}, {"2", "2", 60}},
		},
		{
			from: "KGroupedTableImplTest.shouldAggregateAndMaterializeResults (1: 0+1+1+1@50, 2: 0+2+2@60 at the end)",
			build: func(b *dsl.Builder) {
				g := dsl.GroupTable(dsl.TableFrom(b, "input", "table", text), "by-value", selectValue, text)
				dsl.AggregateTable(g, "aggregate", func() string { return "0" },
					func(_, v, agg string) (string, error) { return agg + "+" + v, nil },
					func(_, v, agg string) (string, error) { return agg + "-" + v, nil }, nil).ToStream().To("out")
			},
			in:   processData,
			want: []kv{{"1", "0+1", 10}, {"1", "0+1+1", 50}, {"1", "0+1+1+1", 50}, {"2", "0+2", 40}, {"2", "0+2+2", 60}},
		},
	})
}

// A filtered table regrouped: a row the filter comes to refuse is taken
// out of its group, which needs the row as it was in the filtered
// table's own store.
func TestAFilteredTableRegrouped(t *testing.T) {
	runAll(t, []kcase{{
		from: "Causeway's own: KTable.filter then groupBy().count()",
		build: func(b *dsl.Builder) {
			evens := dsl.TableFrom(b, "input", "table", text).Filter("evens", even)
			g := dsl.GroupTable(evens, "by-value", func(_, v string) (string, string, bool, error) { return v, v, true, nil }, text)
			dsl.MapValues(dsl.CountTable(g, "count").ToStream(), func(_ string, n int64) (string, error) { return strconv.FormatInt(n, 10), nil }).To("out")
		},
		in:   []in{{"input", "A", "2", 1}, {"input", "B", "2", 2}, {"input", "A", "3", 3}, {"input", "A", "4", 4}},
		want: []kv{{"2", "1", 1}, {"2", "2", 2}, {"2", "1", 3}, {"4", "1", 4}},
	}})
}
