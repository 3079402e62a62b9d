package main

import (
	"strings"
	"unicode"

	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/serde"
	"github.com/causeway-stream/causeway/operators"
)

// Topic names of the example.
const (
	LinesTopic  = "lines"
	WordsTopic  = "wordcount-words"
	CountsTopic = "counts"
	CountsStore = "word-counts"
)

var text = operators.Codec[string, string]{Key: serde.String(), Value: serde.String()}

// Words splits a line into lower-case words: runs of letters and digits,
// with apostrophes inside a word kept ("newton's"); numbers count as words.
func Words(line string) []string {
	var out []string
	for _, f := range strings.FieldsFunc(strings.ToLower(line), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '\''
	}) {
		if w := strings.Trim(f, "'"); w != "" {
			out = append(out, w)
		}
	}
	return out
}

// Topology is the classic word count: lines are split into words keyed by
// the word, so the internal words topic is partitioned by word (Kafka
// Streams' groupBy), and each word's count is kept in a store and emitted on
// every change.
func Topology() (*framework.Topology, error) {
	return framework.NewBuilder("wordcount").
		Topic(WordsTopic, framework.Internal()).
		Processor("split", operators.FlatMap(text, text, func(_, line string) ([]operators.KV[string, string], error) {
			words := Words(line)
			out := make([]operators.KV[string, string], len(words))
			for i, w := range words {
				out[i] = operators.KV[string, string]{Key: w, Value: w}
			}
			return out, nil
		}), framework.From(LinesTopic), framework.To(WordsTopic)).
		Processor("count", operators.Count(text, CountsStore),
			framework.From(WordsTopic), framework.To(CountsTopic),
			framework.Stores(framework.KeyValueStore(CountsStore))).
		Build()
}
