package framework_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/framework"
)

func nop() framework.Processor {
	return framework.ProcessorFunc(func(framework.Context, framework.Record) error { return nil })
}

// usesStore claims a store it may not have declared.
type usesStore struct{ framework.ProcessorFunc }

func (usesStore) UsesStores() []string { return []string{"counts"} }

type usesOutput struct{ framework.ProcessorFunc }

func (usesOutput) UsesOutputs() []string { return []string{"big", "small"} }

func TestBuildRejects(t *testing.T) {
	tests := []struct {
		name  string
		build func(b *framework.Builder)
		want  string
	}{
		{"duplicate processor", func(b *framework.Builder) {
			b.Processor("p", nop, framework.From("a")).Processor("p", nop, framework.From("b"))
		}, `processor "p" declared twice`},
		{"no inputs", func(b *framework.Builder) { b.Processor("p", nop) }, `processor "p" has no inputs`},
		{"nil constructor", func(b *framework.Builder) { b.Processor("p", nil, framework.From("a")) }, "no constructor"},
		{"empty topic", func(b *framework.Builder) { b.Processor("p", nop, framework.From("")) }, `input "": empty topic name`},
		{"input twice", func(b *framework.Builder) { b.Processor("p", nop, framework.From("a", "a")) }, `reads "a" twice`},
		{"a global table that is also an input", func(b *framework.Builder) {
			b.Processor("p", nop, framework.From("a"), framework.Global("a", "rows"))
		}, `reads "a" both as an input and as a global table`},
		{"a global table in a store of the processor", func(b *framework.Builder) {
			b.Processor("p", nop, framework.From("a"), framework.Global("g", "rows"), framework.Stores(framework.KeyValueStore("rows")))
		}, `global table store "rows" is also one of its stores`},
		{"one global table in two stores", func(b *framework.Builder) {
			b.Processor("p", nop, framework.From("a"), framework.Global("g", "rows")).
				Processor("q", nop, framework.From("b"), framework.Global("g", "other"))
		}, `global table "g" is kept in two stores`},
		{"a global table with no store", func(b *framework.Builder) {
			b.Processor("p", nop, framework.From("a"), framework.Global("g", ""))
		}, `into a store with no name`},
		{"output twice", func(b *framework.Builder) {
			b.Processor("p", nop, framework.From("a"), framework.To("o"), framework.To("o"))
		}, `writes "o" twice`},
		{"fed by a non-input", func(b *framework.Builder) {
			b.Processor("p", nop, framework.From("a"), framework.To("o", framework.FedBy("zz")))
		}, `fed by "zz"`},
		{"store used but not declared", func(b *framework.Builder) {
			b.Processor("p", func() framework.Processor { return usesStore{} }, framework.From("a"))
		}, `uses store "counts", which it does not declare`},
		{"output used but not declared", func(b *framework.Builder) {
			b.Processor("p", func() framework.Processor { return usesOutput{} }, framework.From("a"), framework.To("big"))
		}, `emits to "small", which it does not declare`},
		{"store declared twice", func(b *framework.Builder) {
			b.Processor("p", nop, framework.From("a"), framework.Stores(framework.KeyValueStore("s"))).
				Processor("q", nop, framework.From("a"), framework.Stores(framework.KeyValueStore("s")))
		}, `store "s" declared by both "p" and "q"`},
		{"unused topic declaration", func(b *framework.Builder) {
			b.Processor("p", nop, framework.From("a")).Topic("nobody", framework.Internal())
		}, `topic "nobody" is declared but no processor`},
		{"dead letter without topic", func(b *framework.Builder) {
			b.Processor("p", nop, framework.From("a")).OnBadInput(framework.DeadLetter, "")
		}, "needs a dead-letter topic"},
		{"cycle", func(b *framework.Builder) {
			b.Processor("p", nop, framework.From("a"), framework.To("b")).
				Processor("q", nop, framework.From("b"), framework.To("a"))
		}, "cycle through topics: p -> q -> p"},
		{"cycle through a reply topic and back another way", func(b *framework.Builder) {
			b.Topic("answers", framework.Reply()).
				Processor("p", nop, framework.From("a", "answers"), framework.To("questions"), framework.To("c")).
				Processor("q", nop, framework.From("questions"), framework.To("answers")).
				Processor("r", nop, framework.From("c"), framework.To("a"))
		}, "cycle through topics: p -> r -> p"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := framework.NewBuilder("t")
			tt.build(b)
			_, err := b.Build()
			require.ErrorIs(t, err, framework.ErrInvalidTopology)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestBuildAccepts(t *testing.T) {
	tests := []struct {
		name  string
		build func(b *framework.Builder)
	}{
		{"processor reading its own output", func(b *framework.Builder) {
			b.Processor("p", nop, framework.From("a", "loop"), framework.To("loop"))
		}},
		{"cycle when allowed", func(b *framework.Builder) {
			b.Processor("p", nop, framework.From("a"), framework.To("b")).
				Processor("q", nop, framework.From("b"), framework.To("a")).AllowCycles()
		}},
		{"cycle closed by a reply topic", func(b *framework.Builder) {
			b.Topic("answers", framework.Reply()).
				Processor("p", nop, framework.From("a", "answers"), framework.To("questions")).
				Processor("q", nop, framework.From("questions"), framework.To("answers"))
		}},
		{"declared store and outputs", func(b *framework.Builder) {
			b.Processor("p", func() framework.Processor { return usesStore{} }, framework.From("a"),
				framework.Stores(framework.KeyValueStore("counts")))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := framework.NewBuilder("t")
			tt.build(b)
			_, err := b.Build()
			assert.NoError(t, err)
		})
	}
}

func wordcount(t *testing.T) *framework.Topology {
	t.Helper()
	topo, err := framework.NewBuilder("wordcount").
		Topic("words-by-word", framework.Internal(), framework.Partitions(4)).
		Processor("split", nop, framework.From("lines"), framework.To("words-by-word")).
		Processor("count", nop, framework.From("words-by-word"), framework.To("counts"),
			framework.Stores(framework.KeyValueStore("word-counts"))).
		Build()
	require.NoError(t, err)
	return topo
}

func TestCheckPartitions(t *testing.T) {
	topo, err := framework.NewBuilder("join").
		Processor("j", nop, framework.From("stream", "table")).Build()
	require.NoError(t, err)
	assert.NoError(t, topo.CheckPartitions(map[string]int32{"stream": 3, "table": 3}))
	err = topo.CheckPartitions(map[string]int32{"stream": 3, "table": 4})
	require.ErrorIs(t, err, framework.ErrNotCoPartitioned)
	assert.Contains(t, err.Error(), `processor "j"`)
	assert.Contains(t, err.Error(), "stream=3, table=4")
	assert.Equal(t, 1, strings.Count(err.Error(), framework.ErrNotCoPartitioned.Error()), "the sentinel's text once: %v", err)
	assert.ErrorContains(t, topo.CheckPartitions(map[string]int32{"stream": 3}), `"table" unknown`)

	wc := wordcount(t)
	err = wc.CheckPartitions(map[string]int32{"lines": 1, "words-by-word": 2, "counts": 1})
	assert.ErrorContains(t, err, `"words-by-word" has 2 partitions, the topology declares 4`)
}

func TestDescribe(t *testing.T) {
	wc := wordcount(t)
	want := `Topology: wordcount
  Sources: lines
  Processor: split (one task per partition of lines)
    <-- lines
    --> words-by-word [internal, 4 partitions] (clocks pruned)
  Processor: count (one task per partition of words-by-word)
    <-- words-by-word [internal, 4 partitions]
    --> counts
    store: word-counts (key-value)
`
	assert.Equal(t, want, wc.Describe())
	m := wc.Mermaid()
	assert.True(t, strings.HasPrefix(m, "flowchart LR\n"))
	for _, line := range []string{`t_lines[(lines)]`, `p_split["split"]`, `t_lines --> p_split`, `p_split --> t_words_by_word`, `p_count["count<br/>store: word-counts"]`} {
		assert.Contains(t, m, line)
	}
}

// Internal topics are pruned to what is read downstream; user-named outputs
// are not unless asked.
func TestNodeOptionsPruneOnlyInternalTopics(t *testing.T) {
	wc := wordcount(t)
	split, _ := wc.Processor("split")
	count, _ := wc.Processor("count")
	assert.True(t, split.Outputs[0].Prune)
	assert.False(t, count.Outputs[0].Prune)
	_, err := wc.NodeOptions("split")
	assert.NoError(t, err)
	_, err = wc.NodeOptions("nope")
	assert.ErrorIs(t, err, framework.ErrInvalidTopology)
}

// Kafka's own test vectors for its murmur2 (Utils.murmur2 in the Java client),
// and the partition the default partitioner derives from them.
func TestPartitionForMatchesKafka(t *testing.T) {
	tests := []struct {
		key  string
		hash int32
	}{
		{"21", -973932308},
		{"foobar", -790332482},
		{"a-little-bit-long-string", -985981536},
		{"a-little-bit-longer-string", -1486304829},
		{"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971},
		{"abc", 479470107},
	}
	for _, tt := range tests {
		want := (tt.hash & 0x7fffffff) % 7
		assert.Equal(t, want, framework.PartitionFor([]byte(tt.key), 7), tt.key)
	}
	assert.Zero(t, framework.PartitionFor(nil, 7))
	assert.Zero(t, framework.PartitionFor([]byte("x"), 1))
}

// ForApplication renames internal topics everywhere the topology names
// them, and nothing else; processors keep the names they were built with.
func TestForApplicationRenamesInternalTopics(t *testing.T) {
	topo, err := framework.NewBuilder("wordcount").
		Topic("words-by-word", framework.Internal(), framework.Partitions(4)).
		Processor("split", nop, framework.From("lines"), framework.To("words-by-word", framework.FedBy("lines"))).
		Processor("count", nop, framework.From("words-by-word", "extra"), framework.To("counts", framework.FedBy("words-by-word")),
			framework.Stores(framework.KeyValueStore("word-counts"))).
		Build()
	require.NoError(t, err)
	app := topo.ForApplication("shop")
	split, _ := app.Processor("split")
	count, _ := app.Processor("count")
	tests := []struct {
		name string
		got  any
		want any
	}{
		{"split's output", split.Outputs[0].Topic, "shop-words-by-word"},
		{"split's output fed by", split.Outputs[0].FedBy, []string{"lines"}},
		{"count's inputs", count.Inputs, []string{"shop-words-by-word", "extra"}},
		{"count's output fed by", count.Outputs[0].FedBy, []string{"shop-words-by-word"}},
		{"count's output", count.Outputs[0].Topic, "counts"},
		{"the internal topic's facts", func() any { ti, _ := app.Topic("shop-words-by-word"); return ti }(),
			framework.TopicInfo{Name: "shop-words-by-word", Partitions: 4, Internal: true}},
		{"no topic under the old name", func() any { _, ok := app.Topic("words-by-word"); return ok }(), false},
		{"logical of a renamed topic", app.LogicalTopic("shop-words-by-word"), "words-by-word"},
		{"logical of a user topic", app.LogicalTopic("lines"), "lines"},
		{"physical of a renamed topic", app.PhysicalTopic("words-by-word"), "shop-words-by-word"},
		{"renaming twice changes nothing", app.ForApplication("other"), app},
		{"the original is untouched", func() any { p, _ := topo.Processor("count"); return p.Inputs }(), []string{"words-by-word", "extra"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { assert.Equal(t, tt.want, tt.got) })
	}
}

// An internal topic's partition count: declared, else that of the topic
// it is like (followed through a chain, known from the cluster or
// declared), else the default; a loop of likes ends at the default.
func TestPartitionCount(t *testing.T) {
	topo, err := framework.NewBuilder("sizes").
		Topic("fixed", framework.Internal(), framework.Partitions(7), framework.PartitionsLike("src")).
		Topic("like-src", framework.Internal(), framework.PartitionsLike("src")).
		Topic("like-like", framework.Internal(), framework.PartitionsLike("like-src")).
		Topic("loop-a", framework.Internal(), framework.PartitionsLike("loop-b")).
		Topic("loop-b", framework.Internal(), framework.PartitionsLike("loop-a")).
		Processor("p", nop, framework.From("src"), framework.To("fixed"), framework.To("like-src"), framework.To("like-like"),
			framework.To("loop-a"), framework.To("loop-b")).
		Build()
	require.NoError(t, err)
	known := map[string]int32{"src": 12}
	tests := []struct {
		topic string
		want  int32
	}{
		{"fixed", 7}, {"like-src", 12}, {"like-like", 12}, {"loop-a", 3}, {"src", 3},
	}
	for _, tt := range tests {
		t.Run(tt.topic, func(t *testing.T) { assert.Equal(t, tt.want, topo.PartitionCount(tt.topic, known, 3)) })
	}
	_, err = framework.NewBuilder("bad").Topic("x", framework.Internal(), framework.PartitionsLike("nowhere")).
		Processor("p", nop, framework.From("a"), framework.To("x")).Build()
	assert.ErrorContains(t, err, `takes the partition count of "nowhere"`)
}
