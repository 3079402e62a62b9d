package causal_test

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/causeway-stream/causeway/causal"
)

// benchClock builds a clock of n entries spread over topics of up to eight
// partitions each ("up0/0".."up0/7", "up1/0", ...), every one claiming an
// offset that the benchmark node has already passed.
func benchClock(b *testing.B, n int) causal.Clock {
	b.Helper()
	es := make([]causal.Entry, n)
	for i := range es {
		es[i] = causal.Entry{
			Channel: causal.Channel{Topic: "up" + strconv.Itoa(i/8), Partition: int32(i % 8)},
			Offset:  1<<20 + int64(i),
		}
	}
	c, err := causal.NewClock(es...)
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// benchNode consumes "in/0" and every channel of the clock (all seeded past
// its claims), so each entry is looked up and compared, and has one output
// the input feeds, so each entry is also folded.
func benchNode(b *testing.B, clock causal.Clock, held int, opts ...causal.NodeOpt) *causal.Node[int64] {
	b.Helper()
	inputs := []string{"in", "cause", "held"}
	for ch := range clock.All() {
		if ch.Partition == 0 {
			inputs = append(inputs, ch.Topic)
		}
	}
	n, err := causal.NewNode[int64](append([]causal.NodeOpt{causal.Inputs(inputs...), causal.Output("out")}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	seed := func(ch causal.Channel, next int64) {
		if err := n.Seed(ch, next); err != nil {
			b.Fatal(err)
		}
	}
	seed(causal.Channel{Topic: "in"}, 0)
	seed(causal.Channel{Topic: "cause"}, 0)
	for ch := range clock.All() {
		seed(ch, 1<<30)
	}
	// held heads on other channels, each waiting for cause/0 at an offset that
	// never arrives.
	wait, err := causal.NewClock(causal.Entry{Channel: causal.Channel{Topic: "cause"}, Offset: 1 << 40})
	if err != nil {
		b.Fatal(err)
	}
	for p := range held {
		ch := causal.Channel{Topic: "held", Partition: int32(p)}
		seed(ch, 0)
		if _, err := n.Receive(ch, 0, wait, 0); err != nil {
			b.Fatal(err)
		}
	}
	if _, ok := n.Next(); ok {
		b.Fatal("a held head was delivered")
	}
	return n
}

func benchGate(b *testing.B, entries, held int, prefer bool) {
	clock := benchClock(b, entries)
	n := benchNode(b, clock, held)
	if prefer {
		n.PreferBy(func(a, b int64) bool { return a < b })
	}
	in := causal.Channel{Topic: "in"}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		off := int64(i)
		if _, err := n.Receive(in, off, clock, off); err != nil {
			b.Fatal(err)
		}
		d, ok := n.Next()
		if !ok || d.Offset != off {
			b.Fatalf("record %d not delivered", off)
		}
	}
}

// BenchmarkGate is the gate's cost per delivered record on the in-order
// fast path: Receive (replay guard, fold into the advertised clock, queue,
// bridge, evaluate every entry) and Next, with the clock already decoded.
func BenchmarkGate(b *testing.B) {
	for _, n := range []int{1, 8, 64} {
		b.Run("entries="+strconv.Itoa(n), func(b *testing.B) { benchGate(b, n, 0, false) })
	}
}

// BenchmarkGatePreferred is BenchmarkGate with deliverable records ranked
// (PreferBy), as a task ranks them by timestamp.
func BenchmarkGatePreferred(b *testing.B) {
	for _, n := range []int{1, 8, 64} {
		b.Run("entries="+strconv.Itoa(n), func(b *testing.B) { benchGate(b, n, 0, true) })
	}
}

// BenchmarkGateHeld is BenchmarkGate with 10,000 heads held on other
// channels: the cost must not grow with them.
func BenchmarkGateHeld(b *testing.B) {
	for _, n := range []int{1, 8, 64} {
		b.Run("entries="+strconv.Itoa(n), func(b *testing.B) { benchGate(b, n, 10_000, false) })
	}
}

// BenchmarkGateHeader is the gate's cost per delivered record from the
// encoded header (the runtime's path), with and without checking each claim
// against the channels' known ends (CheckClaims, on for records entering
// the topology from outside).
func BenchmarkGateHeader(b *testing.B) {
	for _, check := range []bool{false, true} {
		b.Run("check-claims="+strconv.FormatBool(check), func(b *testing.B) {
			clock := benchClock(b, 8)
			var opts []causal.NodeOpt
			if check {
				opts = append(opts, causal.CheckClaims("in"))
			}
			n := benchNode(b, clock, 0, opts...)
			for ch, off := range clock.All() {
				n.SetEnd(ch, off+1)
			}
			header := causal.EncodeClock(clock)
			in := causal.Channel{Topic: "in"}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				off := int64(i)
				if _, err := n.ReceiveHeader(in, off, header, true, off); err != nil {
					b.Fatal(err)
				}
				if _, ok := n.Next(); !ok {
					b.Fatalf("record %d not delivered", off)
				}
			}
		})
	}
}

// BenchmarkMapLookup is the yardstick: one lookup in a Go map with string
// keys of topic-like length.
func BenchmarkMapLookup(b *testing.B) {
	m := map[string]int64{}
	keys := make([]string, 64)
	for i := range keys {
		keys[i] = "orders-topic-" + strconv.Itoa(i)
		m[keys[i]] = int64(i)
	}
	var sink int64
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		sink += m[keys[i&63]]
	}
	if sink < 0 {
		b.Fatal(sink)
	}
}

// codecClock is a clock of n entries over topics of eight partitions, with
// offsets below 2^21.
func codecClock(b *testing.B, n int) causal.Clock {
	b.Helper()
	es := make([]causal.Entry, n)
	for i := range es {
		es[i] = causal.Entry{
			Channel: causal.Channel{Topic: "orders-" + strconv.Itoa(i/8), Partition: int32(i % 8)},
			Offset:  1<<21 - 1 - int64(i)*1000,
		}
	}
	c, err := causal.NewClock(es...)
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// namesSize is the bytes the encoding spends on topic names and counts
// (everything but the entries), so that bytes/entry is per entry.
func namesSize(c causal.Clock) int {
	size, prev := 2, ""
	for ch := range c.All() {
		if ch.Topic != prev {
			size += 2 + len(ch.Topic)
			prev = ch.Topic
		}
	}
	return size
}

func BenchmarkEncode(b *testing.B) {
	for _, n := range []int{8, 64} {
		b.Run("entries="+strconv.Itoa(n), func(b *testing.B) {
			c := codecClock(b, n)
			buf := make([]byte, 0, 1024)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				buf = causal.AppendClock(buf[:0], c)
			}
			b.ReportMetric(float64(len(buf)), "bytes/clock")
			b.ReportMetric(float64(len(buf)-namesSize(c))/float64(n), "bytes/entry")
		})
	}
}

func BenchmarkDecode(b *testing.B) {
	for _, n := range []int{8, 64} {
		b.Run("entries="+strconv.Itoa(n), func(b *testing.B) {
			enc := causal.EncodeClock(codecClock(b, n))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := causal.DecodeClock(enc); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(enc)), "bytes/clock")
		})
	}
}

// BenchmarkJSONEncode is encoding/json of the same clock, as the obvious
// alternative a header could carry.
func BenchmarkJSONEncode(b *testing.B) {
	for _, n := range []int{8, 64} {
		b.Run("entries="+strconv.Itoa(n), func(b *testing.B) {
			es := codecClock(b, n).Entries()
			var out []byte
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				var err error
				if out, err = json.Marshal(es); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(out)), "bytes/clock")
		})
	}
}

func BenchmarkJSONDecode(b *testing.B) {
	for _, n := range []int{8, 64} {
		b.Run("entries="+strconv.Itoa(n), func(b *testing.B) {
			enc, err := json.Marshal(codecClock(b, n).Entries())
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				var es []causal.Entry
				if err := json.Unmarshal(enc, &es); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(enc)), "bytes/clock")
		})
	}
}

// BenchmarkStamp is the cost of stamping one emitted record into a reused
// buffer, after a delivery with an 8-entry clock: "again" stamps with
// nothing changed since the last stamp (a second output record of the same
// input), "after-delivery" after each delivery of a record without a clock
// on the input, which moves the input's frontier and so one group of the
// stamp, as a pass-through processor stamps.
func BenchmarkStamp(b *testing.B) {
	for _, deliver := range []bool{false, true} {
		name := "again"
		if deliver {
			name = "after-delivery"
		}
		b.Run(name, func(b *testing.B) {
			clock := benchClock(b, 8)
			n := benchNode(b, clock, 0)
			in := causal.Channel{Topic: "in"}
			if _, err := n.Receive(in, 0, clock, 0); err != nil {
				b.Fatal(err)
			}
			n.Next()
			buf := make([]byte, 0, 256)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if deliver {
					off := int64(i) + 1
					if _, err := n.ReceiveHeader(in, off, nil, false, off); err != nil {
						b.Fatal(err)
					}
					if _, ok := n.Next(); !ok {
						b.Fatalf("record %d not delivered", off)
					}
				}
				var err error
				if buf, err = n.AppendStamp(buf[:0], "out"); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(buf)), "bytes/stamp")
		})
	}
}
