package kstest

import (
	"testing"

	"github.com/causeway-stream/causeway/framework/dsl"
)

// sessionCount is the topology of KStreamSessionWindowAggregateProcessorTest:
// records counted per session (its aggregator adds one, its merger adds
// the counts), the counts written as decimal strings.
func sessionCount(w dsl.SessionWindows, final bool) func(b *dsl.Builder) {
	return func(b *dsl.Builder) {
		s := dsl.SessionWindowedBy(dsl.From(b, "topic", text).GroupByKey(), w)
		if final {
			s = s.EmitOnWindowClose()
		}
		dsl.MapValues(s.Count("sessions").ToStream(), countString).To("out")
	}
}

func TestSessionWindowAggregation(t *testing.T) {
	const gap = 5 * 60 * 1000 // GAP_MS
	noGrace := dsl.SessionWindows{Gap: ms(gap)}
	multipleIn := keyed("topic", "mel", "first", 0, "mel", "second", gap+1, "mel", "second", gap+1,
		"mel", "third", 2*gap+2, "mel", "third", 2*gap+2, "mel", "third", 2*gap+2)
	mergingIn := keyed("topic", "a", "1", 0, "b", "1", 0, "c", "1", 0, "d", "1", 0, "d", "2", gap/2,
		"a", "2", gap+1, "b", "2", gap+1, "a", "3", gap+1+gap/2, "c", "3", gap+1+gap/2)
	lateZeroGraceIn := keyed("topic", "dummy", "dummy", 0, "OnTime1", "1", 0, "dummy", "dummy", 11, "Late1", "1", 0)
	lateGraceIn := keyed("topic", "dummy", "dummy", 0, "OnTime1", "1", 0, "dummy", "dummy", 11, "OnTime2", "1", 0,
		"dummy", "dummy", 12, "Late1", "1", 0)
	runAll(t, []kcase{
		{
			from:  "KStreamSessionWindowAggregateProcessorTest.shouldHaveMultipleSessionsForSameIdWhenTimestampApartBySessionGap (ON_WINDOW_CLOSE)",
			build: sessionCount(noGrace, true),
			in:    multipleIn,
			key:   sessionKey,
			want:  []kv{{"mel@[0,0]", "1", 0}, {"mel@[300001,300001]", "2", gap + 1}},
		},
		{
			from:  "KStreamSessionWindowAggregateProcessorTest.shouldHandleMultipleSessionsAndMerging (ON_WINDOW_CLOSE)",
			build: sessionCount(noGrace, true),
			in:    mergingIn,
			key:   sessionKey,
			want:  []kv{{"a@[0,0]", "1", 0}, {"b@[0,0]", "1", 0}, {"c@[0,0]", "1", 0}, {"d@[0,150000]", "2", gap / 2}},
		},
		{
			from:  "KStreamSessionWindowAggregateProcessorTest.shouldImmediatelyForwardNewSessionWhenNonCachedStore",
			build: sessionCount(noGrace, false),
			in:    keyed("topic", "a", "1", 0, "b", "1", 0, "c", "1", 0),
			key:   sessionKey,
			want:  []kv{{"a@[0,0]", "1", 0}, {"b@[0,0]", "1", 0}, {"c@[0,0]", "1", 0}},
		},
		{
			// The merged-away session's tombstone carries its own end.
			from:  "KStreamSessionWindowAggregateProcessorTest.shouldImmediatelyForwardRemovedSessionsWhenMerging",
			build: sessionCount(noGrace, false),
			in:    keyed("topic", "a", "1", 0, "a", "1", 5),
			key:   sessionKey,
			want:  []kv{{"a@[0,0]", "1", 0}, {"a@[0,0]", null, 0}, {"a@[0,5]", "2", 5}},
		},
		{
			from:      "KStreamSessionWindowAggregateProcessorTest.shouldLogAndMeterWhenSkippingLateRecordWithZeroGrace",
			build:     sessionCount(dsl.SessionWindows{Gap: ms(10)}, false),
			in:        lateZeroGraceIn,
			key:       sessionKey,
			anyOutput: true,
			late:      1,
		},
		{
			// Stream time 11 with gap 10 and grace 1: a session ending at 0
			// is still on time (KAFKA-12718); at 12 it is late.
			from:      "KStreamSessionWindowAggregateProcessorTest.shouldLogAndMeterWhenSkippingLateRecordWithNonzeroGrace",
			build:     sessionCount(dsl.SessionWindows{Gap: ms(10), Grace: ms(1)}, false),
			in:        lateGraceIn,
			key:       sessionKey,
			anyOutput: true,
			late:      1,
		},
	})
}
