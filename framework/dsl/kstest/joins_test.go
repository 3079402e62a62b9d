package kstest

import (
	"fmt"
	"testing"
	"time"

	"github.com/causeway-stream/causeway/framework/dsl"
)

// pipe is the loops of the Java join tests: n records of keys 0 to n-1
// into topic, valued prefix+key, at ts, or at ts+i for the i-th key when
// step is set.
func pipe(topic, prefix string, n int, ts int64, step bool) []in {
	out := make([]in, n)
	for i := range n {
		at := ts
		if step {
			at += int64(i)
		}
		out[i] = in{topic, fmt.Sprint(i), fmt.Sprintf("%s%d", prefix, i), at}
	}
	return out
}

// seq joins the stages of a test, inputs and expected outputs alike.
func seq[T any](parts ...[]T) []T {
	var out []T
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// joinValue is Kafka Streams' MockValueJoiner.TOSTRING_JOINER, with Java's
// "null" for a missing side.
func joinValue(l string, lok bool, r string, rok bool) string {
	if !lok {
		l = "null"
	}
	if !rok {
		r = "null"
	}
	return l + "+" + r
}

type joinKind int

const (
	inner joinKind = iota
	left
	outer
)

// streamJoin joins topic1 and topic2 within w, the results to "out".
func streamJoin(kind joinKind, w dsl.JoinWindows) func(b *dsl.Builder) {
	return func(b *dsl.Builder) {
		s1, s2 := dsl.From(b, "topic1", text), dsl.From(b, "topic2", text)
		var joined dsl.Stream[string, string]
		switch kind {
		case inner:
			joined = dsl.JoinStreams(s1, s2, w, "join", func(_, l, r string) (string, error) { return joinValue(l, true, r, true), nil })
		case left:
			joined = dsl.LeftJoinStreams(s1, s2, w, "join", func(_, l, r string, rok bool) (string, error) { return joinValue(l, true, r, rok), nil })
		default:
			joined = dsl.OuterJoinStreams(s1, s2, w, "join", func(_, l string, lok bool, r string, rok bool) (string, error) {
				return joinValue(l, lok, r, rok), nil
			})
		}
		joined.WithSerdes(text.Key, text.Value).To("out")
	}
}

// window is JoinWindows in milliseconds.
func window(before, after, grace int64) dsl.JoinWindows {
	return dsl.JoinWindows{Before: ms(before), After: ms(after), Grace: ms(grace)}
}

// noGrace is JoinWindows.ofTimeDifferenceWithNoGrace(d).
func noGrace(d int64) dsl.JoinWindows { return window(d, d, 0) }

const hours24 = int64(24 * time.Hour / time.Millisecond)

// joinABC is the inputs and results shared by KStreamKStreamJoinTest's
// testJoin and testOuterJoin: every record at time 0, within the window.
func joinABC() ([]in, []kv) {
	return seq(pipe("topic1", "A", 2, 0, false), pipe("topic2", "a", 2, 0, false), pipe("topic1", "B", 4, 0, false),
			pipe("topic2", "b", 4, 0, false), pipe("topic1", "C", 4, 0, false), pipe("topic2", "c", 2, 0, false)),
		[]kv{
			{"0", "A0+a0", 0}, {"1", "A1+a1", 0},
			{"0", "B0+a0", 0}, {"1", "B1+a1", 0},
			{"0", "A0+b0", 0}, {"0", "B0+b0", 0}, {"1", "A1+b1", 0}, {"1", "B1+b1", 0}, {"2", "B2+b2", 0}, {"3", "B3+b3", 0},
			{"0", "C0+a0", 0}, {"0", "C0+b0", 0}, {"1", "C1+a1", 0}, {"1", "C1+b1", 0}, {"2", "C2+b2", 0}, {"3", "C3+b3", 0},
			{"0", "A0+c0", 0}, {"0", "B0+c0", 0}, {"0", "C0+c0", 0}, {"1", "A1+c1", 0}, {"1", "B1+c1", 0}, {"1", "C1+c1", 0},
		}
}

func TestStreamStreamJoin(t *testing.T) {
	abcIn, abcWant := joinABC()
	runAll(t, []kcase{
		{from: "KStreamKStreamJoinTest.testJoin", build: streamJoin(inner, noGrace(100)), in: abcIn, want: abcWant},
		{
			// An outer join with a day of grace: no record is alone yet.
			from: "KStreamKStreamJoinTest.testOuterJoin", build: streamJoin(outer, window(100, 100, hours24)), in: abcIn, want: abcWant,
		},
		{
			// Kafka Streams meters nothing here. A record that joins nothing
			// and is older than stream time minus the join's retention
			// (Before+After+Grace, 200) can have no effect, now or later, so
			// it is reported late: the four at 899 and at 1899, and those at
			// 900 to 903 and 1900 to 1903 whose key finds no partner (six
			// each).
			from:  "KStreamKStreamJoinTest.testWindowing",
			build: streamJoin(inner, noGrace(100)),
			in: seq(pipe("topic1", "A", 2, 0, false), pipe("topic2", "a", 2, 0, false),
				pipe("topic1", "B", 4, 1000, true),
				pipe("topic2", "b", 4, 1100, false), pipe("topic2", "c", 4, 1101, false), pipe("topic2", "d", 4, 1102, false),
				pipe("topic2", "e", 4, 1103, false), pipe("topic2", "f", 4, 1104, false),
				pipe("topic2", "g", 4, 899, false), pipe("topic2", "h", 4, 900, false), pipe("topic2", "i", 4, 901, false),
				pipe("topic2", "j", 4, 902, false), pipe("topic2", "k", 4, 903, false),
				pipe("topic2", "l", 4, 2000, true),
				pipe("topic1", "C", 4, 2100, false), pipe("topic1", "D", 4, 2101, false), pipe("topic1", "E", 4, 2102, false),
				pipe("topic1", "F", 4, 2103, false), pipe("topic1", "G", 4, 2104, false),
				pipe("topic1", "H", 4, 1899, false), pipe("topic1", "I", 4, 1900, false), pipe("topic1", "J", 4, 1901, false),
				pipe("topic1", "K", 4, 1902, false), pipe("topic1", "L", 4, 1903, false)),
			want: []kv{
				{"0", "A0+a0", 0}, {"1", "A1+a1", 0},
				{"0", "B0+b0", 1100}, {"1", "B1+b1", 1100}, {"2", "B2+b2", 1100}, {"3", "B3+b3", 1100},
				{"1", "B1+c1", 1101}, {"2", "B2+c2", 1101}, {"3", "B3+c3", 1101},
				{"2", "B2+d2", 1102}, {"3", "B3+d3", 1102},
				{"3", "B3+e3", 1103},
				{"0", "B0+h0", 1000},
				{"0", "B0+i0", 1000}, {"1", "B1+i1", 1001},
				{"0", "B0+j0", 1000}, {"1", "B1+j1", 1001}, {"2", "B2+j2", 1002},
				{"0", "B0+k0", 1000}, {"1", "B1+k1", 1001}, {"2", "B2+k2", 1002}, {"3", "B3+k3", 1003},
				{"0", "C0+l0", 2100}, {"1", "C1+l1", 2100}, {"2", "C2+l2", 2100}, {"3", "C3+l3", 2100},
				{"1", "D1+l1", 2101}, {"2", "D2+l2", 2101}, {"3", "D3+l3", 2101},
				{"2", "E2+l2", 2102}, {"3", "E3+l3", 2102},
				{"3", "F3+l3", 2103},
				{"0", "I0+l0", 2000},
				{"0", "J0+l0", 2000}, {"1", "J1+l1", 2001},
				{"0", "K0+l0", 2000}, {"1", "K1+l1", 2001}, {"2", "K2+l2", 2002},
				{"0", "L0+l0", 2000}, {"1", "L1+l1", 2001}, {"2", "L2+l2", 2002}, {"3", "L3+l3", 2003},
			},
			late: 20,
		},
		{
			from:  "KStreamKStreamJoinTest.testAsymmetricWindowingAfter",
			build: streamJoin(inner, window(0, 100, 0)),
			in: seq(pipe("topic1", "A", 4, 1000, true),
				pipe("topic2", "a", 4, 999, false), pipe("topic2", "b", 4, 1000, false), pipe("topic2", "c", 4, 1001, false),
				pipe("topic2", "d", 4, 1002, false), pipe("topic2", "e", 4, 1003, false),
				pipe("topic2", "f", 4, 1100, false), pipe("topic2", "g", 4, 1101, false), pipe("topic2", "h", 4, 1102, false),
				pipe("topic2", "i", 4, 1103, false), pipe("topic2", "j", 4, 1104, false)),
			want: []kv{
				{"0", "A0+b0", 1000},
				{"0", "A0+c0", 1001}, {"1", "A1+c1", 1001},
				{"0", "A0+d0", 1002}, {"1", "A1+d1", 1002}, {"2", "A2+d2", 1002},
				{"0", "A0+e0", 1003}, {"1", "A1+e1", 1003}, {"2", "A2+e2", 1003}, {"3", "A3+e3", 1003},
				{"0", "A0+f0", 1100}, {"1", "A1+f1", 1100}, {"2", "A2+f2", 1100}, {"3", "A3+f3", 1100},
				{"1", "A1+g1", 1101}, {"2", "A2+g2", 1101}, {"3", "A3+g3", 1101},
				{"2", "A2+h2", 1102}, {"3", "A3+h3", 1102},
				{"3", "A3+i3", 1103},
			},
		},
		{
			// Retention 100 at stream time 1003: the right records at 899 to
			// 902 that find no partner are reported late (4+3+2+1).
			from:  "KStreamKStreamJoinTest.testAsymmetricWindowingBefore",
			build: streamJoin(inner, window(100, 0, 0)),
			in: seq(pipe("topic1", "A", 4, 1000, true),
				pipe("topic2", "a", 4, 899, false), pipe("topic2", "b", 4, 900, false), pipe("topic2", "c", 4, 901, false),
				pipe("topic2", "d", 4, 902, false), pipe("topic2", "e", 4, 903, false),
				pipe("topic2", "f", 4, 1000, false), pipe("topic2", "g", 4, 1001, false), pipe("topic2", "h", 4, 1002, false),
				pipe("topic2", "i", 4, 1003, false), pipe("topic2", "j", 4, 1004, false)),
			want: []kv{
				{"0", "A0+b0", 1000},
				{"0", "A0+c0", 1000}, {"1", "A1+c1", 1001},
				{"0", "A0+d0", 1000}, {"1", "A1+d1", 1001}, {"2", "A2+d2", 1002},
				{"0", "A0+e0", 1000}, {"1", "A1+e1", 1001}, {"2", "A2+e2", 1002}, {"3", "A3+e3", 1003},
				{"0", "A0+f0", 1000}, {"1", "A1+f1", 1001}, {"2", "A2+f2", 1002}, {"3", "A3+f3", 1003},
				{"1", "A1+g1", 1001}, {"2", "A2+g2", 1002}, {"3", "A3+g3", 1003},
				{"2", "A2+h2", 1002}, {"3", "A3+h3", 1003},
				{"3", "A3+i3", 1003},
			},
			late: 10,
		},
	})
}

// one is a single input record.
func one(topic, key, value string, ms int64) []in { return []in{{topic, key, value, ms}} }

func TestStreamStreamLeftJoin(t *testing.T) {
	// The four tests of which processor emits what: left records alone once
	// their window closes, whichever side moves stream time; right records
	// never alone.
	expiredLeft := func(second, third string, at4 int64) []in {
		return seq(one("topic1", "0", "A0", 1), one("topic1", "1", "A1", 2), one("topic1", "0", "A0-0", 3),
			one("topic2", "1", "a1", 3), one(second, "2", "dummy", 401), one(third, "2", "dummy", at4))
	}
	expiredRight := func(second, third string, at4 int64) []in {
		return seq(one("topic2", "0", "A0", 1), one("topic2", "1", "A1", 2), one("topic2", "0", "A0-0", 3),
			one("topic1", "1", "a1", 3), one(second, "2", "dummy", 401), one(third, "2", "dummy", at4))
	}
	runAll(t, []kcase{
		{
			from:  "KStreamKStreamLeftJoinTest.testLeftJoinDuplicates",
			build: streamJoin(left, window(100, 100, 10)),
			in: seq(one("topic1", "0", "A0", 0), one("topic1", "0", "A0-0", 0), one("topic2", "1", "a0", 111), one("topic2", "2", "dummy", 500),
				one("topic1", "2", "A2", 1000), one("topic1", "2", "A2-0", 1000), one("topic2", "2", "a2", 1001), one("topic2", "3", "a3", 315)),
			want: []kv{{"0", "A0+null", 0}, {"0", "A0-0+null", 0}, {"2", "A2+a2", 1001}, {"2", "A2-0+a2", 1001}},
			late: 1, // a3 at 315, stream time 1001: joins nothing, older than the retention (210)
		},
		{
			from:  "KStreamKStreamLeftJoinTest.testLeftExpiredNonJoinedRecordsAreEmittedByTheLeftProcessor",
			build: streamJoin(left, window(100, 100, 0)),
			in:    expiredLeft("topic1", "topic2", 401),
			want:  []kv{{"1", "A1+a1", 3}, {"0", "A0+null", 1}, {"0", "A0-0+null", 3}, {"2", "dummy+dummy", 401}},
		},
		{
			from:  "KStreamKStreamLeftJoinTest.testLeftExpiredNonJoinedRecordsAreEmittedByTheRightProcessor",
			build: streamJoin(left, window(100, 100, 0)),
			in:    expiredLeft("topic2", "topic1", 402),
			want:  []kv{{"1", "A1+a1", 3}, {"0", "A0+null", 1}, {"0", "A0-0+null", 3}, {"2", "dummy+dummy", 402}},
		},
		{
			from:  "KStreamKStreamLeftJoinTest.testRightNonJoinedRecordsAreNeverEmittedByTheLeftProcessor",
			build: streamJoin(left, window(100, 100, 0)),
			in:    expiredRight("topic1", "topic2", 402),
			want:  []kv{{"1", "a1+A1", 3}, {"2", "dummy+dummy", 402}},
		},
		{
			from:  "KStreamKStreamLeftJoinTest.testRightNonJoinedRecordsAreNeverEmittedByTheRightProcessor",
			build: streamJoin(left, noGrace(100)),
			in:    expiredRight("topic2", "topic1", 402),
			want:  []kv{{"1", "a1+A1", 3}, {"2", "dummy+dummy", 402}},
		},
		{
			from:  "KStreamKStreamLeftJoinTest.testLeftJoinedRecordsWithZeroAfterAreEmitted",
			build: streamJoin(left, window(100, 0, 0)),
			in: seq(pipe("topic1", "A", 4, 1000, true), pipe("topic2", "a", 4, 999, false), pipe("topic2", "b", 4, 1000, false),
				pipe("topic2", "c", 4, 1001, false), pipe("topic2", "d", 4, 1002, false), pipe("topic2", "e", 4, 1003, false),
				pipe("topic2", "f", 4, 1100, false)),
			want: []kv{
				{"0", "A0+null", 1000}, {"1", "A1+null", 1001}, {"2", "A2+null", 1002},
				{"0", "A0+a0", 1000}, {"1", "A1+a1", 1001}, {"2", "A2+a2", 1002}, {"3", "A3+a3", 1003},
				{"0", "A0+b0", 1000}, {"1", "A1+b1", 1001}, {"2", "A2+b2", 1002}, {"3", "A3+b3", 1003},
				{"1", "A1+c1", 1001}, {"2", "A2+c2", 1002}, {"3", "A3+c3", 1003},
				{"2", "A2+d2", 1002}, {"3", "A3+d3", 1003},
				{"3", "A3+e3", 1003},
			},
		},
		{
			from:  "KStreamKStreamLeftJoinTest.testOrdering",
			build: streamJoin(left, noGrace(100)),
			in:    seq(one("topic1", "0", "A0", 0), one("topic1", "1", "A1", 100), one("topic2", "1", "a1", 110)),
			want:  []kv{{"0", "A0+null", 0}, {"1", "A1+a1", 110}},
		},
		{
			from:  "KStreamKStreamLeftJoinTest.testGracePeriod",
			build: streamJoin(left, window(100, 100, 10)),
			in:    seq(pipe("topic1", "A", 2, 0, false), pipe("topic2", "a", 4, 101, false), one("topic2", "0", "dummy", 1201)),
			want:  []kv{{"0", "A0+null", 0}, {"1", "A1+null", 0}},
		},
		{
			from:  "KStreamKStreamLeftJoinTest.shouldNotEmitLeftJoinResultForAsymmetricWindow",
			build: streamJoin(left, window(0, 100, 0)),
			in:    seq(pipe("topic1", "A", 2, 0, true), one("topic2", "0", "a0", 100), one("topic2", "1", "a1", 102)),
			want:  []kv{{"0", "A0+a0", 100}, {"1", "A1+null", 1}},
		},
	})
}

func TestStreamStreamOuterJoin(t *testing.T) {
	expiredLeft := func(second, third string, at4 int64) ([]in, []kv) {
		return seq(one("topic1", "0", "A0", 1), one("topic1", "1", "A1", 2), one("topic1", "0", "A0-0", 3),
				one("topic2", "1", "11", 3), one(second, "2", map[string]string{"topic1": "dummy", "topic2": "100"}[second], 401),
				one(third, "2", map[string]string{"topic1": "dummy", "topic2": "100"}[third], at4)),
			[]kv{{"1", "A1+11", 3}, {"0", "A0+null", 1}, {"0", "A0-0+null", 3}, {"2", "dummy+100", at4}}
	}
	expiredRight := func(second, third string, at4 int64) ([]in, []kv) {
		return seq(one("topic2", "0", "10", 1), one("topic2", "1", "11", 2), one("topic2", "0", "12", 3),
				one("topic1", "1", "A1", 3), one(second, "2", map[string]string{"topic1": "dummy", "topic2": "100"}[second], 401),
				one(third, "2", map[string]string{"topic1": "dummy", "topic2": "100"}[third], at4)),
			[]kv{{"1", "A1+11", 3}, {"0", "null+10", 1}, {"0", "null+12", 3}, {"2", "dummy+100", at4}}
	}
	leftByLeftIn, leftByLeftWant := expiredLeft("topic1", "topic2", 401)
	leftByRightIn, leftByRightWant := expiredLeft("topic2", "topic1", 402)
	rightByLeftIn, rightByLeftWant := expiredRight("topic1", "topic2", 402)
	rightByRightIn, rightByRightWant := expiredRight("topic2", "topic1", 402)
	runAll(t, []kcase{
		{
			// At equal times, right records come before left ones.
			from:  "KStreamKStreamOuterJoinTest.testOuterJoinDuplicates",
			build: streamJoin(outer, window(100, 100, 10)),
			in: seq(one("topic1", "0", "A0", 0), one("topic1", "0", "A0-0", 0), one("topic2", "1", "11", 0), one("topic2", "1", "12", 0),
				one("topic2", "1", "10", 111), one("topic2", "3", "100", 211),
				one("topic1", "2", "A2", 200), one("topic1", "2", "A2-0", 200), one("topic2", "2", "13", 201), one("topic2", "2", "14", 201),
				one("topic2", "3", "100", 1500)),
			want: []kv{
				{"1", "null+11", 0}, {"1", "null+12", 0}, {"0", "A0+null", 0}, {"0", "A0-0+null", 0},
				{"2", "A2+13", 201}, {"2", "A2-0+13", 201}, {"2", "A2+14", 201}, {"2", "A2-0+14", 201},
				{"1", "null+10", 111}, {"3", "null+100", 211},
			},
		},
		{from: "KStreamKStreamOuterJoinTest.testLeftExpiredNonJoinedRecordsAreEmittedByTheLeftProcessor", build: streamJoin(outer, noGrace(100)), in: leftByLeftIn, want: leftByLeftWant},
		{from: "KStreamKStreamOuterJoinTest.testLeftExpiredNonJoinedRecordsAreEmittedByTheRightProcessor", build: streamJoin(outer, window(100, 100, 0)), in: leftByRightIn, want: leftByRightWant},
		{from: "KStreamKStreamOuterJoinTest.testRightExpiredNonJoinedRecordsAreEmittedByTheLeftProcessor", build: streamJoin(outer, noGrace(100)), in: rightByLeftIn, want: rightByLeftWant},
		{from: "KStreamKStreamOuterJoinTest.testRightExpiredNonJoinedRecordsAreEmittedByTheRightProcessor", build: streamJoin(outer, window(100, 100, 0)), in: rightByRightIn, want: rightByRightWant},
		{
			from:  "KStreamKStreamOuterJoinTest.testOrdering",
			build: streamJoin(outer, noGrace(100)),
			in:    seq(one("topic1", "0", "A0", 0), one("topic1", "1", "A1", 100), one("topic2", "1", "11", 110)),
			want:  []kv{{"0", "A0+null", 0}, {"1", "A1+11", 110}},
		},
		{
			from:  "KStreamKStreamOuterJoinTest.testGracePeriod",
			build: streamJoin(outer, window(100, 100, 10)),
			in: seq(one("topic1", "0", "A0", 0), one("topic2", "1", "11", 0), one("topic1", "1", "A1", 101), one("topic2", "0", "10", 101),
				one("topic2", "0", "100", 112)),
			want: []kv{{"1", "null+11", 0}, {"0", "A0+null", 0}},
		},
		{
			from:  "KStreamKStreamOuterJoinTest.testEmitAllNonJoinedResultsForAsymmetricWindow",
			build: streamJoin(outer, window(5, 20, 0)),
			in: seq(one("topic1", "0", "A0", 29), one("topic1", "1", "A1", 30), one("topic2", "2", "12", 31), one("topic2", "3", "13", 36),
				one("topic2", "4", "14", 37), one("topic2", "5", "15", 50)),
			want: []kv{{"2", "null+12", 31}, {"0", "A0+null", 29}, {"3", "null+13", 36}, {"4", "null+14", 37}},
		},
		{
			from:  "KStreamKStreamOuterJoinTest.testShouldNotEmitLeftJoinResultForAsymmetricBeforeWindow",
			build: streamJoin(outer, window(0, 100, 0)),
			in: seq(pipe("topic1", "A", 2, 0, true), one("topic2", "0", "10", 100), one("topic2", "1", "11", 102), one("topic2", "2", "12", 103),
				one("topic1", "2", "A2", 103)),
			want: []kv{{"0", "A0+10", 100}, {"1", "A1+null", 1}, {"1", "null+11", 102}, {"2", "A2+12", 103}},
		},
		{
			from:  "KStreamKStreamOuterJoinTest.testShouldNotEmitLeftJoinResultForAsymmetricAfterWindow",
			build: streamJoin(outer, window(100, 0, 0)),
			in: seq(pipe("topic1", "A", 2, 0, true), one("topic2", "1", "11", 1), one("topic2", "2", "12", 101), one("topic2", "3", "13", 101),
				one("topic1", "2", "A2", 201)),
			want: []kv{{"0", "A0+null", 0}, {"1", "A1+11", 1}, {"2", "A2+12", 201}},
		},
	})
}
