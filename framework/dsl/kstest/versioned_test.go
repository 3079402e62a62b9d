package kstest

import (
	"strconv"
	"testing"
	"time"

	"github.com/causeway-stream/causeway/framework/dsl"
)

// KStreamKTableJoinTest's versioned cases: a stream joined with a
// versioned table with a grace period, each stream record joined as of
// its timestamp once stream time has passed it by the grace. The Java
// test's Integer keys are text here.
func TestKStreamVersionedKTableJoin(t *testing.T) {
	toString := func(_ string, v, row string) (string, error) { return v + "+" + row, nil } // MockValueJoiner.TOSTRING_JOINER
	withGrace := func(grace time.Duration) func(b *dsl.Builder) {
		return func(b *dsl.Builder) {
			table := dsl.TableFrom(b, "tableTopic2", "V-grace", text, dsl.Versioned(5*time.Minute))
			dsl.JoinWithGrace(dsl.From(b, "streamTopic", text), table, grace, "Grace", toString).To("out")
		}
	}
	table := func(prefix string) []in { // pushToTableNonRandom(4, prefix)
		var out []in
		for i := range 4 {
			out = append(out, in{"tableTopic2", strconv.Itoa(i), prefix + strconv.Itoa(i), 0})
		}
		return out
	}
	stream := func(n int) []in { // pushToStream(n, "X")
		var out []in
		for i := range n {
			out = append(out, in{"streamTopic", strconv.Itoa(i), "X" + strconv.Itoa(i), int64(i)})
		}
		return out
	}
	join := func(parts ...[]in) []in {
		var out []in
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	runAll(t, []kcase{
		{
			from:  "KStreamKTableJoinTest.shouldDelayJoinByGracePeriod",
			build: withGrace(2 * time.Millisecond),
			in:    join(table("Y"), stream(4), table("YY"), stream(4), []in{{"streamTopic", "5", "test", 7}}, table("YYY")),
			want: []kv{{"0", "X0+Y0", 0}, {"1", "X1+Y1", 1}, {"0", "X0+YY0", 0}, {"1", "X1+YY1", 1},
				{"2", "X2+YY2", 2}, {"2", "X2+YY2", 2}, {"3", "X3+YY3", 3}, {"3", "X3+YY3", 3}},
		},
		{
			from:  "KStreamKTableJoinTest.shouldHandleLateJoinsWithGracePeriod",
			build: withGrace(2 * time.Millisecond),
			in:    join(table("Y"), stream(4), stream(1)),
			want:  []kv{{"0", "X0+Y0", 0}, {"1", "X1+Y1", 1}, {"0", "X0+Y0", 0}},
		},
		{
			from:  "Causeway's own: the same, the task restarted from its last commit with two records buffered",
			build: withGrace(2 * time.Millisecond),
			in:    join(table("Y"), stream(4), table("YY"), stream(4), []in{{"streamTopic", "5", "test", 7}}),
			want: []kv{{"0", "X0+Y0", 0}, {"1", "X1+Y1", 1}, {"0", "X0+YY0", 0}, {"1", "X1+YY1", 1},
				{"2", "X2+YY2", 2}, {"2", "X2+YY2", 2}, {"3", "X3+YY3", 3}, {"3", "X3+YY3", 3}},
			restartAfter: 8,
		},
		{
			from: "Causeway's own (KIP-914): a versioned table's late update goes into its history, not over its newer row, and each stream record joins the row as of its own time",
			build: func(b *dsl.Builder) {
				table := dsl.TableFrom(b, "prices", "prices", text, dsl.Versioned(time.Minute))
				dsl.Join(dsl.From(b, "orders", text), table, toString).To("out")
			},
			in: []in{{"prices", "a", "v1", 10}, {"prices", "a", "v3", 30}, {"prices", "a", "v2", 20},
				{"orders", "a", "o25", 25}, {"orders", "a", "o15", 15}, {"orders", "a", "o35", 35}, {"orders", "a", "o5", 5}},
			want: []kv{{"a", "o25+v2", 25}, {"a", "o15+v1", 15}, {"a", "o35+v3", 35}},
		},
		{
			from: "Causeway's own: a versioned table hands on only what becomes its latest row",
			build: func(b *dsl.Builder) {
				dsl.TableFrom(b, "prices", "prices", text, dsl.Versioned(time.Minute)).ToStream().To("out")
			},
			in:   []in{{"prices", "a", "v1", 10}, {"prices", "a", "v3", 30}, {"prices", "a", "v2", 20}, {"prices", "a", null, 40}},
			want: []kv{{"a", "v1", 10}, {"a", "v3", 30}, {"a", null, 40}},
		},
	})
}
