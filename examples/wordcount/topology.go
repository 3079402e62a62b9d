package main

import (
	"strings"
	"unicode"

	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/dsl"
	"github.com/causeway-stream/causeway/framework/serde"
)

// Topic and store names of the example.
const (
	LinesTopic  = "lines"
	CountsTopic = "counts"
	CountsStore = "word-counts"
)

var text = serde.Codec[string, string]{Key: serde.String(), Value: serde.String()}

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

// Topology is the classic word count, in the fluent DSL: lines are split
// into words, grouped by word and counted, and each word's count is
// emitted on every change. Grouping by a new key makes the DSL route the
// words through a repartition topic ("<application id>-word-counts-repartition")
// partitioned by word, so the count of a word is kept by one task.
func Topology() (*framework.Topology, error) {
	b := dsl.NewBuilder("wordcount")
	words := dsl.FlatMapValues(dsl.From(b, LinesTopic, text), func(_, line string) ([]string, error) { return Words(line), nil })
	dsl.GroupBy(words, func(_, w string) (string, error) { return w, nil }).
		Count(CountsStore).
		ToStream().To(CountsTopic)
	return b.Build()
}
