// Command cdcbench measures the change data capture source, side by side
// in one run:
//
//   - capture rate: the same WAL (a shop's order transactions, written
//     before either starts) read by a plain pglogrepl loop that decodes
//     each message and counts the changes, and by the PostgresCdcSource on
//     a connect worker, which turns them into Debezium's events and
//     writes them to Kafka in transactions; each is timed until its slot
//     has confirmed the end of that WAL (the source confirms only what
//     Kafka has committed). The two take turns, each on a slot of its
//     own made before the workload.
//   - latency: orders placed at a steady rate while the capture and the
//     causal sink (whole transactions) run, from each order's insert in
//     the source to its row's insert in the target, p50 and p99.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"go.uber.org/zap"

	"github.com/causeway-stream/causeway/connect"
	"github.com/causeway-stream/causeway/connect/pgcdc"
	"github.com/causeway-stream/causeway/connect/postgres"
	"github.com/causeway-stream/causeway/internal/connectrest"
	"github.com/causeway-stream/causeway/internal/pgtest"
	"github.com/causeway-stream/causeway/runtime/connectworker"
	"github.com/causeway-stream/causeway/runtime/embedded"
)

const (
	sourceSchema = `
CREATE TABLE orders (id int PRIMARY KEY, total int NOT NULL, placed_at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE TABLE lines (order_id int, line_no int, item int NOT NULL, qty int NOT NULL, PRIMARY KEY (order_id, line_no));
CREATE TABLE stock (item int PRIMARY KEY, on_hand int NOT NULL, reserved int NOT NULL);
INSERT INTO stock SELECT i, 1000000, 0 FROM generate_series(1, 50) i;
CREATE PUBLICATION dbz_publication FOR ALL TABLES;`
	targetSchema = `
CREATE TABLE orders (id int PRIMARY KEY, total int NOT NULL, placed_at timestamptz NOT NULL, landed_at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE TABLE lines (order_id int, line_no int, item int NOT NULL, qty int NOT NULL, PRIMARY KEY (order_id, line_no));
CREATE TABLE stock (item int PRIMARY KEY, on_hand int NOT NULL, reserved int NOT NULL);`
	jsonConverter = "org.apache.kafka.connect.json.JsonConverter"
)

func main() {
	n := flag.Int("transactions", 20000, "order transactions in the WAL both read (five changes each)")
	runs := flag.Int("runs", 3, "rounds of the two ways")
	rate := flag.Int("rate", 200, "orders a second in the latency run")
	seconds := flag.Int("seconds", 10, "length of the latency run")
	client := flag.String("client", "franz", "Kafka client library of the worker: librdkafka or franz")
	out := flag.String("out", "", "a directory to write cdc.md into (none: standard output only)")
	flag.Func("kafka", "a client setting of the worker, key=value (repeatable)", func(kv string) error {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("%q is not key=value", kv)
		}
		kafkaSettings[k] = v
		return nil
	})
	flag.IntVar(&batchSize, "batch", batchSize, "the capture's max.batch.size (Debezium's default: 2048)")
	flag.StringVar(&bootstrap, "bootstrap", "", "bootstrap servers of the Kafka cluster the worker writes to (a broker of its own, such as go run ./cmd/broker, or a real cluster); none: an embedded broker in this process")
	profile := flag.String("cpuprofile", "", "write a CPU profile of the whole run (worker and broker are in this process) to this file")
	flag.Parse()
	if *profile != "" {
		f, err := os.Create(*profile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "cdcbench:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	if err := run(*n, *runs, *rate, *seconds, *client, *out); err != nil {
		fmt.Fprintln(os.Stderr, "cdcbench:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

// goal is the capture rate's least ratio to the plain loop's.
const goal = 0.70

func run(n, runs, rate, seconds int, client, out string) error {
	ctx := context.Background()
	pg, err := pgtest.Start(ctx, pgtest.Logical())
	if err != nil {
		return err
	}
	defer pg.Stop() //nolint:errcheck // the bench is over
	addr := bootstrap
	if addr == "" {
		broker, err := embedded.Start()
		if err != nil {
			return err
		}
		defer broker.Close()
		addr = broker.Addr()
	}
	w, stop, err := startWorker(addr, client)
	if err != nil {
		return err
	}
	defer stop()

	var plain, capture []float64
	events := 0
	for r := range runs {
		url, err := pg.CreateDatabaseWith(ctx, fmt.Sprintf("rate%d", r), sourceSchema)
		if err != nil {
			return err
		}
		for _, slot := range []string{"plain", "capture"} {
			if err := exec(ctx, url, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, fmt.Sprintf("%s%d", slot, r)); err != nil {
				return err
			}
		}
		end, err := workload(ctx, url, 0, n)
		if err != nil {
			return err
		}
		p, changes, err := plainLoop(ctx, url, fmt.Sprintf("plain%d", r), end)
		if err != nil {
			return err
		}
		c, err := captureRun(ctx, w.Addr(), url, fmt.Sprintf("capture%d", r), end)
		if err != nil {
			return err
		}
		events = changes
		for _, slot := range []string{"plain", "capture"} {
			if err := dropSlot(ctx, url, fmt.Sprintf("%s%d", slot, r)); err != nil {
				return err
			}
		}
		plain = append(plain, float64(changes)/p.Seconds())
		capture = append(capture, float64(changes)/c.Seconds())
		fmt.Printf("round %d: %d changes; plain loop %s (%.0f/s), capture %s (%.0f/s), ratio %.2f\n", r+1, changes,
			p.Round(time.Millisecond), plain[r], c.Round(time.Millisecond), capture[r], capture[r]/plain[r])
	}
	ratio := median(capture) / median(plain)
	report := fmt.Sprintf("| way | changes/s (median of %d rounds, %d changes each) |\n|---|---:|\n| plain pglogrepl loop | %.0f |\n| PostgresCdcSource to Kafka (%s) | %.0f |\n| ratio | %.2f (goal %.2f) |\n",
		runs, events, median(plain), client, median(capture), ratio, goal)
	fmt.Print("\n" + report)

	p50, p99, count, err := latencyRun(ctx, pg, w.Addr(), rate, seconds)
	if err != nil {
		return err
	}
	lat := fmt.Sprintf("\nLatency, %d orders at %d a second, from each order's insert in the source to its row's insert in the target (capture, Kafka, causal sink): p50 %s, p99 %s.\n", count, rate, p50, p99)
	fmt.Print(lat)
	if out != "" {
		if err := os.MkdirAll(out, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(out, "cdc.md"), []byte(report+lat), 0o644); err != nil {
			return err
		}
	}
	if ratio < goal {
		return fmt.Errorf("the capture made %.2f of the plain loop's rate, under the goal of %.2f", ratio, goal)
	}
	return nil
}

// kafkaSettings are the worker's client settings given with -kafka,
// batchSize the capture's max.batch.size (-batch), and bootstrap the
// cluster the worker writes to (-bootstrap; none: an embedded broker in
// this process).
var (
	kafkaSettings = map[string]string{}
	batchSize     = 2048
	bootstrap     string
)

// startWorker runs a connect worker with the capture and the sink.
func startWorker(bootstrap, client string) (*connectworker.Worker, func(), error) {
	log, _ := zap.NewProduction()
	w, err := connectworker.New(connectworker.Config{Bootstrap: bootstrap, Client: client, Listen: "127.0.0.1:0", WorkerID: "bench", Kafka: kafkaSettings,
		Log: log.WithOptions(zap.IncreaseLevel(zap.WarnLevel)), Sinks: map[string]connect.Sink{"PostgresSink": postgres.Sink{}},
		Sources: map[string]connect.Source{"PostgresCdcSource": pgcdc.Source{}}})
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	return w, func() { cancel(); <-done }, nil
}

// exec runs one statement in the database at url.
func exec(ctx context.Context, url, sql string, args ...any) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql, args...)
	return err
}

// workload places orders from..to-1, one transaction each (the order,
// two lines, two stock moves), and returns the WAL's end after them.
func workload(ctx context.Context, url string, from, to int) (pglogrepl.LSN, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	for id := from; id < to; id++ {
		if err := order(ctx, conn, id); err != nil {
			return 0, err
		}
	}
	var end pglogrepl.LSN
	err = conn.QueryRow(ctx, `SELECT pg_current_wal_lsn()`).Scan(&end)
	return end, err
}

func order(ctx context.Context, conn *pgx.Conn, id int) error {
	b := &pgx.Batch{}
	b.Queue(`BEGIN`)
	b.Queue(`INSERT INTO orders (id, total) VALUES ($1, 3)`, id)
	b.Queue(`INSERT INTO lines VALUES ($1, 1, $2, 1), ($1, 2, $3, 2)`, id, 1+id%50, 1+(id+7)%50)
	b.Queue(`UPDATE stock SET on_hand = on_hand - 1, reserved = reserved + 1 WHERE item = $1`, 1+id%50)
	b.Queue(`UPDATE stock SET on_hand = on_hand - 2, reserved = reserved + 2 WHERE item = $1`, 1+(id+7)%50)
	b.Queue(`COMMIT`)
	return conn.SendBatch(ctx, b).Close()
}

// plainLoop reads the slot with pglogrepl until it has decoded past end,
// counting the changes, confirming as it goes; it returns how long that
// took and the changes.
func plainLoop(ctx context.Context, url, slot string, end pglogrepl.LSN) (time.Duration, int, error) {
	cfg, err := pgconn.ParseConfig(url)
	if err != nil {
		return 0, 0, err
	}
	cfg.RuntimeParams["replication"] = "database"
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return 0, 0, err
	}
	defer conn.Close(ctx)
	start := time.Now()
	if err := pglogrepl.StartReplication(ctx, conn, slot, 0, pglogrepl.StartReplicationOptions{
		PluginArgs: []string{"proto_version '1'", "publication_names 'dbz_publication'"}}); err != nil {
		return 0, 0, err
	}
	changes, at := 0, pglogrepl.LSN(0)
	for at < end {
		msg, err := conn.ReceiveMessage(ctx)
		if err != nil {
			return 0, 0, err
		}
		cd, ok := msg.(*pgproto3.CopyData)
		if !ok || cd.Data[0] != pglogrepl.XLogDataByteID {
			continue
		}
		x, err := pglogrepl.ParseXLogData(cd.Data[1:])
		if err != nil {
			return 0, 0, err
		}
		m, err := pglogrepl.Parse(x.WALData)
		if err != nil {
			return 0, 0, err
		}
		switch m := m.(type) {
		case *pglogrepl.InsertMessage, *pglogrepl.UpdateMessage, *pglogrepl.DeleteMessage:
			changes++
		case *pglogrepl.CommitMessage:
			at = m.TransactionEndLSN
			if err := pglogrepl.SendStandbyStatusUpdate(ctx, conn, pglogrepl.StandbyStatusUpdate{WALWritePosition: at}); err != nil {
				return 0, 0, err
			}
		}
	}
	return time.Since(start), changes, nil
}

// captureRun makes a capture connector on slot and times it until the
// slot has confirmed end: the source confirms only what Kafka committed.
func captureRun(ctx context.Context, addr, url, slot string, end pglogrepl.LSN) (time.Duration, error) {
	start := time.Now()
	if err := connectrest.Put(addr, slot, map[string]string{"connector.class": "PostgresCdcSource", pgcdc.URL: url, pgcdc.TopicPrefix: slot,
		pgcdc.SlotName: slot, pgcdc.SnapshotMode: "never", pgcdc.PollInterval: "20", pgcdc.StatusInterval: "100", pgcdc.MaxBatchSize: strconv.Itoa(batchSize),
		"topic.creation.default.partitions": "2", "key.converter": jsonConverter, "value.converter": jsonConverter}); err != nil {
		return 0, err
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	for {
		var confirmed pglogrepl.LSN
		if err := conn.QueryRow(ctx, `SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&confirmed); err != nil {
			return 0, err
		}
		if confirmed >= end {
			break
		}
		if time.Since(start) > 10*time.Minute {
			return 0, errors.New("the capture did not confirm the workload's end in 10 minutes")
		}
		time.Sleep(5 * time.Millisecond)
	}
	took := time.Since(start)
	return took, connectrest.Delete(addr, slot)
}

// latencyRun places orders at rate for seconds while the capture and
// the causal sink run, and returns the p50 and p99 of each order's time
// from its insert in the source to its insert in the target.
func latencyRun(ctx context.Context, pg *pgtest.Cluster, addr string, rate, seconds int) (p50, p99 time.Duration, count int, err error) {
	src, err := pg.CreateDatabaseWith(ctx, "latency_src", sourceSchema)
	if err != nil {
		return 0, 0, 0, err
	}
	dst, err := pg.CreateDatabaseWith(ctx, "latency_dst", targetSchema)
	if err != nil {
		return 0, 0, 0, err
	}
	if err := connectrest.Put(addr, "lat", map[string]string{"connector.class": "PostgresCdcSource", pgcdc.URL: src, pgcdc.TopicPrefix: "lat",
		pgcdc.SlotName: "lat", pgcdc.PollInterval: "20", "topic.creation.default.partitions": "2",
		"key.converter": jsonConverter, "value.converter": jsonConverter}); err != nil {
		return 0, 0, 0, err
	}
	if err := connectrest.Put(addr, "lat-sink", map[string]string{"connector.class": "PostgresSink", "connection.url": dst,
		"topics": "lat.public.orders,lat.public.lines,lat.public.stock,lat.transaction", "causal.transaction.topic": "lat.transaction",
		"key.converter": jsonConverter, "value.converter": jsonConverter, "insert.mode": "upsert", "pk.mode": "record_key",
		"transforms": "unwrap,route", "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState",
		"transforms.route.type":  "org.apache.kafka.connect.transforms.RegexRouter",
		"transforms.route.regex": `[^.]+\.[^.]+\.([^.]+)`, "transforms.route.replacement": "$1"}); err != nil {
		return 0, 0, 0, err
	}
	conn, err := pgx.Connect(ctx, src)
	if err != nil {
		return 0, 0, 0, err
	}
	defer conn.Close(ctx)
	// A first order makes the topics the sink waits for; it is in the
	// target before the timed ones start.
	if err := order(ctx, conn, 0); err != nil {
		return 0, 0, 0, err
	}
	if err := waitRows(ctx, dst, "orders", 1); err != nil {
		return 0, 0, 0, err
	}
	total := rate * seconds
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	for id := 1; id <= total; id++ {
		<-tick.C
		if err := order(ctx, conn, id); err != nil {
			return 0, 0, 0, err
		}
	}
	if err := waitRows(ctx, dst, "orders", total+1); err != nil {
		return 0, 0, 0, err
	}
	tconn, err := pgx.Connect(ctx, dst)
	if err != nil {
		return 0, 0, 0, err
	}
	defer tconn.Close(ctx)
	rows, err := tconn.Query(ctx, `SELECT extract(epoch FROM landed_at - placed_at)::float8 FROM orders WHERE id > 0`)
	if err != nil {
		return 0, 0, 0, err
	}
	lat, err := pgx.CollectRows(rows, pgx.RowTo[float64])
	if err != nil {
		return 0, 0, 0, err
	}
	if len(lat) == 0 {
		return 0, 0, 0, fmt.Errorf("no order of the latency run landed in the target (-seconds %d)", seconds)
	}
	sort.Float64s(lat)
	at := func(q float64) time.Duration {
		return time.Duration(lat[int(q*float64(len(lat)-1))] * float64(time.Second)).Round(time.Millisecond)
	}
	return at(0.5), at(0.99), len(lat), nil
}

// dropSlot drops a slot once its reader has let it go (a connector just
// deleted may hold it a moment longer): Postgres has room for few.
func dropSlot(ctx context.Context, url, slot string) error {
	deadline := time.Now().Add(time.Minute)
	for {
		err := exec(ctx, url, `SELECT pg_drop_replication_slot($1)`, slot)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func waitRows(ctx context.Context, url, table string, want int) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	deadline := time.Now().Add(5 * time.Minute)
	for {
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&n); err != nil {
			return err
		}
		if n >= want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s has %d rows of %d after 5 minutes", table, n, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
