// Command sinkbench measures the Postgres sink: rows per second from Kafka
// into Postgres, side by side in one run, three ways in turn over the same
// records:
//
//   - copy: a hand-written loop on franz-go that reads the customers
//     topic to its end, then the orders, and writes each poll's records
//     with pgx's CopyFrom and the positions in one transaction;
//   - on: the sink worker with the causal gate, on each Kafka client;
//   - off: the sink worker with the gate off, on each Kafka client.
//
// The goals compare the sink on franz-go, the client the loop reads
// with; the librdkafka rows are printed beside them.
//
// Every run writes into a new database with the same tables. The tables
// have no foreign key here, so that the gate-off run writes every row too
// and the three write the same rows; the tests show what the gate does
// for a foreign key. `make bench` runs it.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/connect"
	"github.com/causeway-stream/causeway/connect/convert"
	"github.com/causeway-stream/causeway/connect/postgres"
	"github.com/causeway-stream/causeway/internal/pgtest"
	"github.com/causeway-stream/causeway/runtime/embedded"
	"github.com/causeway-stream/causeway/runtime/sinkworker"
)

const (
	partitions = 4
	customers  = 1000
	schema     = `CREATE TABLE customers (id text PRIMARY KEY, name text NOT NULL);
CREATE TABLE orders (id text PRIMARY KEY, customer text NOT NULL, amount int NOT NULL);`
)

func main() {
	orders := flag.Int("orders", 100000, "orders written (after 1,000 customers)")
	runs := flag.Int("runs", 3, "rounds of the three ways")
	out := flag.String("out", "bench-results", "directory for sink.md")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "sinkbench:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	if err := run(*orders, *runs, *out); err != nil {
		fmt.Fprintln(os.Stderr, "sinkbench:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

// bench is the database server, the broker and the records on it.
type bench struct {
	pg     *pgtest.Cluster
	broker *embedded.Broker
	total  int
	dbs    int
}

func run(orders, runs int, out string) error {
	ctx := context.Background()
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
	b := &bench{pg: pg, broker: broker, total: customers + orders}
	if err := b.produce(ctx, orders); err != nil {
		return err
	}
	fmt.Printf("%d customers and %d orders on %d partitions each, %d rounds of the seven ways\n", customers, orders, partitions, runs)
	ways := []struct {
		name string
		run  func(context.Context, string) error
	}{
		{"hand-written pgx CopyFrom loop", b.copyLoop},
		{"sink, gate on, franz-go", func(ctx context.Context, url string) error { return b.sink(ctx, url, "franz", false) }},
		{"sink, gate off, franz-go", func(ctx context.Context, url string) error { return b.sink(ctx, url, "franz", true) }},
		{"sink, gate on, librdkafka", func(ctx context.Context, url string) error { return b.sink(ctx, url, "librdkafka", false) }},
		{"sink, gate off, librdkafka", func(ctx context.Context, url string) error { return b.sink(ctx, url, "librdkafka", true) }},
		{"sink, gate on, franz-go, JSON envelope", func(ctx context.Context, url string) error { return b.sinkOf(ctx, url, "franz", false, true) }},
		{"hand-written pgx CopyFrom loop, JSON envelope", func(ctx context.Context, url string) error { return b.copyLoopOf(ctx, url, "env.") }},
	}
	names := make([]string, len(ways))
	for i, w := range ways {
		names[i] = w.name
	}
	rates := make([][]float64, len(ways))
	for round := range runs + 1 {
		for i, w := range ways {
			url, err := b.database(ctx)
			if err != nil {
				return err
			}
			start := time.Now()
			if err := w.run(ctx, url); err != nil {
				return fmt.Errorf("%s: %w", w.name, err)
			}
			rate := float64(b.total) / time.Since(start).Seconds()
			if round == 0 {
				fmt.Printf("  warm-up %-34s %9.0f rows/s (not counted)\n", w.name, rate)
				continue
			}
			rates[i] = append(rates[i], rate)
			fmt.Printf("  run %d   %-34s %9.0f rows/s\n", round, w.name, rate)
		}
	}
	return report(out, orders, runs, names, rates)
}

// produce writes the customers, then the orders, each order claiming its
// customer's record through that customer's session.
func (b *bench) produce(ctx context.Context, orders int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.broker.Addr()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return err
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopics(ctx, partitions, 1, nil, "customers", "orders", "env.customers", "env.orders"); err != nil {
		return err
	}
	if _, err := kadm.NewClient(cl).CreateTopics(ctx, 1, 1, nil, "dead"); err != nil {
		return err
	}
	for _, envelope := range []bool{false, true} {
		if err := produceTopics(ctx, cl, orders, envelope); err != nil {
			return err
		}
	}
	return nil
}

// The value schemas of the envelope topics, as Kafka Connect's
// JsonConverter writes them.
const (
	customerSchema = `{"type":"struct","fields":[{"field":"name","type":"string","optional":false}],"optional":false,"name":"customer"}`
	orderSchema    = `{"type":"struct","fields":[{"field":"customer","type":"string","optional":false},{"field":"amount","type":"int32","optional":false}],"optional":false,"name":"order"}`
)

// produceTopics writes the customers and orders, to customers and orders
// as plain JSON, or to env.customers and env.orders in the JsonConverter's
// schema envelope.
func produceTopics(ctx context.Context, cl *kgo.Client, orders int, envelope bool) error {
	prefix, wrap := "", func(_ string, v []byte) []byte { return v }
	if envelope {
		prefix = "env."
		wrap = func(schema string, v []byte) []byte {
			return append(append([]byte(`{"schema":`+schema+`,"payload":`), v...), '}')
		}
	}
	sessions := make([]causal.Session, customers)
	var recs []*kgo.Record
	for i := range customers {
		recs = append(recs, &kgo.Record{Topic: prefix + "customers", Partition: int32(i % partitions), Key: fmt.Appendf(nil, "c%04d", i),
			Value: wrap(customerSchema, fmt.Appendf(nil, `{"name": "customer %d"}`, i))})
	}
	res := cl.ProduceSync(ctx, recs...)
	if err := res.FirstErr(); err != nil {
		return err
	}
	for i, r := range res {
		sessions[i].Produced(causal.Channel{Topic: r.Record.Topic, Partition: r.Record.Partition}, r.Record.Offset)
	}
	for from := 0; from < orders; from += 10000 {
		recs = recs[:0]
		for j := from; j < min(from+10000, orders); j++ {
			c := j % customers
			recs = append(recs, &kgo.Record{Topic: prefix + "orders", Partition: int32(j % partitions), Key: fmt.Appendf(nil, "o%07d", j),
				Value:   wrap(orderSchema, fmt.Appendf(nil, `{"customer": "c%04d", "amount": %d}`, c, j%1000)),
				Headers: []kgo.RecordHeader{{Key: causal.HeaderKey, Value: sessions[c].AppendHeader(nil)}}})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			return err
		}
	}
	return nil
}

// database makes a new database with the tables and returns its URL.
func (b *bench) database(ctx context.Context) (string, error) {
	b.dbs++
	url, err := b.pg.CreateDatabase(ctx, fmt.Sprintf("run%d", b.dbs))
	if err != nil {
		return "", err
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, schema+`CREATE TABLE positions (topic text, partition int, next_offset bigint, PRIMARY KEY (topic, partition));
		CREATE SCHEMA env; SET search_path = env;`+schema+`RESET search_path;`)
	return url, err
}

// sink runs a sink worker over every channel until it has written every
// record.
func (b *bench) sink(ctx context.Context, url, client string, gateOff bool) error {
	return b.sinkOf(ctx, url, client, gateOff, false)
}

// sinkOf is sink, of the envelope topics when envelope is set: their
// values are read with Kafka Connect's JsonConverter (schemas.enable
// true), as the connect worker reads them by default.
func (b *bench) sinkOf(ctx context.Context, url, client string, gateOff, envelope bool) error {
	def := postgres.Sink{}
	cfg, err := def.Config().Parse(map[string]string{postgres.ConnectionURL: url, postgres.PKMode: "record_key"})
	if err != nil {
		return err
	}
	topics := []string{"customers", "orders"}
	var read func(connect.Record) (connect.Record, error)
	if envelope {
		topics = []string{"env.customers", "env.orders"}
		conv, err := convert.New(convert.JSON, nil)
		if err != nil {
			return err
		}
		read = func(r connect.Record) (connect.Record, error) {
			var err error
			if r.Value != nil {
				r.Value, r.ValueSchema, err = conv.Read(r.Topic, r.Value)
			}
			return r, err
		}
	}
	task, err := def.Open(ctx, "bench", topics, cfg)
	if err != nil {
		return err
	}
	var chs []causal.Channel
	for _, t := range topics {
		for p := range int32(partitions) {
			chs = append(chs, causal.Channel{Topic: t, Partition: p})
		}
	}
	w, err := sinkworker.New(sinkworker.Config{Connector: "bench", Topics: topics, Task: task, Bootstrap: b.broker.Addr(),
		Channels: chs, GateOff: gateOff, InstanceID: fmt.Sprint(b.dbs), Client: client, Convert: read})
	if err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()
	for w.Status().Written < b.total {
		select {
		case err := <-done:
			cancel()
			return fmt.Errorf("stopped after %d rows: %w", w.Status().Written, err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	cancel()
	return <-done
}

// copyLoop is the hand-written loop: each topic read to its end, each
// poll's records copied in with their positions, in one transaction.
func (b *bench) copyLoop(ctx context.Context, url string) error {
	return b.copyLoopOf(ctx, url, "")
}

// copyLoopOf is copyLoop over the topics (and into the tables) of prefix:
// "env." reads the envelope topics and takes each record's payload.
func (b *bench) copyLoopOf(ctx context.Context, url, prefix string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	for _, topic := range []string{prefix + "customers", prefix + "orders"} {
		if err := b.copyTopic(ctx, conn, topic); err != nil {
			return err
		}
	}
	return nil
}

func (b *bench) copyTopic(ctx context.Context, conn *pgx.Conn, topic string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.broker.Addr()), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return err
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		return err
	}
	left := int64(0)
	ends.Each(func(o kadm.ListedOffset) { left += o.Offset })
	cols := []string{"id", "name"}
	if strings.HasSuffix(topic, "orders") {
		cols = []string{"id", "customer", "amount"}
	}
	for left > 0 {
		fs := cl.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			return err
		}
		var rows [][]any
		next := map[int32]int64{}
		var decodeErr error
		fs.EachRecord(func(r *kgo.Record) {
			row, err := decode(topic, r)
			if err != nil {
				decodeErr = err
			}
			rows = append(rows, row)
			next[r.Partition] = r.Offset + 1
		})
		if decodeErr != nil {
			return decodeErr
		}
		if err := copyRows(ctx, conn, topic, cols, rows, next); err != nil {
			return err
		}
		left -= int64(len(rows))
	}
	return nil
}

// copyRows copies rows into topic's table and moves its positions, in one
// transaction.
func copyRows(ctx context.Context, conn *pgx.Conn, topic string, cols []string, rows [][]any, next map[int32]int64) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after a commit it does nothing
	if _, err := tx.CopyFrom(ctx, pgx.Identifier(strings.Split(topic, ".")), cols, pgx.CopyFromRows(rows)); err != nil {
		return err
	}
	for p, off := range next {
		if _, err := tx.Exec(ctx, `INSERT INTO positions VALUES ($1, $2, $3) ON CONFLICT (topic, partition) DO UPDATE SET next_offset = $3`, topic, p, off); err != nil {
			return err
		}
	}
	return tx.Commit(ctx)
}

// decode turns a record into its table's row.
func decode(topic string, r *kgo.Record) ([]any, error) {
	if strings.HasPrefix(topic, "env.") {
		var env struct{ Payload json.RawMessage }
		if err := json.Unmarshal(r.Value, &env); err != nil {
			return nil, err
		}
		r.Value = env.Payload
	}
	if strings.HasSuffix(topic, "customers") {
		var v struct{ Name string }
		err := json.Unmarshal(r.Value, &v)
		return []any{string(r.Key), v.Name}, err
	}
	var v struct {
		Customer string
		Amount   int32
	}
	err := json.Unmarshal(r.Value, &v)
	return []any{string(r.Key), v.Customer, v.Amount}, err
}

// report prints the medians and the ratios against the goals, and writes
// them to out/sink.md.
func report(out string, orders, runs int, names []string, rates [][]float64) error {
	med := func(xs []float64) float64 {
		s := slices.Clone(xs)
		slices.Sort(s)
		return s[len(s)/2]
	}
	ratio := func(a, b []float64) (float64, float64, float64) {
		var rs []float64
		for i := range a {
			rs = append(rs, a[i]/b[i])
		}
		return med(a) / med(b), slices.Min(rs), slices.Max(rs)
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "Rows per second from Kafka into Postgres: %d customers and %d orders, %d partitions each; medians of %d rounds.\n\n", customers, orders, partitions, runs)
	fmt.Fprintf(&sb, "| way | rows/s |\n|---|---:|\n")
	for i, n := range names {
		fmt.Fprintf(&sb, "| %s | %.0f |\n", n, med(rates[i]))
	}
	fmt.Fprintf(&sb, "\n| target | value | goal | | round range |\n|---|---:|---|---|---|\n")
	missed := false
	for _, t := range []struct {
		name string
		a, b int
		goal float64
	}{
		{"sink, gate on, franz-go / hand-written CopyFrom loop (franz-go)", 1, 0, 0.7},
		{"sink, gate on / gate off, franz-go", 1, 2, 0.9},
		{"sink, gate on, librdkafka / hand-written CopyFrom loop (franz-go)", 3, 0, 0},
		{"sink, gate on / gate off, librdkafka", 3, 4, 0.9},
		{"sink, gate on, franz-go / hand-written CopyFrom loop, both on JSON envelopes", 5, 6, 0.7},
	} {
		v, lo, hi := ratio(rates[t.a], rates[t.b])
		verdict := "met"
		switch {
		case t.goal == 0:
			verdict = "no goal"
		case v < t.goal:
			verdict, missed = "MISSED", true
		}
		goal := fmt.Sprintf(">= %.2f", t.goal)
		if t.goal == 0 {
			goal = ""
		}
		fmt.Fprintf(&sb, "| %s | %.2f | %s | %s | %.2f – %.2f |\n", t.name, v, goal, verdict, lo, hi)
	}
	fmt.Print("\n" + sb.String())
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "sink.md"), []byte(sb.String()), 0o644); err != nil {
		return err
	}
	if missed {
		return fmt.Errorf("a target was missed")
	}
	return nil
}
