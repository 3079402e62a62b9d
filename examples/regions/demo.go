package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap/zapcore"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/examples/internal/demoworker"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/serde"
	"github.com/causeway-stream/causeway/runtime"
	"github.com/causeway-stream/causeway/runtime/embedded"
)

// Regions the demo's customers live in.
var Regions = []string{"americas", "apac", "emea"}

// demoOptions configure one demo run.
type demoOptions struct {
	customers, orders, partitions int
	timeout                       time.Duration
	client                        string // the worker's Kafka client library
}

// shop is the state the demo writes: the customers and orders tables as
// they stand.
type shop struct {
	customers map[string]Customer
	orders    map[string]Order
}

// totals is what region-totals must end with for the shop: each region's
// sum of the amounts of its customers' orders (0 for a region whose
// customers placed none).
func (s shop) totals() map[string]int64 {
	out := map[string]int64{}
	for _, r := range Regions {
		out[r] = 0
	}
	for _, o := range s.orders {
		if c, ok := s.customers[o.Customer]; ok {
			out[c.Region] += o.Amount
		}
	}
	return out
}

// demoResult is what a run saw: the totals before and after the changes,
// as committed by the worker, and what the changes were.
type demoResult struct {
	Before, After         map[string]int64
	WantBefore, WantAfter map[string]int64
	Moved, Changed, Gone  int
	Elapsed               time.Duration
}

func demo(topo *framework.Topology, args []string) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	var o demoOptions
	fs.IntVar(&o.customers, "customers", 40, "how many customers")
	fs.IntVar(&o.orders, "orders", 400, "how many orders")
	fs.IntVar(&o.partitions, "partitions", 3, "partitions of the demo's topics")
	fs.DurationVar(&o.timeout, "timeout", 2*time.Minute, "give up after this long")
	fs.StringVar(&o.client, "client", runtime.DefaultConfig().Client, "the worker's Kafka client library: "+strings.Join(runtime.Clients(), " or "))
	if status, run := demoworker.ParseFlags(fs, args); !run {
		return status
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := runDemo(ctx, topo, o, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "\nregions demo:", err)
		return 1
	}
	printSummary(os.Stdout, res)
	if m := res.mismatch(); m != "" {
		fmt.Fprintln(os.Stderr, "totals do not match:", m)
		return 1
	}
	return 0
}

// initial is the shop the demo starts with: customers spread over the
// regions, orders of 1 to 100.00 spread over the customers.
func initial(o demoOptions) shop {
	s := shop{customers: map[string]Customer{}, orders: map[string]Order{}}
	for i := range o.customers {
		s.customers[fmt.Sprintf("c-%03d", i)] = Customer{Name: fmt.Sprintf("customer %d", i), Region: Regions[i%len(Regions)]}
	}
	for i := range o.orders {
		s.orders[fmt.Sprintf("o-%04d", i)] = Order{Customer: fmt.Sprintf("c-%03d", (i*7)%o.customers), Amount: int64(100 + (i*7919)%9900)}
	}
	return s
}

// changes is what the demo does to the shop once the first totals are
// in: every fourth customer moves to the next region, every seventh order
// changes its amount, every eleventh is deleted. It returns the records
// that do it and the shop after.
func changes(s shop) (customers, orders []demoworker.Keyed, after shop, res demoResult) {
	after = shop{customers: maps.Clone(s.customers), orders: maps.Clone(s.orders)}
	for i, id := range slices.Sorted(maps.Keys(s.customers)) {
		if i%4 != 0 {
			continue
		}
		c := after.customers[id]
		c.Region = Regions[(slices.Index(Regions, c.Region)+1)%len(Regions)]
		after.customers[id] = c
		b, _ := json.Marshal(c)
		customers = append(customers, demoworker.Keyed{Key: id, Value: b})
		res.Moved++
	}
	for i, id := range slices.Sorted(maps.Keys(s.orders)) {
		switch {
		case i%11 == 0:
			delete(after.orders, id)
			orders = append(orders, demoworker.Keyed{Key: id})
			res.Gone++
		case i%7 == 0:
			o := after.orders[id]
			o.Amount += 50
			after.orders[id] = o
			b, _ := json.Marshal(o)
			orders = append(orders, demoworker.Keyed{Key: id, Value: b})
			res.Changed++
		}
	}
	return customers, orders, after, res
}

// rows is a table's rows as records, in key order.
func rows[V any](m map[string]V) []demoworker.Keyed {
	out := make([]demoworker.Keyed, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		b, _ := json.Marshal(m[k])
		out = append(out, demoworker.Keyed{Key: k, Value: b})
	}
	return out
}

// runDemo starts the embedded broker and a worker, writes the customers
// and then the orders in one causal session, waits for the totals, then
// writes the changes and waits for the totals again.
func runDemo(ctx context.Context, topo *framework.Topology, o demoOptions, out io.Writer) (demoResult, error) {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	before := initial(o)
	moveCustomers, changeOrders, after, res := changes(before)
	res.WantBefore, res.WantAfter = before.totals(), after.totals()
	fmt.Fprintf(out, "Starting the embedded broker; writing %d customers in %d regions and %d orders...\n", len(before.customers), len(Regions), len(before.orders))
	b, err := embedded.Start()
	if err != nil {
		return res, err
	}
	defer b.Close()
	began := time.Now()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.ProducerLinger(2*time.Millisecond),
		kgo.ConsumeTopics(TotalsTopic), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return res, err
	}
	defer cl.Close()
	for _, topic := range []string{CustomersTopic, OrdersTopic, TotalsTopic} {
		if _, err := kadm.NewClient(cl).CreateTopic(ctx, int32(o.partitions), -1, nil, topic); err != nil {
			return res, fmt.Errorf("create topic %s: %w", topic, err)
		}
	}
	stop, err := demoworker.Start(ctx, topo, demoworker.Options{ApplicationID: "regions-demo", BootstrapServers: b.Addr(),
		Client: o.client, Partitions: o.partitions, LogLevel: zapcore.ErrorLevel})
	if err != nil {
		return res, err
	}
	err = func() error {
		var session causal.Session
		if err := demoworker.WriteAfter(ctx, cl, &session, CustomersTopic, rows(before.customers)); err != nil {
			return err
		}
		if err := demoworker.WriteAfter(ctx, cl, &session, OrdersTopic, rows(before.orders)); err != nil {
			return err
		}
		seen := map[string]int64{}
		if res.Before, err = awaitTotals(ctx, cl, seen, res.WantBefore); err != nil {
			return fmt.Errorf("before the changes: %w", err)
		}
		fmt.Fprintf(out, "Totals are in. Moving %d customers to the next region, changing %d orders, deleting %d...\n", res.Moved, res.Changed, res.Gone)
		if err := demoworker.WriteAfter(ctx, cl, &session, CustomersTopic, moveCustomers); err != nil {
			return err
		}
		if err := demoworker.WriteAfter(ctx, cl, &session, OrdersTopic, changeOrders); err != nil {
			return err
		}
		if res.After, err = awaitTotals(ctx, cl, seen, res.WantAfter); err != nil {
			return fmt.Errorf("after the changes: %w", err)
		}
		return nil
	}()
	res.Elapsed = time.Since(began)
	return res, errors.Join(err, stop())
}

// awaitTotals reads region-totals, committed records only, into seen (the
// latest total of each region) until it equals want, and returns a copy.
func awaitTotals(ctx context.Context, cl *kgo.Client, seen, want map[string]int64) (map[string]int64, error) {
	for !equalTotals(seen, want) {
		if ctx.Err() != nil {
			return maps.Clone(seen), fmt.Errorf("totals %v, want %v: %w", seen, want, ctx.Err())
		}
		err := demoworker.PollOnce(ctx, cl, func(r *kgo.Record) error {
			n, err := serde.Int64().Deserialize(r.Value)
			if err != nil {
				return fmt.Errorf("total at %s/%d@%d: %w", r.Topic, r.Partition, r.Offset, err)
			}
			seen[string(r.Key)] = n
			return nil
		})
		if err != nil {
			return maps.Clone(seen), err
		}
	}
	return maps.Clone(seen), nil
}

// equalTotals compares totals, a region missing from one counting as 0.
func equalTotals(a, b map[string]int64) bool {
	for r, n := range a {
		if b[r] != n {
			return false
		}
	}
	for r, n := range b {
		if a[r] != n {
			return false
		}
	}
	return true
}

func printSummary(out io.Writer, res demoResult) {
	fmt.Fprintf(out, "\n%-10s %14s %14s\n", "region", "total before", "total after")
	for _, r := range Regions {
		fmt.Fprintf(out, "%-10s %14.2f %14.2f\n", r, float64(res.Before[r])/100, float64(res.After[r])/100)
	}
	verdict := "every region's total matches the total computed from the rows written, before and after the changes"
	if m := res.mismatch(); m != "" {
		verdict = "MISMATCH: " + m
	}
	fmt.Fprintf(out, "\n%d customers moved region, %d orders changed, %d deleted, in %.1fs.\n%s.\n",
		res.Moved, res.Changed, res.Gone, res.Elapsed.Seconds(), verdict)
}

// mismatch describes the first difference between the committed totals
// and the ones computed here, or returns "".
func (r demoResult) mismatch() string {
	for _, stage := range []struct {
		name      string
		got, want map[string]int64
	}{{"before the changes", r.Before, r.WantBefore}, {"after the changes", r.After, r.WantAfter}} {
		for _, region := range Regions {
			if stage.got[region] != stage.want[region] {
				return fmt.Sprintf("%s, %s totals %d, want %d", stage.name, region, stage.got[region], stage.want[region])
			}
		}
	}
	return ""
}
