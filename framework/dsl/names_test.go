package dsl_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/dsl"
	"github.com/causeway-stream/causeway/operators"
)

// A fused processor is named after what it does: its join, else its
// aggregation, else the table it keeps, else where it reads and writes;
// Named overrides that.
func TestProcessorsAreNamedAfterWhatTheyDo(t *testing.T) {
	tests := []struct {
		name  string
		build func(b *dsl.Builder)
		want  []string
	}{
		{"stateless", func(b *dsl.Builder) {
			dsl.From(b, "lines", text).Filter(func(_, v string) bool { return v != "" }).To("clean")
		}, []string{"lines-to-clean"}},
		{"stateless, two outputs", func(b *dsl.Builder) {
			s := dsl.From(b, "lines", text)
			s.To("a")
			s.To("b")
		}, []string{"lines-to-a-and-b"}},
		{"no output", func(b *dsl.Builder) {
			dsl.From(b, "lines", text).Foreach(func(string, string) error { return nil })
		}, []string{"lines-process"}},
		{"count after a rekey", func(b *dsl.Builder) {
			dsl.Map(dsl.From(b, "lines", text), func(k, v string) (string, string, error) { return v, k, nil }).
				GroupByKey().Count("word-counts").ToStream().To("counts")
		}, []string{"lines-to-word-counts-repartition", "aggregate-word-counts"}},
		{"stream-table join beside its table", func(b *dsl.Builder) {
			accounts := dsl.TableFrom(b, "accounts", "accounts", text)
			dsl.Join(dsl.From(b, "payments", text), accounts, func(_, p, a string) (string, error) { return p + a, nil }).To("out")
		}, []string{"payments-join-accounts"}},
		{"left join", func(b *dsl.Builder) {
			accounts := dsl.TableFrom(b, "accounts", "accounts", text)
			dsl.LeftJoin(dsl.From(b, "payments", text), accounts, func(_, p, a string, _ bool) (string, error) { return p + a, nil }).To("out")
		}, []string{"payments-left-join-accounts"}},
		{"a table alone", func(b *dsl.Builder) {
			dsl.TableFrom(b, "accounts", "accounts", text).ToStream().To("out")
		}, []string{"accounts-table"}},
		{"windowed count", func(b *dsl.Builder) {
			dsl.WindowedBy(dsl.From(b, "views", text).GroupByKey(), operators.Tumbling(time.Minute, 0)).Count("per-minute")
		}, []string{"window-per-minute"}},
		{"stream-stream join keeps its name", func(b *dsl.Builder) {
			dsl.JoinStreams(dsl.From(b, "l", text), dsl.From(b, "r", text), dsl.JoinWindowsOf(time.Second, 0), "pairs",
				func(_, l, r string) (string, error) { return l + r, nil }).To("out")
		}, []string{"pairs"}},
		{"named", func(b *dsl.Builder) {
			dsl.From(b, "lines", text).Named("cleaner").To("clean")
		}, []string{"cleaner"}},
		{"named on a table", func(b *dsl.Builder) {
			accounts := dsl.TableFrom(b, "accounts", "accounts", text).Named("ledger")
			dsl.Join(dsl.From(b, "payments", text), accounts, func(_, p, a string) (string, error) { return p + a, nil }).To("out")
		}, []string{"ledger"}},
		{"one role twice gets a number", func(b *dsl.Builder) {
			dsl.From(b, "x", text).To("out")
			dsl.From(b, "y", text).Named("x-to-out")
		}, []string{"x-to-out-2", "x-to-out"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := dsl.NewBuilder("names")
			tt.build(b)
			topo, err := b.Build()
			require.NoError(t, err)
			assert.Equal(t, tt.want, processorNames(topo))
		})
	}
}

// Two names for one processor, or a name no processor can have, are
// errors of Build.
func TestNamedRefusesTwoNamesAndBadOnes(t *testing.T) {
	b := dsl.NewBuilder("names")
	accounts := dsl.TableFrom(b, "accounts", "accounts", text).Named("one")
	dsl.Join(dsl.From(b, "payments", text).Named("two"), accounts, func(_, p, a string) (string, error) { return p + a, nil }).To("out")
	_, err := b.Build()
	require.ErrorIs(t, err, framework.ErrInvalidTopology)
	assert.ErrorContains(t, err, `processor named both "one" and "two"`)

	b = dsl.NewBuilder("names")
	dsl.From(b, "x", text).Named("a b")
	_, err = b.Build()
	assert.ErrorContains(t, err, `processor name "a b"`)
}
