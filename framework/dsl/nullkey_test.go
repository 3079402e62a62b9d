package dsl_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/driver"
	"github.com/causeway-stream/causeway/framework/dsl"
	"github.com/causeway-stream/causeway/operators"
)

// Records without a key, as Kafka Streams treats them: a table, an
// aggregation, a windowed aggregation and an inner join skip them,
// reported as "null-key", and the task goes on; a left join (stream-table)
// and the kept side of a left stream join hand them on with no partner
// (KIP-962). A keyed record after them is processed as usual.
func TestRecordsWithoutAKey(t *testing.T) {
	tests := []struct {
		name    string
		build   func(b *dsl.Builder)
		in      []framework.Record // Topic says where
		want    []string           // values reaching "out"
		skipped int
	}{
		{
			name: "table",
			build: func(b *dsl.Builder) {
				dsl.TableFrom(b, "rows", "rows", text).ToStream().To("out")
			},
			in:      []framework.Record{{Topic: "rows", Value: []byte("no key")}, {Topic: "rows", Key: []byte("k"), Value: []byte("v")}},
			want:    []string{"v"},
			skipped: 1,
		},
		{
			name: "aggregation",
			build: func(b *dsl.Builder) {
				dsl.Aggregate(dsl.From(b, "in", text).GroupByKey(), "agg", func() string { return "" },
					func(_, v, acc string) (string, error) { return acc + v, nil }, nil).ToStream().To("out")
			},
			in:      []framework.Record{{Topic: "in", Value: []byte("a")}, {Topic: "in", Key: []byte("k"), Value: []byte("b")}},
			want:    []string{"b"},
			skipped: 1,
		},
		{
			name: "windowed aggregation: the record moves no stream time either",
			build: func(b *dsl.Builder) {
				dsl.WindowedAggregate(dsl.WindowedBy(dsl.From(b, "in", text).GroupByKey(), operators.Tumbling(time.Second, 0)), "agg",
					func() string { return "" }, func(_, v, acc string) (string, error) { return acc + v, nil }, nil).ToStream().To("out")
			},
			in: []framework.Record{
				{Topic: "in", Value: []byte("far ahead"), Timestamp: time.UnixMilli(60_000)},
				{Topic: "in", Key: []byte("k"), Value: []byte("b"), Timestamp: time.UnixMilli(10)},
			},
			want:    []string{"b"},
			skipped: 1,
		},
		{
			name: "stream-table join",
			build: func(b *dsl.Builder) {
				dsl.Join(dsl.From(b, "in", text), dsl.TableFrom(b, "rows", "rows", text),
					func(_, v, row string) (string, error) { return v + "+" + row, nil }).To("out")
			},
			in: []framework.Record{{Topic: "rows", Key: []byte("k"), Value: []byte("r")},
				{Topic: "in", Value: []byte("a")}, {Topic: "in", Key: []byte("k"), Value: []byte("b")}},
			want:    []string{"b+r"},
			skipped: 1,
		},
		{
			name: "stream-table left join",
			build: func(b *dsl.Builder) {
				dsl.LeftJoin(dsl.From(b, "in", text), dsl.TableFrom(b, "rows", "rows", text),
					func(_, v, row string, found bool) (string, error) { return v + "+" + row, nil }).To("out")
			},
			in: []framework.Record{{Topic: "rows", Key: []byte("k"), Value: []byte("r")},
				{Topic: "in", Value: []byte("a")}, {Topic: "in", Key: []byte("k"), Value: []byte("b")}},
			want: []string{"a+", "b+r"},
		},
		{
			name: "left stream join: the left record alone, the right one skipped",
			build: func(b *dsl.Builder) {
				dsl.LeftJoinStreams(dsl.From(b, "left", text), dsl.From(b, "right", text), dsl.JoinWindowsOf(time.Second, 0), "j",
					func(_, l, r string, found bool) (string, error) { return l + "+" + r, nil }).WithSerdes(text.Key, text.Value).To("out")
			},
			in: []framework.Record{{Topic: "left", Value: []byte("a")}, {Topic: "right", Value: []byte("x")},
				{Topic: "left", Key: []byte("k"), Value: []byte("b")}, {Topic: "right", Key: []byte("k"), Value: []byte("y")}},
			want:    []string{"a+", "b+y"},
			skipped: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := dsl.NewBuilder("null-keys")
			tt.build(b)
			topo, err := b.Build()
			require.NoError(t, err)
			d, err := driver.New(topo)
			require.NoError(t, err)
			for _, r := range tt.in {
				if r.Timestamp.IsZero() {
					r.Timestamp = time.UnixMilli(1000)
				}
				_, _, err := d.Pipe(r.Topic, r)
				require.NoError(t, err)
				require.NoError(t, d.Run(), "a record without a key fails no task")
			}
			out, err := d.Records("out")
			require.NoError(t, err)
			var got []string
			for _, r := range out {
				got = append(got, string(r.Value))
			}
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.skipped, countDropped(d.Dropped(), framework.DropNullKey))
		})
	}
}
