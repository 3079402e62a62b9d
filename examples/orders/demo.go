package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/causeway-stream/causeway/examples/internal/demoworker"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/runtime"
	"github.com/causeway-stream/causeway/runtime/embedded"
)

// demoOptions configure a run of the shop.
type demoOptions struct {
	orders  int
	lag     time.Duration // how long the lagging partitions are unreadable
	timeout time.Duration
	client  string // the workers' Kafka client library
}

// partitions of each topic: the inputs of each processor are
// co-partitioned; the audit log needs no such thing.
var partitions = map[string]int{
	OrdersTopic: 3, PaymentsTopic: 3, RequestsTopic: 3, BilledTopic: 3, ShipmentsTopic: 3, AuditTopic: 1,
}

func demo(topo *framework.Topology, args []string) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	o := demoOptions{}
	fs.IntVar(&o.orders, "orders", 60, "orders the client writes")
	fs.DurationVar(&o.lag, "lag", 3*time.Second, "how long the lagging partitions stay behind")
	fs.DurationVar(&o.timeout, "timeout", time.Minute, "give up on a run after this long")
	fs.StringVar(&o.client, "client", runtime.DefaultConfig().Client, "the workers' Kafka client library: "+strings.Join(runtime.Clients(), " or "))
	if status, run := demoworker.ParseFlags(fs, args); !run {
		return status
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Printf("A client writes %d orders, each followed by its payment and a shipment or cancellation request.\n", o.orders)
	fmt.Printf("Partition 0 of orders and partition 1 of payments lag %v behind. The same run, with the gate on and off:\n\n", o.lag)
	on, err := runShop(ctx, topo, false, o, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gate on:", err)
		return 1
	}
	off, err := runShop(ctx, topo, true, o, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gate off:", err)
		return 1
	}
	printComparison(os.Stdout, on, off)
	fmt.Printf("\nRead your own writes: the client pays each order and at once asks a worker that does not hold it\n")
	fmt.Printf("for the order's status, kept by a processor after billing. Same lag:\n\n")
	reads, err := readYourWrites(ctx, topo, o, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "read your writes:", err)
		return 1
	}
	printReads(os.Stdout, reads)
	if !on.Clean() || off.AnomalyCount() == 0 || reads.CausalPaid != reads.Orders {
		return 1
	}
	return 0
}

func printComparison(out io.Writer, on, off Report) {
	row := func(name string, a, b int) { fmt.Fprintf(out, "  %-40s %8d %9d\n", name, a, b) }
	fmt.Fprintf(out, "\n  %-40s %8s %9s\n", "", "gate on", "gate off")
	row("payment handled for an unknown order", on.Anomalies[AnomalyUnknownOrder], off.Anomalies[AnomalyUnknownOrder])
	row("shipment or cancellation before payment", on.Anomalies[AnomalyUnpaid], off.Anomalies[AnomalyUnpaid])
	row("audit saw a shipment before its order", on.Anomalies[AnomalyLaterFirst], off.Anomalies[AnomalyLaterFirst])
	row("duplicates", on.Duplicates, off.Duplicates)
	row("losses", on.Losses, off.Losses)
	fmt.Fprintln(out, "\nExactly-once holds either way; only the gate keeps effects behind their causes.")
}

func printReads(out io.Writer, r ReadReport) {
	fmt.Fprintf(out, "\n  %-40s %8s %9s\n", "", "clock", "no clock")
	fmt.Fprintf(out, "  %-40s %8d %9d\n", "status read \"paid\" right after paying", r.CausalPaid, r.PlainPaid)
	fmt.Fprintf(out, "  %-40s %8d %9d\n", "orders", r.Orders, r.Orders)
	fmt.Fprintf(out, "\n%d of the %d orders were asked of the worker that does not hold them (it forwards); the longest\n", r.Forwarded, r.Orders)
	fmt.Fprintf(out, "read with the clock waited %v, for the lagging partitions and the two processors' commits.\n", r.LongestWait.Round(time.Millisecond))
}

// runShop runs the whole shop once on a fresh embedded broker and verifies
// its committed outputs.
func runShop(ctx context.Context, topo *framework.Topology, gateOff bool, o demoOptions, out io.Writer) (Report, error) {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	mode := "gate on"
	if gateOff {
		mode = "gate off"
	}
	b, err := embedded.Start()
	if err != nil {
		return Report{}, err
	}
	defer b.Close()
	if err := createTopics(ctx, b.Addr()); err != nil {
		return Report{}, err
	}
	// Fetches of these partitions fail until the lag is over: the worker
	// sees payments before their orders and requests before their payments.
	lag := b.Cluster().Fault(
		kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Topic: OrdersTopic, Partitions: []int32{0}, Err: kerr.NotLeaderForPartition, Count: -1},
		kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Topic: PaymentsTopic, Partitions: []int32{1}, Err: kerr.NotLeaderForPartition, Count: -1},
	)
	client, err := NewClient(b.Addr())
	if err != nil {
		return Report{}, err
	}
	written, err := client.Shop(ctx, o.orders)
	client.Close()
	if err != nil {
		return Report{}, err
	}
	state, err := os.MkdirTemp("", "causeway-orders-")
	if err != nil {
		return Report{}, err
	}
	defer os.RemoveAll(state)
	cfg := runtime.DefaultConfig()
	cfg.Client = cmp.Or(o.client, cfg.Client)
	cfg.ApplicationID, cfg.BootstrapServers, cfg.StateDir, cfg.HTTPAddr, cfg.GateOff = "shop", b.Addr(), state, "", gateOff
	log := zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()), zapcore.Lock(os.Stderr), zap.ErrorLevel))
	w, err := runtime.NewStreamThread(cfg, topo, log, nil)
	if err != nil {
		return Report{}, err
	}
	if err := w.Start(ctx); err != nil {
		return Report{}, err
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := w.Stop(stopCtx); err != nil {
			fmt.Fprintln(os.Stderr, "stop worker:", err)
		}
	}()
	fmt.Fprintf(out, "  %-8s: partitions lagging...", mode)
	select {
	case <-time.After(o.lag):
	case <-ctx.Done():
		return Report{}, ctx.Err()
	}
	// On a slow machine the worker may not have read anything yet: the
	// lag lasts until it has received records of the partitions that do
	// not lag, or it would see every order first.
	for !received(w) {
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return Report{}, ctx.Err()
		}
	}
	lag.Remove()
	fmt.Fprint(out, " caught up, reading committed outputs...")
	outputs, err := readOutputs(ctx, b.Addr(), o.orders)
	if err != nil {
		return Report{}, err
	}
	r := Verify(written, outputs)
	fmt.Fprintf(out, " %s\n", r)
	return r, nil
}

func createTopics(ctx context.Context, addr string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return err
	}
	defer cl.Close()
	admin := kadm.NewClient(cl)
	for t, n := range partitions {
		res, err := admin.CreateTopic(ctx, int32(n), -1, nil, t)
		if err == nil {
			err = res.Err
		}
		if err != nil {
			return fmt.Errorf("create topic %s: %w", t, err)
		}
	}
	return nil
}

// readOutputs reads the committed records of the three output topics until
// each has one per order (then a moment more, to catch duplicates).
func readOutputs(ctx context.Context, addr string, orders int) (map[string][]string, error) {
	c, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(BilledTopic, ShipmentsTopic, AuditTopic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	out := map[string][]string{}
	complete := func() bool {
		return len(out[BilledTopic]) >= orders && len(out[ShipmentsTopic]) >= orders && len(out[AuditTopic]) >= orders
	}
	var quietUntil time.Time
	for {
		if complete() && quietUntil.IsZero() {
			quietUntil = time.Now().Add(time.Second)
		}
		if !quietUntil.IsZero() && time.Now().After(quietUntil) {
			return out, nil
		}
		if ctx.Err() != nil {
			// Report what arrived: the verifier counts the rest as lost.
			return out, nil
		}
		poll, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		fetches := c.PollFetches(poll)
		cancel()
		for it := fetches.RecordIter(); !it.Done(); {
			r := it.Next()
			out[r.Topic] = append(out[r.Topic], string(r.Value))
		}
	}
}

// received reports whether w's tasks have received records: delivered
// some, or hold some at the gate.
func received(w *runtime.StreamThread) bool {
	for _, ts := range w.Status().Tasks {
		for _, c := range ts.Channels {
			if c.Frontier >= 0 || c.Held > 0 {
				return true
			}
		}
	}
	return false
}
