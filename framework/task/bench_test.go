package task_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/task"
)

// countingObserver stands in for the runtime's metrics observer.
type countingObserver struct{ delivered int }

func (*countingObserver) Dropped(string, framework.DropEvent) {}
func (o *countingObserver) Delivered(string, time.Duration)   { o.delivered++ }

// releaseEvery is how many records the benchmarks run between two
// ReleaseOutputs, as between two commits of a busy worker.
const releaseEvery = 4096

// BenchmarkPassThrough is the task's share of the runtime's per-record work
// in the end-to-end benchmark: a record carrying an 8-entry clock on
// channels the task does not read goes through the gate and a pass-through
// processor, and its stamped output is taken, as the worker does after every
// record it polls. With "same-clock" every record carries the same clock,
// as the end-to-end benchmark's load does; with "moving-clock" one entry
// grows from record to record, as in an upstream task's stamps, where the
// frontier of the input it read moves. Outputs are released every
// releaseEvery records, as the runtime does after each commit.
func BenchmarkPassThrough(b *testing.B) {
	for _, gateOff := range []bool{false, true} {
		for _, moving := range []bool{false, true} {
			name := "gate-on"
			if gateOff {
				name = "gate-off"
			}
			name += "/same-clock"
			if moving {
				name = strings.Replace(name, "same", "moving", 1)
			}
			b.Run(name, func(b *testing.B) { benchPassThrough(b, gateOff, moving) })
		}
	}
}

func benchPassThrough(b *testing.B, gateOff, moving bool) {
	topo, err := framework.NewBuilder("bench").Processor("pass", func() framework.Processor {
		return framework.ProcessorFunc(func(ctx framework.Context, rec framework.Record) error { return ctx.Forward(rec) })
	}, framework.From("in"), framework.To("out")).Build()
	if err != nil {
		b.Fatal(err)
	}
	obs := &countingObserver{}
	// The runtime's tasks read the pump's clock, which it reads
	// once per poll, not the wall clock per record.
	now := time.Now()
	tk, err := task.New(task.Config{Topology: topo, Processor: "pass", GateOff: gateOff, Observer: obs,
		OutputPartitions: func(string) (int32, error) { return 4, nil }, Now: func() time.Time { return now }})
	if err != nil {
		b.Fatal(err)
	}
	if err := tk.Seed("in", 0); err != nil {
		b.Fatal(err)
	}
	if err := tk.Start(); err != nil {
		b.Fatal(err)
	}
	// 1024 headers, used in turn; with moving, the last entry of
	// each is one above the one before.
	headers := make([][]byte, 1024)
	for h := range headers {
		var es []causal.Entry
		for i := range 8 {
			es = append(es, causal.Entry{Channel: causal.Channel{Topic: "upstream-" + strconv.Itoa(i/4), Partition: int32(i % 4)}, Offset: 1_000_000 + int64(i)})
		}
		if moving {
			es[7].Offset += int64(h)
		}
		clock, err := causal.NewClock(es...)
		if err != nil {
			b.Fatal(err)
		}
		headers[h] = causal.EncodeClock(clock)
	}
	value := make([]byte, 100)
	keys := make([][]byte, 1024)
	for i := range keys {
		keys[i] = []byte("k" + strconv.Itoa(i))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		rec := framework.Record{Key: keys[i%len(keys)], Value: value, Timestamp: now, Topic: "in", Offset: int64(i),
			Headers: []framework.Header{{Key: causal.HeaderKey, Value: headers[i%len(headers)]}}}
		if err := tk.Receive(rec); err != nil {
			b.Fatal(err)
		}
		if outs := tk.TakeOutputs(); len(outs) != 1 {
			b.Fatalf("record %d: %d outputs, want 1", i, len(outs))
		}
		if i%releaseEvery == releaseEvery-1 {
			tk.ReleaseOutputs() // as the runtime does after a commit
		}
	}
	b.StopTimer()
	if obs.delivered != b.N {
		b.Fatalf("%d deliveries for %d records", obs.delivered, b.N)
	}
}
