package kstest

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/causeway-stream/causeway/framework/dsl"
	"github.com/causeway-stream/causeway/operators"
)

// numbered pipes key=prefix+key for each key into "topic", at ts(i).
func numbered(keys []int, prefix string, ts func(i, key int) int64) []in {
	out := make([]in, len(keys))
	for i, k := range keys {
		out[i] = in{"topic", fmt.Sprint(k), fmt.Sprintf("%s%d", prefix, k), ts(i, k)}
	}
	return out
}

func atZero(int, int) int64 { return 0 }

func multipleOfThree(k, _ string) bool {
	n, _ := strconv.Atoi(k)
	return n%3 == 0
}

func TestStatelessSteps(t *testing.T) {
	var peeked, foreach []string
	runAll(t, []kcase{
		{
			from:  "KStreamFilterTest.testFilter",
			build: func(b *dsl.Builder) { dsl.From(b, "topic", text).Filter(multipleOfThree).To("out") },
			in:    numbered([]int{1, 2, 3, 4, 5, 6, 7}, "V", atZero),
			want:  []kv{{"3", "V3", 0}, {"6", "V6", 0}},
		},
		{
			from:  "KStreamFilterTest.testFilterNot",
			build: func(b *dsl.Builder) { dsl.From(b, "topic", text).FilterNot(multipleOfThree).To("out") },
			in:    numbered([]int{1, 2, 3, 4, 5, 6, 7}, "V", atZero),
			want:  []kv{{"1", "V1", 0}, {"2", "V2", 0}, {"4", "V4", 0}, {"5", "V5", 0}, {"7", "V7", 0}},
		},
		{
			from: "KStreamMapTest.testMap",
			build: func(b *dsl.Builder) {
				dsl.Map(dsl.From(b, "topic", text), func(k, v string) (string, string, error) { return v, k, nil }).To("out")
			},
			in:   numbered([]int{0, 1, 2, 3}, "V", func(_, k int) int64 { return 10 - int64(k) }),
			want: []kv{{"V0", "0", 10}, {"V1", "1", 9}, {"V2", "2", 8}, {"V3", "3", 7}},
		},
		{
			from: "KStreamFlatMapTest.testFlatMap",
			build: func(b *dsl.Builder) {
				dsl.FlatMap(dsl.From(b, "topic", text), func(k, v string) ([]operators.KV[string, string], error) {
					n, _ := strconv.Atoi(k)
					var out []operators.KV[string, string]
					for i := range n {
						out = append(out, operators.KV[string, string]{Key: strconv.Itoa(n*10 + i), Value: v})
					}
					return out, nil
				}).To("out")
			},
			in:   numbered([]int{0, 1, 2, 3}, "V", atZero),
			want: []kv{{"10", "V1", 0}, {"20", "V2", 0}, {"21", "V2", 0}, {"30", "V3", 0}, {"31", "V3", 0}, {"32", "V3", 0}},
		},
		{
			// KStreamMapValuesTest names it testFlatMapValues; it maps each
			// value to its length.
			from: "KStreamMapValuesTest.testFlatMapValues",
			build: func(b *dsl.Builder) {
				dsl.MapValues(dsl.From(b, "topic", text), func(_, v string) (string, error) { return strconv.Itoa(len(v)), nil }).To("out")
			},
			in:   numbered([]int{1, 10, 100, 1000}, "", func(_, k int) int64 { return int64(k) / 2 }),
			want: []kv{{"1", "1", 0}, {"10", "2", 5}, {"100", "3", 50}, {"1000", "4", 500}},
		},
		{
			from: "KStreamFlatMapValuesTest.testFlatMapValues",
			build: func(b *dsl.Builder) {
				dsl.FlatMapValues(dsl.From(b, "topic", text), func(_, v string) ([]string, error) { return []string{"v" + v, "V" + v}, nil }).To("out")
			},
			in: numbered([]int{0, 1, 2, 3}, "", atZero),
			want: []kv{{"0", "v0", 0}, {"0", "V0", 0}, {"1", "v1", 0}, {"1", "V1", 0},
				{"2", "v2", 0}, {"2", "V2", 0}, {"3", "v3", 0}, {"3", "V3", 0}},
		},
		{
			from: "KStreamSelectKeyTest.testSelectKey",
			build: func(b *dsl.Builder) {
				names := map[string]string{"1": "ONE", "2": "TWO", "3": "THREE"}
				dsl.SelectKey(dsl.From(b, "topic", text), func(_, v string) (string, error) { return names[v], nil }).To("out")
			},
			in:   []in{{"topic", "", "1", 0}, {"topic", "", "2", 0}, {"topic", "", "3", 0}},
			want: []kv{{"ONE", "1", 0}, {"TWO", "2", 0}, {"THREE", "3", 0}},
		},
		{
			from: "KStreamPeekTest.shouldObserveStreamElements",
			build: func(b *dsl.Builder) {
				dsl.From(b, "topic", text).Peek(func(k, v string) { peeked = append(peeked, k+"="+v) }).
					Foreach(func(k, v string) error { foreach = append(foreach, k+"="+v); return nil })
			},
			in: numbered(seqInts(32), "V", atZero),
			check: func(t *testing.T) {
				var want []string
				for k := range 32 {
					want = append(want, fmt.Sprintf("%d=V%d", k, k))
				}
				assert.Equal(t, want, peeked, "what peek saw")
				assert.Equal(t, want, foreach, "what the step after peek saw")
			},
		},
	})
}

func seqInts(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}
