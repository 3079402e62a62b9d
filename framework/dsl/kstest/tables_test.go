package kstest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/dsl"
	"github.com/causeway-stream/causeway/operators"
)

// streamTableJoin joins streamTopic with the table of tableTopic, inner or
// left, the results to "out".
func streamTableJoin(leftJoin bool) func(b *dsl.Builder) {
	return func(b *dsl.Builder) {
		stream := dsl.From(b, "streamTopic", text)
		table := dsl.TableFrom(b, "tableTopic", "table", text)
		var joined dsl.Stream[string, string]
		if leftJoin {
			joined = dsl.LeftJoin(stream, table, func(_, v, row string, found bool) (string, error) { return joinValue(v, true, row, found), nil })
		} else {
			joined = dsl.Join(stream, table, func(_, v, row string) (string, error) { return joinValue(v, true, row, true), nil })
		}
		joined.To("out")
	}
}

// toStream is KStreamKTableJoinTest.pushToStream: n records, key i at
// time i.
func toStream(n int, prefix string) []in {
	out := make([]in, n)
	for i := range n {
		out[i] = in{"streamTopic", fmt.Sprint(i), fmt.Sprintf("%s%d", prefix, i), int64(i)}
	}
	return out
}

// toTable is KStreamKTableJoinTest.pushToTable, at a fixed time where the
// Java test draws a random one (the results take the stream record's).
func toTable(n int, prefix string) []in {
	out := make([]in, n)
	for i := range n {
		out[i] = in{"tableTopic", fmt.Sprint(i), fmt.Sprintf("%s%d", prefix, i), 987654321}
	}
	return out
}

// deleteFromTable is pushNullValueToTable: tombstones for keys 0 and 1.
func deleteFromTable() []in {
	return []in{{"tableTopic", "0", null, 0}, {"tableTopic", "1", null, 0}}
}

func TestStreamTableJoin(t *testing.T) {
	x4 := []kv{{"0", "X0+YY0", 0}, {"1", "X1+YY1", 1}, {"2", "X2+YY2", 2}, {"3", "X3+YY3", 3}}
	runAll(t, []kcase{
		{from: "KStreamKTableJoinTest.shouldNotJoinWithEmptyTableOnStreamUpdates", build: streamTableJoin(false), in: toStream(2, "X")},
		{
			from:  "KStreamKTableJoinTest.shouldNotJoinOnTableUpdates",
			build: streamTableJoin(false),
			in:    seq(toStream(2, "X"), toTable(2, "Y"), toStream(4, "X"), toTable(4, "YY"), toStream(4, "X"), toTable(4, "YYY")),
			want:  seq([]kv{{"0", "X0+Y0", 0}, {"1", "X1+Y1", 1}}, x4),
		},
		{
			from:  "KStreamKTableJoinTest.shouldJoinOnlyIfMatchFoundOnStreamUpdates",
			build: streamTableJoin(false),
			in:    seq(toTable(2, "Y"), toStream(4, "X")),
			want:  []kv{{"0", "X0+Y0", 0}, {"1", "X1+Y1", 1}},
		},
		{
			from:  "KStreamKTableJoinTest.shouldClearTableEntryOnNullValueUpdates",
			build: streamTableJoin(false),
			in:    seq(toTable(4, "Y"), toStream(4, "X"), deleteFromTable(), toStream(4, "XX")),
			want: []kv{{"0", "X0+Y0", 0}, {"1", "X1+Y1", 1}, {"2", "X2+Y2", 2}, {"3", "X3+Y3", 3},
				{"2", "XX2+Y2", 2}, {"3", "XX3+Y3", 3}},
		},
		{
			from:  "KStreamKTableLeftJoinTest.shouldJoinWithEmptyTableOnStreamUpdates",
			build: streamTableJoin(true),
			in:    toStream(2, "X"),
			want:  []kv{{"0", "X0+null", 0}, {"1", "X1+null", 1}},
		},
		{
			from:  "KStreamKTableLeftJoinTest.shouldNotJoinOnTableUpdates",
			build: streamTableJoin(true),
			in:    seq(toStream(2, "X"), toTable(2, "Y"), toStream(4, "X"), toTable(4, "YY"), toStream(4, "X"), toTable(4, "YYY")),
			want: seq([]kv{{"0", "X0+null", 0}, {"1", "X1+null", 1},
				{"0", "X0+Y0", 0}, {"1", "X1+Y1", 1}, {"2", "X2+null", 2}, {"3", "X3+null", 3}}, x4),
		},
		{
			from:  "KStreamKTableLeftJoinTest.shouldJoinRegardlessIfMatchFoundOnStreamUpdates",
			build: streamTableJoin(true),
			in:    seq(toTable(2, "Y"), toStream(4, "X")),
			want:  []kv{{"0", "X0+Y0", 0}, {"1", "X1+Y1", 1}, {"2", "X2+null", 2}, {"3", "X3+null", 3}},
		},
		{
			from:  "KStreamKTableLeftJoinTest.shouldClearTableEntryOnNullValueUpdates",
			build: streamTableJoin(true),
			in:    seq(toTable(4, "Y"), toStream(4, "X"), deleteFromTable(), toStream(4, "XX")),
			want: []kv{{"0", "X0+Y0", 0}, {"1", "X1+Y1", 1}, {"2", "X2+Y2", 2}, {"3", "X3+Y3", 3},
				{"0", "XX0+null", 0}, {"1", "XX1+null", 1}, {"2", "XX2+Y2", 2}, {"3", "XX3+Y3", 3}},
		},
	})
}

// TimeWindowsTest: the windows a timestamp falls in, and the windows the
// DSL refuses.
func TestTimeWindows(t *testing.T) {
	for _, tt := range []struct {
		from string
		w    operators.Windows
		at   int64
		want []int64 // window starts
	}{
		{"TimeWindowsTest.shouldComputeWindowsForHoppingWindows", operators.Hopping(ms(12), ms(5), 0), 21, []int64{10, 15, 20}},
		{"TimeWindowsTest.shouldComputeWindowsForBarelyOverlappingHoppingWindows", operators.Hopping(ms(6), ms(5), 0), 7, []int64{5}},
		{"TimeWindowsTest.shouldComputeWindowsForTumblingWindows", operators.Tumbling(ms(12), 0), 21, []int64{12}},
	} {
		t.Run(tt.from, func(t *testing.T) {
			var got []int64
			for _, s := range tt.w.Starts(time.UnixMilli(tt.at)) {
				got = append(got, s.UnixMilli())
			}
			assert.Equal(t, tt.want, got)
		})
	}
	for _, tt := range []struct {
		from string
		w    operators.Windows
	}{
		{"TimeWindowsTest.windowSizeMustNotBeZero", operators.Tumbling(0, 0)},
		{"TimeWindowsTest.windowSizeMustNotBeNegative", operators.Tumbling(ms(-1), 0)},
		{"TimeWindowsTest.advanceIntervalMustNotBeZero", operators.Hopping(ms(123), 0, 0)},
		{"TimeWindowsTest.advanceIntervalMustNotBeNegative", operators.Hopping(ms(123), ms(-1), 0)},
		{"TimeWindowsTest.advanceIntervalMustNotBeLargerThanWindowSize", operators.Hopping(ms(123), ms(124), 0)},
		{"TimeWindowsTest.gracePeriodShouldEnforceBoundaries", operators.Tumbling(ms(3), ms(-1))},
	} {
		t.Run(tt.from, func(t *testing.T) {
			b := dsl.NewBuilder("windows")
			dsl.WindowedBy(dsl.From(b, "topic", text).GroupByKey(), tt.w).Count("counts").ToStream().To("out")
			_, err := b.Build()
			require.ErrorIs(t, err, framework.ErrInvalidTopology, "windows %+v", tt.w)
		})
	}
	t.Run("TimeWindowsTest.gracePeriodShouldEnforceBoundaries/zero grace is valid", func(t *testing.T) {
		b := dsl.NewBuilder("windows")
		dsl.WindowedBy(dsl.From(b, "topic", text).GroupByKey(), operators.Tumbling(ms(3), 0)).Count("counts").ToStream().To("out")
		_, err := b.Build()
		require.NoError(t, err)
	})
}

// tableTableJoin joins the tables of topic1 and topic2, the result's
// changes to "out".
func tableTableJoin(kind joinKind) func(b *dsl.Builder) {
	return func(b *dsl.Builder) {
		t1, t2 := dsl.TableFrom(b, "topic1", "table1", text), dsl.TableFrom(b, "topic2", "table2", text)
		var joined dsl.Table[string, string]
		switch kind {
		case inner:
			joined = dsl.JoinTables(t1, t2, func(_, l, r string) (string, error) { return joinValue(l, true, r, true), nil })
		case left:
			joined = dsl.LeftJoinTables(t1, t2, func(_, l, r string, rok bool) (string, error) { return joinValue(l, true, r, rok), nil })
		default:
			joined = dsl.OuterJoinTables(t1, t2, func(_, l string, lok bool, r string, rok bool) (string, error) {
				return joinValue(l, lok, r, rok), nil
			})
		}
		joined.ToStream().To("out")
	}
}

// tableJoinInputs is the input of the testJoin methods of
// KTableKTableInnerJoinTest, LeftJoinTest and OuterJoinTest: two records
// without a key among them.
func tableJoinInputs() []in {
	keyed := func(topic, prefix string, ts func(k int) int64, keys ...int) []in {
		var out []in
		for _, k := range keys {
			v := null
			if prefix != null {
				v = fmt.Sprintf("%s%d", prefix, k)
			}
			out = append(out, in{topic, fmt.Sprint(k), v, ts(k)})
		}
		return out
	}
	at := func(ms int64) func(int) int64 { return func(int) int64 { return ms } }
	unkeyed := func(topic, v string, ms int64) []in { return []in{{topic, noKey, v, ms}} }
	return seq(
		keyed("topic1", "X", func(k int) int64 { return 5 + int64(k) }, 0, 1), unkeyed("topic1", "SomeVal", 42),
		keyed("topic2", "Y", func(k int) int64 { return 10 * int64(k) }, 0, 1), unkeyed("topic2", "AnotherVal", 73),
		keyed("topic1", "XX", at(7), 0, 1, 2, 3),
		keyed("topic2", "YY", func(k int) int64 { return 5 * int64(k) }, 0, 1, 2, 3),
		keyed("topic1", "XXX", at(6), 0, 1, 2, 3),
		keyed("topic2", null, at(5), 0), keyed("topic2", null, at(7), 1),
		keyed("topic1", "XXXX", at(13), 0, 1, 2, 3),
		keyed("topic1", null, at(0), 0), keyed("topic1", null, at(42), 1), keyed("topic1", null, at(5), 2), keyed("topic1", null, at(20), 3),
	)
}

// leftRows is what KTableKTableLeftJoinTest and OuterJoinTest both assert,
// but for the last two results.
func leftRows() []kv {
	return []kv{
		{"0", "X0+null", 5}, {"1", "X1+null", 6},
		{"0", "X0+Y0", 5}, {"1", "X1+Y1", 10},
		{"0", "XX0+Y0", 7}, {"1", "XX1+Y1", 10}, {"2", "XX2+null", 7}, {"3", "XX3+null", 7},
		{"0", "XX0+YY0", 7}, {"1", "XX1+YY1", 7}, {"2", "XX2+YY2", 10}, {"3", "XX3+YY3", 15},
		{"0", "XXX0+YY0", 6}, {"1", "XXX1+YY1", 6}, {"2", "XXX2+YY2", 10}, {"3", "XXX3+YY3", 15},
		{"0", "XXX0+null", 6}, {"1", "XXX1+null", 7},
		{"0", "XXXX0+null", 13}, {"1", "XXXX1+null", 13}, {"2", "XXXX2+YY2", 13}, {"3", "XXXX3+YY3", 15},
		{"0", null, 0}, {"1", null, 42},
	}
}

func TestTableTableJoin(t *testing.T) {
	runAll(t, []kcase{
		{
			from:  "KTableKTableInnerJoinTest.testJoin",
			build: tableTableJoin(inner),
			in:    tableJoinInputs(),
			want: []kv{
				{"0", "X0+Y0", 5}, {"1", "X1+Y1", 10},
				{"0", "XX0+Y0", 7}, {"1", "XX1+Y1", 10},
				{"0", "XX0+YY0", 7}, {"1", "XX1+YY1", 7}, {"2", "XX2+YY2", 10}, {"3", "XX3+YY3", 15},
				{"0", "XXX0+YY0", 6}, {"1", "XXX1+YY1", 6}, {"2", "XXX2+YY2", 10}, {"3", "XXX3+YY3", 15},
				{"0", null, 6}, {"1", null, 7},
				{"2", "XXXX2+YY2", 13}, {"3", "XXXX3+YY3", 15},
				{"2", null, 10}, {"3", null, 20},
			},
			nullKey: 2,
		},
		{
			from:    "KTableKTableLeftJoinTest.testJoin",
			build:   tableTableJoin(left),
			in:      tableJoinInputs(),
			want:    append(leftRows(), kv{"2", null, 10}, kv{"3", null, 20}),
			nullKey: 2,
		},
		{
			// The left join's results, but for the last two: the right rows
			// stay when the left ones go.
			from:    "KTableKTableOuterJoinTest.testJoin",
			build:   tableTableJoin(outer),
			in:      tableJoinInputs(),
			want:    append(leftRows(), kv{"2", "null+YY2", 10}, kv{"3", "null+YY3", 20}),
			nullKey: 2,
		},
	})
}
