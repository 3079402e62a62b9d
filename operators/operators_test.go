package operators_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/driver"
	"github.com/causeway-stream/causeway/framework/dsl"
	"github.com/causeway-stream/causeway/framework/serde"
	"github.com/causeway-stream/causeway/operators"
)

var (
	str    = serde.Codec[string, string]{Key: serde.String(), Value: serde.String()}
	t0     = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	errBad = errors.New("bad")
)

// in is one input record of a case.
type in struct {
	topic, key, value string
	at                time.Duration // timestamp after t0
}

// opCase is one operator in the shared suite: a topology around it, inputs,
// and the expected output of each output topic, rendered "key=value" in
// partition then offset order.
type opCase struct {
	name  string
	build func(b *dsl.Builder)
	// fluent, when set, builds the same topology with the fluent DSL: the
	// suite runs the case both ways, with the same inputs and wants.
	fluent func(b *dsl.Builder)
	inputs []in
	render map[string]func(framework.Record) string // per output topic; default key=value as strings
	want   map[string][]string
	// drops expected, by reason
	drops map[string]int
}

func keyValue(r framework.Record) string { return string(r.Key) + "=" + string(r.Value) }

func int64Value(r framework.Record) string {
	n, err := serde.Int64().Deserialize(r.Value)
	if err != nil {
		return "undecodable:" + err.Error()
	}
	return fmt.Sprintf("%s=%d", r.Key, n)
}

func windowedInt64(r framework.Record) string {
	w, err := operators.WindowedKey(serde.String(), time.Minute).Deserialize(r.Key) // the tests' windows are a minute long
	if err != nil {
		return "undecodable:" + err.Error()
	}
	n, err := serde.Int64().Deserialize(r.Value)
	if err != nil {
		return "undecodable:" + err.Error()
	}
	return fmt.Sprintf("%s@%s-%s=%d", w.Key, w.Start.Sub(t0), w.End.Sub(t0), n)
}

// globalJoin joins "in" with the global table "g" on the value of each
// record.
func globalJoin(b *dsl.Builder) dsl.Stream[string, string] {
	return dsl.JoinGlobal(dsl.From(b, "in", str), dsl.GlobalTableFrom(b, "g", "g-rows", str),
		func(_, v string) (string, error) { return v, nil },
		func(_, v, row string) (string, error) { return v + "->" + row, nil }).WithSerdes(str.Key, str.Value)
}

// fragmentOf adds, at the processor level, a processor "op" writing to
// "out", made of steps of the fluent DSL (dsl.Fragment).
func fragmentOf[K, V any](b *dsl.Builder, steps func(f *dsl.Builder) dsl.Stream[K, V]) {
	newProc, opts, err := dsl.Fragment(steps)
	if err != nil {
		panic(err) // the case itself is wrong
	}
	b.Processor("op", newProc, append(opts, framework.To("out"))...)
}

// cases returns every case, and the fluent variant of each that has one.
func sessionInt64(r framework.Record) string {
	w, err := operators.SessionWindowedKey(serde.String()).Deserialize(r.Key)
	if err != nil {
		return "undecodable:" + err.Error()
	}
	if r.Value == nil {
		return fmt.Sprintf("%s@%s-%s=nil", w.Key, w.Start.Sub(t0), w.End.Sub(t0))
	}
	n, err := serde.Int64().Deserialize(r.Value)
	if err != nil {
		return "undecodable:" + err.Error()
	}
	return fmt.Sprintf("%s@%s-%s=%d", w.Key, w.Start.Sub(t0), w.End.Sub(t0), n)
}

func cases() []opCase {
	var out []opCase
	for _, c := range processorCases() {
		out = append(out, c)
		if c.fluent != nil {
			f := c
			f.name, f.build, f.fluent = "fluent "+c.name, c.fluent, nil
			out = append(out, f)
		}
	}
	return out
}

func processorCases() []opCase {
	words := []in{{"in", "l1", "a b", 0}, {"in", "l2", "b c b", time.Second}, {"in", "l3", "", 2 * time.Second}}
	return []opCase{
		{
			name: "map",
			build: func(b *dsl.Builder) {
				b.Processor("op", operators.Map(str, str, func(k, v string) (string, string, error) {
					return strings.ToUpper(k), v + "!", nil
				}), framework.From("in"), framework.To("out"))
			},
			fluent: func(b *dsl.Builder) {
				dsl.Map(dsl.From(b, "in", str), func(k, v string) (string, string, error) {
					return strings.ToUpper(k), v + "!", nil
				}).To("out")
			},
			inputs: []in{{"in", "a", "1", 0}, {"in", "b", "2", 0}},
			want:   map[string][]string{"out": {"A=1!", "B=2!"}},
		},
		{
			name: "mapValues",
			build: func(b *dsl.Builder) {
				b.Processor("op", operators.MapValues(str, serde.String(), func(k, v string) (string, error) {
					return k + ":" + v, nil
				}), framework.From("in"), framework.To("out"))
			},
			fluent: func(b *dsl.Builder) {
				dsl.MapValues(dsl.From(b, "in", str), func(k, v string) (string, error) { return k + ":" + v, nil }).To("out")
			},
			inputs: []in{{"in", "a", "1", 0}},
			want:   map[string][]string{"out": {"a=a:1"}},
		},
		{
			name: "filter",
			build: func(b *dsl.Builder) {
				b.Processor("op", operators.Filter(str, func(_, v string) bool { return v != "drop" }),
					framework.From("in"), framework.To("out"))
			},
			fluent: func(b *dsl.Builder) {
				dsl.From(b, "in", str).Filter(func(_, v string) bool { return v != "drop" }).To("out")
			},
			inputs: []in{{"in", "a", "keep", 0}, {"in", "b", "drop", 0}, {"in", "c", "keep", 0}},
			want:   map[string][]string{"out": {"a=keep", "c=keep"}},
		},
		{
			name: "flatMap",
			build: func(b *dsl.Builder) {
				b.Processor("op", operators.FlatMap(str, str, func(k, v string) ([]operators.KV[string, string], error) {
					var out []operators.KV[string, string]
					for _, w := range strings.Fields(v) {
						out = append(out, operators.KV[string, string]{Key: w, Value: k})
					}
					return out, nil
				}), framework.From("in"), framework.To("out"))
			},
			fluent: func(b *dsl.Builder) {
				dsl.FlatMap(dsl.From(b, "in", str), func(k, v string) ([]operators.KV[string, string], error) {
					var out []operators.KV[string, string]
					for _, w := range strings.Fields(v) {
						out = append(out, operators.KV[string, string]{Key: w, Value: k})
					}
					return out, nil
				}).To("out")
			},
			inputs: words,
			want:   map[string][]string{"out": {"a=l1", "b=l1", "b=l2", "c=l2", "b=l2"}},
		},
		{
			name: "branch",
			build: func(b *dsl.Builder) {
				b.Processor("op", operators.Branch(str,
					operators.Case[string, string]{Output: "small", Match: func(_, v string) bool { return len(v) < 3 }},
					operators.Case[string, string]{Output: "big", Match: func(_, v string) bool { return len(v) < 6 }},
				), framework.From("in"), framework.To("small"), framework.To("big"))
			},
			fluent: func(b *dsl.Builder) {
				bs := dsl.From(b, "in", str).Branch(
					func(_, v string) bool { return len(v) < 3 },
					func(_, v string) bool { return len(v) < 6 })
				bs[0].To("small")
				bs[1].To("big")
			},
			inputs: []in{{"in", "a", "xx", 0}, {"in", "b", "xxxx", 0}, {"in", "c", "xxxxxxxx", 0}},
			want:   map[string][]string{"small": {"a=xx"}, "big": {"b=xxxx"}},
			drops:  map[string]int{"unmatched": 1},
		},
		{
			name: "merge",
			build: func(b *dsl.Builder) {
				b.Processor("op", operators.Merge(), framework.From("in", "in2"), framework.To("out"))
			},
			fluent: func(b *dsl.Builder) {
				dsl.From(b, "in", str).Merge(dsl.From(b, "in2", str)).To("out")
			},
			inputs: []in{{"in", "a", "1", 0}, {"in2", "b", "2", 0}},
			want:   map[string][]string{"out": {"a=1", "b=2"}},
		},
		{
			name: "peek",
			build: func(b *dsl.Builder) {
				b.Processor("op", operators.Peek(str, func(string, string) {}), framework.From("in"), framework.To("out"))
			},
			fluent: func(b *dsl.Builder) {
				dsl.From(b, "in", str).Peek(func(string, string) {}).To("out")
			},
			inputs: []in{{"in", "a", "1", 0}},
			want:   map[string][]string{"out": {"a=1"}},
		},
		{
			name: "groupBy through a repartition topic, then count",
			build: func(b *dsl.Builder) {
				b.Topic("by-word", framework.Internal()).
					Processor("split", operators.FlatMap(str, str, func(_, v string) ([]operators.KV[string, string], error) {
						var out []operators.KV[string, string]
						for _, w := range strings.Fields(v) {
							out = append(out, operators.KV[string, string]{Key: "", Value: w})
						}
						return out, nil
					}), framework.From("in"), framework.To("words")).
					Processor("op", operators.GroupBy(str, serde.String(), func(_, v string) (string, error) { return v, nil }),
						framework.From("words"), framework.To("by-word")).
					Processor("count", operators.Count(str, "counts"), framework.From("by-word"), framework.To("out"),
						framework.Stores(framework.KeyValueStore("counts")))
			},
			fluent: func(b *dsl.Builder) {
				words := dsl.FlatMapValues(dsl.From(b, "in", str), func(_, v string) ([]string, error) { return strings.Fields(v), nil })
				dsl.GroupBy(words, func(_, w string) (string, error) { return w, nil }).Count("counts").ToStream().To("out")
			},
			inputs: words,
			render: map[string]func(framework.Record) string{"out": int64Value},
			want:   map[string][]string{"out": {"a=1", "b=1", "b=2", "c=1", "b=3"}},
		},
		{
			name: "reduce",
			build: func(b *dsl.Builder) {
				b.Processor("op", operators.Reduce(str, "longest", func(acc, v string) (string, error) {
					if len(v) > len(acc) {
						return v, nil
					}
					return acc, nil
				}), framework.From("in"), framework.To("out"), framework.Stores(framework.KeyValueStore("longest")))
			},
			fluent: func(b *dsl.Builder) {
				dsl.From(b, "in", str).GroupByKey().Reduce("longest", func(acc, v string) (string, error) {
					if len(v) > len(acc) {
						return v, nil
					}
					return acc, nil
				}).ToStream().To("out")
			},
			inputs: []in{{"in", "k", "ab", 0}, {"in", "k", "a", 0}, {"in", "k", "abcd", 0}, {"in", "j", "z", 0}},
			want:   map[string][]string{"out": {"k=ab", "k=ab", "k=abcd", "j=z"}},
		},
		{
			name: "aggregate",
			build: func(b *dsl.Builder) {
				b.Processor("op", operators.Aggregate(str, serde.Int64(), "lengths", func() int64 { return 100 },
					func(_, v string, acc int64) (int64, error) { return acc + int64(len(v)), nil }),
					framework.From("in"), framework.To("out"), framework.Stores(framework.KeyValueStore("lengths")))
			},
			fluent: func(b *dsl.Builder) {
				dsl.Aggregate(dsl.From(b, "in", str).GroupByKey(), "lengths", func() int64 { return 100 },
					func(_, v string, acc int64) (int64, error) { return acc + int64(len(v)), nil }, nil).ToStream().To("out")
			},
			inputs: []in{{"in", "k", "ab", 0}, {"in", "k", "abc", 0}},
			render: map[string]func(framework.Record) string{"out": int64Value},
			want:   map[string][]string{"out": {"k=102", "k=105"}},
		},
		{
			name: "tumbling windows with grace",
			build: func(b *dsl.Builder) {
				b.Processor("op", operators.WindowedAggregate(str, serde.Int64(), "win",
					operators.Tumbling(time.Minute, 10*time.Second), func() int64 { return 0 },
					func(_, _ string, n int64) (int64, error) { return n + 1, nil }),
					framework.From("in"), framework.To("out"), framework.Stores(framework.WindowStore("win", time.Hour)))
			},
			fluent: func(b *dsl.Builder) {
				dsl.WindowedBy(dsl.From(b, "in", str).GroupByKey(), operators.Tumbling(time.Minute, 10*time.Second)).
					Count("win").ToStream().To("out")
			},
			inputs: []in{
				{"in", "k", "x", 10 * time.Second},
				{"in", "k", "x", 50 * time.Second},
				{"in", "k", "x", 65 * time.Second},
				{"in", "k", "x", 55 * time.Second}, // window 0-1m still within grace at 65s
				{"in", "k", "x", 80 * time.Second},
				{"in", "k", "x", 30 * time.Second}, // late: 0-1m closed at 70s
			},
			render: map[string]func(framework.Record) string{"out": windowedInt64},
			want: map[string][]string{"out": {
				"k@0s-1m0s=1", "k@0s-1m0s=2", "k@1m0s-2m0s=1", "k@0s-1m0s=3", "k@1m0s-2m0s=2",
			}},
			drops: map[string]int{"late": 1},
		},
		{
			name: "hopping windows",
			build: func(b *dsl.Builder) {
				b.Processor("op", operators.WindowedAggregate(str, serde.Int64(), "win",
					operators.Hopping(time.Minute, 30*time.Second, 0), func() int64 { return 0 },
					func(_, _ string, n int64) (int64, error) { return n + 1, nil }),
					framework.From("in"), framework.To("out"), framework.Stores(framework.WindowStore("win", time.Hour)))
			},
			fluent: func(b *dsl.Builder) {
				dsl.WindowedBy(dsl.From(b, "in", str).GroupByKey(), operators.Hopping(time.Minute, 30*time.Second, 0)).
					Count("win").ToStream().To("out")
			},
			inputs: []in{{"in", "k", "x", 40 * time.Second}, {"in", "k", "x", 70 * time.Second}},
			render: map[string]func(framework.Record) string{"out": windowedInt64},
			want: map[string][]string{"out": {
				"k@0s-1m0s=1", "k@30s-1m30s=1", "k@30s-1m30s=2", "k@1m0s-2m0s=1",
			}},
		},
		{
			name: "tumbling windows emitted when they close",
			build: func(b *dsl.Builder) {
				fragmentOf(b, func(f *dsl.Builder) dsl.Stream[operators.Windowed[string], int64] {
					return dsl.WindowedBy(dsl.From(f, "in", str).GroupByKey(), operators.Tumbling(time.Minute, 10*time.Second)).
						EmitOnWindowClose().Count("win").ToStream()
				})
			},
			fluent: func(b *dsl.Builder) {
				dsl.WindowedBy(dsl.From(b, "in", str).GroupByKey(), operators.Tumbling(time.Minute, 10*time.Second)).
					EmitOnWindowClose().Count("win").ToStream().To("out")
			},
			inputs: []in{
				{"in", "k", "x", 10 * time.Second},
				{"in", "k", "x", 50 * time.Second},
				{"in", "j", "x", 65 * time.Second},
				{"in", "k", "x", 55 * time.Second},  // window 0-1m still within grace at 65s
				{"in", "k", "x", 80 * time.Second},  // closes 0-1m
				{"in", "k", "x", 30 * time.Second},  // late
				{"in", "k", "x", 130 * time.Second}, // closes 1m-2m
			},
			render: map[string]func(framework.Record) string{"out": windowedInt64},
			want:   map[string][]string{"out": {"k@0s-1m0s=3", "j@1m0s-2m0s=1", "k@1m0s-2m0s=1"}},
			drops:  map[string]int{"late": 1},
		},
		{
			name: "sliding windows",
			build: func(b *dsl.Builder) {
				fragmentOf(b, func(f *dsl.Builder) dsl.Stream[operators.Windowed[string], int64] {
					return dsl.SlidingWindowedBy(dsl.From(f, "in", str).GroupByKey(), dsl.SlidingWindows{Difference: 10 * time.Second, Grace: time.Minute}).
						Count("sliding").ToStream()
				})
			},
			fluent: func(b *dsl.Builder) {
				dsl.SlidingWindowedBy(dsl.From(b, "in", str).GroupByKey(), dsl.SlidingWindows{Difference: 10 * time.Second, Grace: time.Minute}).
					Count("sliding").ToStream().To("out")
			},
			inputs: []in{{"in", "k", "x", 20 * time.Second}, {"in", "k", "x", 25 * time.Second}},
			render: map[string]func(framework.Record) string{"out": func(r framework.Record) string {
				w, err := operators.WindowedKey(serde.String(), 10*time.Second).Deserialize(r.Key)
				if err != nil {
					return "undecodable:" + err.Error()
				}
				n, err := serde.Int64().Deserialize(r.Value)
				if err != nil {
					return "undecodable:" + err.Error()
				}
				return fmt.Sprintf("%s@%s-%s=%d", w.Key, w.Start.Sub(t0), w.End.Sub(t0), n)
			}},
			// Kafka Streams' order: the window just after the record before
			// (new), then the record's own (new).
			want: map[string][]string{"out": {"k@10s-20s=1", "k@20.001s-30.001s=1", "k@15s-25s=2"}},
		},
		{
			name: "session windows",
			build: func(b *dsl.Builder) {
				fragmentOf(b, func(f *dsl.Builder) dsl.Stream[operators.Windowed[string], int64] {
					return dsl.SessionWindowedBy(dsl.From(f, "in", str).GroupByKey(), dsl.SessionWindows{Gap: 20 * time.Second}).
						Count("sessions").ToStream()
				})
			},
			fluent: func(b *dsl.Builder) {
				dsl.SessionWindowedBy(dsl.From(b, "in", str).GroupByKey(), dsl.SessionWindows{Gap: 20 * time.Second}).
					Count("sessions").ToStream().To("out")
			},
			inputs: []in{{"in", "k", "x", 0}, {"in", "k", "x", 30 * time.Second}, {"in", "k", "x", 15 * time.Second}},
			render: map[string]func(framework.Record) string{"out": sessionInt64},
			want: map[string][]string{"out": {
				"k@0s-0s=1", "k@30s-30s=1", // 30s is more than a gap after 0s
				"k@0s-0s=nil", "k@30s-30s=nil", "k@0s-30s=3", // 15s is within a gap of both: one session
			}},
		},
		{
			name: "table-table outer join",
			build: func(b *dsl.Builder) {
				fragmentOf(b, func(f *dsl.Builder) dsl.Stream[string, string] {
					return dsl.OuterJoinTables(dsl.TableFrom(f, "l", "l-rows", str), dsl.TableFrom(f, "r", "r-rows", str),
						func(_, l string, lok bool, r string, rok bool) (string, error) {
							return fmt.Sprintf("%s/%v+%s/%v", l, lok, r, rok), nil
						}).
						ToStream().WithSerdes(str.Key, str.Value)
				})
			},
			fluent: func(b *dsl.Builder) {
				dsl.OuterJoinTables(dsl.TableFrom(b, "l", "l-rows", str), dsl.TableFrom(b, "r", "r-rows", str),
					func(_, l string, lok bool, r string, rok bool) (string, error) {
						return fmt.Sprintf("%s/%v+%s/%v", l, lok, r, rok), nil
					}).
					ToStream().WithSerdes(str.Key, str.Value).To("out")
			},
			inputs: []in{{"l", "k", "L1", 0}, {"r", "k", "R1", time.Second}, {"r", "j", "R2", 2 * time.Second}, {"l", "k", "L2", 3 * time.Second}},
			want:   map[string][]string{"out": {"k=L1/true+/false", "k=L1/true+R1/true", "j=/false+R2/true", "k=L2/true+R1/true"}},
		},
		{
			name: "stream-stream windowed join",
			build: func(b *dsl.Builder) {
				fragmentOf(b, func(f *dsl.Builder) dsl.Stream[string, string] {
					return dsl.JoinStreams(dsl.From(f, "l", str), dsl.From(f, "r", str), dsl.JoinWindowsOf(time.Minute, 0), "j",
						func(_, l, r string) (string, error) { return l + "+" + r, nil }).WithSerdes(str.Key, str.Value)
				})
			},
			fluent: func(b *dsl.Builder) {
				dsl.JoinStreams(dsl.From(b, "l", str), dsl.From(b, "r", str), dsl.JoinWindowsOf(time.Minute, 0), "j",
					func(_, l, r string) (string, error) { return l + "+" + r, nil }).WithSerdes(str.Key, str.Value).To("out")
			},
			inputs: []in{
				{"l", "k", "a", 0}, {"r", "k", "x", 30 * time.Second}, {"l", "k", "b", 50 * time.Second},
				{"r", "k", "y", 2 * time.Minute}, // too far from a (0s) and b (50s)
			},
			want: map[string][]string{"out": {"k=a+x", "k=b+x"}},
		},
		{
			name: "global table join",
			build: func(b *dsl.Builder) {
				fragmentOf(b, func(f *dsl.Builder) dsl.Stream[string, string] {
					return globalJoin(f)
				})
			},
			fluent: func(b *dsl.Builder) { globalJoin(b).To("out") },
			inputs: []in{{"g", "k1", "row1", 0}, {"in", "x", "k1", time.Second}, {"in", "y", "k2", 2 * time.Second}},
			want:   map[string][]string{"out": {"x=k1->row1"}},
			drops:  map[string]int{"no-match": 1},
		},
		{
			name: "stream-table join",
			build: func(b *dsl.Builder) {
				b.Processor("op", operators.StreamTableJoin(operators.Join[string, string, string, string]{
					Stream: str, Table: str, TableTopic: "table", Store: "rows", Out: serde.String(),
					Joiner: func(k, v, row string, _ bool) (string, error) { return v + "+" + row, nil },
				}), framework.From("stream", "table"), framework.To("out"), framework.Stores(framework.KeyValueStore("rows")))
			},
			fluent: func(b *dsl.Builder) {
				dsl.Join(dsl.From(b, "stream", str), dsl.TableFrom(b, "table", "rows", str),
					func(k, v, row string) (string, error) { return v + "+" + row, nil }).To("out")
			},
			inputs: []in{
				{"table", "k", "row1", 0},
				{"stream", "k", "e1", time.Second},
				{"stream", "nope", "e2", time.Second},
				{"table", "k", "row2", 2 * time.Second},
				{"stream", "k", "e3", 3 * time.Second},
			},
			want:  map[string][]string{"out": {"k=e1+row1", "k=e3+row2"}},
			drops: map[string]int{"no-match": 1},
		},
		{
			name: "left stream-table join",
			build: func(b *dsl.Builder) {
				b.Processor("op", operators.StreamTableJoin(operators.Join[string, string, string, string]{
					Stream: str, Table: str, TableTopic: "table", Store: "rows", Out: serde.String(), Left: true,
					Joiner: func(k, v, row string, found bool) (string, error) { return fmt.Sprintf("%s+%s/%v", v, row, found), nil },
				}), framework.From("stream", "table"), framework.To("out"), framework.Stores(framework.KeyValueStore("rows")))
			},
			fluent: func(b *dsl.Builder) {
				dsl.LeftJoin(dsl.From(b, "stream", str), dsl.TableFrom(b, "table", "rows", str),
					func(k, v, row string, found bool) (string, error) { return fmt.Sprintf("%s+%s/%v", v, row, found), nil }).To("out")
			},
			inputs: []in{{"stream", "k", "e1", 0}, {"table", "k", "row", time.Second}, {"stream", "k", "e2", 2 * time.Second}},
			want:   map[string][]string{"out": {"k=e1+/false", "k=e2+row/true"}},
		},
	}
}

// run pipes the case's inputs in order, one Run per record so the order is
// the processing order, restarting every task after restartAfter records
// (negative: never). It returns the rendered outputs and the driver.
func run(t *testing.T, c opCase, restartAfter int) (map[string][]string, *driver.Driver) {
	t.Helper()
	b := dsl.NewBuilder(c.name)
	c.build(b)
	topo, err := b.Build()
	require.NoError(t, err)
	d, err := driver.New(topo)
	require.NoError(t, err)
	for i, r := range c.inputs {
		if i == restartAfter {
			for _, st := range d.Tasks() {
				require.NoError(t, d.RestartTask(st.ID))
			}
		}
		rec := framework.Record{Key: []byte(r.key), Value: []byte(r.value), Timestamp: t0.Add(r.at),
			Headers: []framework.Header{{Key: "trace", Value: []byte(fmt.Sprint("trace-", i))}}}
		_, _, err := d.Pipe(r.topic, rec)
		require.NoError(t, err)
		require.NoError(t, d.Run())
	}
	out := map[string][]string{}
	for topic := range c.want {
		recs, err := d.Records(topic)
		require.NoError(t, err)
		render := keyValue
		if f, ok := c.render[topic]; ok {
			render = f
		}
		for _, r := range recs {
			out[topic] = append(out[topic], render(r))
		}
	}
	return out, d
}

func TestOperators(t *testing.T) {
	for _, c := range cases() {
		t.Run(c.name, func(t *testing.T) {
			got, d := run(t, c, -1)
			for topic, want := range c.want {
				assert.Equal(t, want, got[topic], topic)
			}
			drops := map[string]int{}
			for _, dr := range d.Dropped() {
				drops[dr.Event.Reason]++
			}
			if c.drops == nil {
				c.drops = map[string]int{}
			}
			assert.Equal(t, c.drops, drops, "reported drops")
		})
	}
}

// The shared behaviour suite: every operator stamps what it emits, carries
// the triggering record's headers, and gives the same results when its
// tasks restart from their committed state halfway through.
func TestOperatorBehaviourSuite(t *testing.T) {
	for _, c := range cases() {
		t.Run(c.name, func(t *testing.T) {
			want, d := run(t, c, -1)
			t.Run("emits stamped records", func(t *testing.T) {
				for topic := range c.want {
					recs, err := d.Records(topic)
					require.NoError(t, err)
					for _, r := range recs {
						h, ok := r.Header(causal.HeaderKey)
						require.True(t, ok, "%s@%d has no clock", topic, r.Offset)
						clock, err := causal.DecodeClock(h)
						require.NoError(t, err)
						assert.False(t, clock.IsEmpty(), "%s@%d claims nothing", topic, r.Offset)
					}
				}
			})
			t.Run("propagates headers", func(t *testing.T) {
				for topic := range c.want {
					recs, err := d.Records(topic)
					require.NoError(t, err)
					for _, r := range recs {
						v, ok := r.Header("trace")
						assert.True(t, ok && strings.HasPrefix(string(v), "trace-"), "%s@%d lost the trace header", topic, r.Offset)
					}
				}
			})
			t.Run("survives a store restore", func(t *testing.T) {
				got, _ := run(t, c, len(c.inputs)/2)
				assert.Equal(t, want, got)
			})
		})
	}
}

// The suite's restore check can fail: a processor that keeps state in
// memory instead of its store gives different results after a restart.
func TestSuiteCatchesStateOutsideTheStore(t *testing.T) {
	c := opCase{
		name: "counts in a Go map",
		build: func(b *dsl.Builder) {
			b.Processor("op", func() framework.Processor {
				counts := map[string]int{}
				return framework.ProcessorFunc(func(ctx framework.Context, rec framework.Record) error {
					counts[string(rec.Key)]++
					rec.Value = []byte(fmt.Sprint(counts[string(rec.Key)]))
					return ctx.Forward(rec)
				})
			}, framework.From("in"), framework.To("out"))
		},
		inputs: []in{{"in", "k", "", 0}, {"in", "k", "", 0}, {"in", "k", "", 0}},
		want:   map[string][]string{"out": nil},
	}
	plain, _ := run(t, c, -1)
	restarted, _ := run(t, c, 2)
	assert.NotEqual(t, plain, restarted)
}

// Bad input reaches the topology's policy through the operators.
func TestOperatorsReportUndecodableInput(t *testing.T) {
	ints := serde.Codec[string, int64]{Key: serde.String(), Value: serde.Int64()}
	topo, err := framework.NewBuilder("bad").
		Processor("op", operators.Filter(ints, func(string, int64) bool { return true }), framework.From("in"), framework.To("out")).
		OnBadInput(framework.LogAndSkip, "").Build()
	require.NoError(t, err)
	d, err := driver.New(topo)
	require.NoError(t, err)
	_, _, err = d.Pipe("in", framework.Record{Key: []byte("k"), Value: []byte("not 8 bytes")})
	require.NoError(t, err)
	require.NoError(t, d.Run())
	drops := d.Dropped()
	require.Len(t, drops, 1)
	assert.Equal(t, "skipped", drops[0].Event.Reason)
	assert.Contains(t, drops[0].Event.Detail, "cannot deserialize value of in/0 at offset 0")
}

func TestOperatorErrorsFailTheTask(t *testing.T) {
	topo, err := framework.NewBuilder("err").
		Processor("op", operators.Map(str, str, func(k, v string) (string, string, error) { return "", "", errBad }),
			framework.From("in"), framework.To("out")).Build()
	require.NoError(t, err)
	d, err := driver.New(topo)
	require.NoError(t, err)
	_, _, err = d.Pipe("in", framework.Record{Key: []byte("k"), Value: []byte("v")})
	require.NoError(t, err)
	assert.ErrorIs(t, d.Run(), errBad)
}

// Windowed keys are laid out as Kafka Streams' serializers lay them out,
// byte for byte: the key, then the window start (time windows), or the
// session's end and start (session windows), in big-endian Unix
// milliseconds.
func TestWindowedKeysInKafkaStreamsLayout(t *testing.T) {
	ms := func(tm time.Time) []byte { return binary.BigEndian.AppendUint64(nil, uint64(tm.UnixMilli())) }
	w := operators.Windowed[string]{Key: "user-7", Start: t0, End: t0.Add(time.Minute)}
	for _, tc := range []struct {
		name  string
		serde serde.Serde[operators.Windowed[string]]
		want  []byte
	}{
		{"time window (TimeWindowedSerializer)", operators.WindowedKey(serde.String(), time.Minute), append([]byte("user-7"), ms(t0)...)},
		{"session window (SessionWindowedSerializer)", operators.SessionWindowedKey(serde.String()),
			append(append([]byte("user-7"), ms(t0.Add(time.Minute))...), ms(t0)...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := tc.serde.Serialize(w)
			require.NoError(t, err)
			assert.Equal(t, tc.want, b)
			got, err := tc.serde.Deserialize(b)
			require.NoError(t, err)
			assert.Equal(t, w, got)
			_, err = tc.serde.Deserialize(b[:len(tc.want)-len("user-7")-1])
			assert.ErrorIs(t, err, operators.ErrShortWindowedKey)
		})
	}
}
