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
