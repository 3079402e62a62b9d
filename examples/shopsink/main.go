// Command shopsink is the demo of the causal Postgres sink (make
// run-connect): a shop's orders, payments and shipments, one topic each,
// written into Postgres tables whose foreign keys tie a payment to its
// order and a shipment to its payment. The topics are keyed so that they
// are not co-partitioned (a shipment by its own id, referencing a
// payment), and the second partition of orders and payments is written by
// a worker that starts late, as a lagging partition would. It runs the
// sink with the gate and without, side by side, and prints for each the
// foreign keys broken, the rows written, the rows written twice, and the
// time to drain. It needs Debian's postgresql package (make postgres) and
// starts everything else itself.
package main

import (
	"context"
	"flag"
	"fmt"
	neturl "net/url"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/connect/postgres"
	"github.com/causeway-stream/causeway/internal/pgtest"
	"github.com/causeway-stream/causeway/runtime/embedded"
	"github.com/causeway-stream/causeway/runtime/sinkworker"
)

const schema = `
CREATE TABLE orders (id text PRIMARY KEY, customer text NOT NULL, total int NOT NULL);
CREATE TABLE payments (id text PRIMARY KEY, order_id text NOT NULL REFERENCES orders(id), amount int NOT NULL);
CREATE TABLE shipments (id text PRIMARY KEY, payment_id text NOT NULL REFERENCES payments(id), address text NOT NULL);`

var topics = []string{"orders", "payments", "shipments"}

const partitions = 2

func main() {
	n := flag.Int("orders", 300, "orders, each paid and shipped")
	lag := flag.Duration("lag", 2*time.Second, "how late the worker of the lagging partitions starts")
	client := flag.String("client", "", "Kafka client library: librdkafka or franz (default: the first built in)")
	flag.Parse()
	if err := run(*n, *lag, *client); err != nil {
		fmt.Fprintln(os.Stderr, "shopsink:", err)
		os.Exit(1)
	}
}

// result is what one run did.
type result struct {
	rows       map[string]int
	violations int // foreign keys broken (SQLSTATE 23503)
	duplicates int // rows refused for a key already written (SQLSTATE 23505)
	drain      time.Duration
}

func run(n int, lag time.Duration, client string) error {
	ctx := context.Background()
	fmt.Println("starting Postgres (initdb in a temporary directory) and the embedded broker")
	pg, err := pgtest.Start(ctx)
	if err != nil {
		return err
	}
	defer pg.Stop()
	broker, err := embedded.Start()
	if err != nil {
		return err
	}
	defer broker.Close()
	if err := produce(ctx, broker.Addr(), n); err != nil {
		return err
	}
	fmt.Printf("wrote %d orders, %d payments and %d shipments; orders/1 and payments/1 are written by a worker that starts %s late\n", n, n, n, lag)
	results := map[bool]result{}
	for _, gateOff := range []bool{false, true} {
		r, err := runSink(ctx, pg, broker, client, gateOff, lag, 3*n)
		if err != nil {
			return err
		}
		results[gateOff] = r
	}
	on, off := results[false], results[true]
	fmt.Printf("\n%-34s %12s %12s\n", "", "gate on", "gate off")
	fmt.Printf("%-34s %12d %12d\n", "foreign keys broken (refused)", on.violations, off.violations)
	for _, t := range topics {
		fmt.Printf("%-34s %12d %12d\n", "rows in "+t, on.rows[t], off.rows[t])
	}
	fmt.Printf("%-34s %12d %12d\n", "rows written twice (refused)", on.duplicates, off.duplicates)
	fmt.Printf("%-34s %12s %12s\n", "time to drain", on.drain.Round(time.Millisecond), off.drain.Round(time.Millisecond))
	if on.violations != 0 || on.duplicates != 0 || on.rows["shipments"] != n {
		return fmt.Errorf("with the gate, every row should be written once and no foreign key broken")
	}
	fmt.Println("\nwith the gate every row is written once and no foreign key breaks; without it, rows whose parent lags are refused")
	return nil
}

// produce writes the shop: per order, the order, then its payment
// (claiming the order), then its shipment (claiming the payment), each in
// the order's session. Orders are keyed by order id, payments by payment
// id and shipments by shipment id, on partitions of their own.
func produce(ctx context.Context, addr string, n int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return err
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopics(ctx, partitions, 1, nil, topics...); err != nil {
		return err
	}
	if _, err := kadm.NewClient(cl).CreateTopics(ctx, 1, 1, nil, "shop-dead-gate_on", "shop-dead-gate_off"); err != nil {
		return err
	}
	for i := range n {
		var s causal.Session
		for _, r := range []*kgo.Record{
			{Topic: "orders", Partition: int32(i % partitions), Key: fmt.Appendf(nil, "o%04d", i), Value: fmt.Appendf(nil, `{"customer": "c%02d", "total": %d}`, i%37, 10+i%90)},
			{Topic: "payments", Partition: int32(i / 3 % partitions), Key: fmt.Appendf(nil, "p%04d", i), Value: fmt.Appendf(nil, `{"order_id": "o%04d", "amount": %d}`, i, 10+i%90)},
			{Topic: "shipments", Partition: int32(i / 5 % partitions), Key: fmt.Appendf(nil, "s%04d", i), Value: fmt.Appendf(nil, `{"payment_id": "p%04d", "address": "%d Main St"}`, i, i)},
		} {
			r.Headers = []kgo.RecordHeader{{Key: causal.HeaderKey, Value: s.AppendHeader(nil)}}
			res := cl.ProduceSync(ctx, r)
			if err := res.FirstErr(); err != nil {
				return err
			}
			s.Produced(causal.Channel{Topic: r.Topic, Partition: r.Partition}, res[0].Record.Offset)
		}
	}
	return nil
}

// runSink writes the shop into a new database with two sink workers, the
// second one lag late, and returns what the database holds.
func runSink(ctx context.Context, pg *pgtest.Cluster, broker *embedded.Broker, client string, gateOff bool, lag time.Duration, total int) (result, error) {
	name := "gate_on"
	if gateOff {
		name = "gate_off"
	}
	url, err := pg.CreateDatabase(ctx, name)
	if err != nil {
		return result{}, err
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return result{}, err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, schema); err != nil {
		return result{}, err
	}
	lagging := []causal.Channel{{Topic: "orders", Partition: 1}, {Topic: "payments", Partition: 1}}
	var prompt []causal.Channel
	for _, t := range topics {
		for p := range int32(partitions) {
			if ch := (causal.Channel{Topic: t, Partition: p}); ch != lagging[0] && ch != lagging[1] {
				prompt = append(prompt, ch)
			}
		}
	}
	fmt.Printf("\n%s: writing into database %s\n", strings.ReplaceAll(name, "_", " "), name)
	start := time.Now()
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	a, doneA, err := startWorker(runCtx, url, broker.Addr(), client, name, "prompt", prompt, gateOff)
	if err != nil {
		return result{}, err
	}
	time.Sleep(lag) // the lagging partitions' worker starts late
	b, doneB, err := startWorker(runCtx, url, broker.Addr(), client, name, "lagging", lagging, gateOff)
	if err != nil {
		return result{}, err
	}
	for {
		sa, sb := a.Status(), b.Status()
		if sa.Written+sa.Rejected+sb.Written+sb.Rejected >= total {
			break
		}
		select {
		case err := <-doneA:
			return result{}, fmt.Errorf("worker of the prompt partitions: %w", err)
		case err := <-doneB:
			return result{}, fmt.Errorf("worker of the lagging partitions: %w", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	drain := time.Since(start)
	cancel()
	if err := <-doneA; err != nil {
		return result{}, err
	}
	if err := <-doneB; err != nil {
		return result{}, err
	}
	r := result{rows: map[string]int{}, drain: drain}
	for _, t := range topics {
		var c int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+t).Scan(&c); err != nil {
			return result{}, err
		}
		r.rows[t] = c
	}
	letters, err := deadLetters(ctx, broker.Addr(), name)
	if err != nil {
		return result{}, err
	}
	for _, l := range letters {
		switch {
		case strings.Contains(l, "SQLSTATE 23503"):
			r.violations++
		case strings.Contains(l, "SQLSTATE 23505"):
			r.duplicates++
		}
	}
	return r, nil
}

// jdbcSinkConfig is the sink's settings for the database at url, written
// as a configuration of Confluent's JDBC sink would give them: a JDBC URL
// and a user of its own setting.
func jdbcSinkConfig(url string) (map[string]string, error) {
	u, err := neturl.Parse(url)
	if err != nil {
		return nil, err
	}
	jdbc := "jdbc:postgresql://" + u.Host + u.Path
	if u.RawQuery != "" {
		jdbc += "?" + u.RawQuery
	}
	return map[string]string{
		"connection.url":    jdbc,
		"connection.user":   u.User.Username(),
		"insert.mode":       "insert",
		"pk.mode":           "record_key",
		"delete.enabled":    "false",
		"table.name.format": "${topic}",
		"auto.create":       "false",
		"batch.size":        "3000",
	}, nil
}

// startWorker runs a sink worker of chs until ctx is done.
func startWorker(ctx context.Context, url, addr, client, run, instance string, chs []causal.Channel, gateOff bool) (*sinkworker.Worker, <-chan error, error) {
	def := postgres.Sink{}
	settings, err := jdbcSinkConfig(url)
	if err != nil {
		return nil, nil, err
	}
	cfg, err := def.Config().Parse(settings)
	if err != nil {
		return nil, nil, err
	}
	task, err := def.Open(ctx, "shop", topics, cfg)
	if err != nil {
		return nil, nil, err
	}
	w, err := sinkworker.New(sinkworker.Config{Connector: "shop", Topics: topics, Task: task, Bootstrap: addr, Client: client,
		InstanceID: run + "-" + instance, Channels: chs, GateOff: gateOff, DeadLetterTopic: "shop-dead-" + run, ToleranceAll: true})
	if err != nil {
		return nil, nil, err
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	return w, done, nil
}

// deadLetters reads the reasons of the dead letters of one run, from its
// dead-letter topic.
func deadLetters(ctx context.Context, addr, run string) ([]string, error) {
	topic := "shop-dead-" + run
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.KeepControlRecords(),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	end, _ := ends.Lookup(topic, 0)
	var out []string
	for next := int64(0); next < end.Offset; {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		fs := cl.PollFetches(pctx)
		timedOut := pctx.Err() != nil
		cancel()
		if timedOut {
			return nil, fmt.Errorf("read the dead letters: timed out at offset %d of %d", next, end.Offset)
		}
		fs.EachRecord(func(r *kgo.Record) {
			next = r.Offset + 1
			if r.Attrs.IsControl() {
				return
			}
			var reason string
			for _, h := range r.Headers {
				if h.Key == sinkworker.HeaderMessage {
					reason = string(h.Value)
				}
			}
			out = append(out, reason)
		})
	}
	return out, nil
}
