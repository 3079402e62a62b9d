// Command cdc is the change data capture demo (make run-cdc): a shop in
// Postgres whose every order is one transaction over three tables (the
// order, its lines, a stock move per line; some orders are cancelled
// again, their lines deleted and their stock returned), captured into
// Kafka by the PostgresCdcSource, and written into two other databases:
// one by the causal sink, which applies each source transaction whole;
// the other by one sink per topic without the gate, as Kafka Connect
// runs them. A reader checks the shop's invariants on each target every
// 10 ms while it runs:
//
//   - an order's total is the sum of its lines' quantities;
//   - no line is without its order;
//   - each item's stock on hand plus reserved is 1000;
//   - the stock reserved is the sum of the lines' quantities.
//
// It prints the torn reads seen on each side, then checks that both
// targets end as the source is. It needs Debian's postgresql package
// (make postgres) and starts everything else itself.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
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
	items        = 20
	sourceSchema = `
CREATE TABLE orders (id int PRIMARY KEY, total int NOT NULL);
CREATE TABLE lines (order_id int REFERENCES orders ON DELETE CASCADE, line_no int, item int NOT NULL, qty int NOT NULL, PRIMARY KEY (order_id, line_no));
CREATE TABLE stock (item int PRIMARY KEY, on_hand int NOT NULL, reserved int NOT NULL);
INSERT INTO stock SELECT i, 1000, 0 FROM generate_series(1, 20) i;`
	// The targets have no foreign key: a transaction's rows arrive in
	// any order within it.
	targetSchema = `
CREATE TABLE orders (id int PRIMARY KEY, total int NOT NULL);
CREATE TABLE lines (order_id int, line_no int, item int NOT NULL, qty int NOT NULL, PRIMARY KEY (order_id, line_no));
CREATE TABLE stock (item int PRIMARY KEY, on_hand int NOT NULL, reserved int NOT NULL);`
	// torn counts the invariants broken in one consistent read.
	torn = `SELECT
	(SELECT count(*) FROM orders o WHERE o.total <> coalesce((SELECT sum(qty) FROM lines l WHERE l.order_id = o.id), 0))
	+ (SELECT count(*) FROM lines l WHERE NOT EXISTS (SELECT 1 FROM orders o WHERE o.id = l.order_id))
	+ (SELECT count(*) FROM stock WHERE on_hand + reserved <> 1000)
	+ CASE WHEN (SELECT coalesce(sum(reserved), 0) FROM stock) <> (SELECT coalesce(sum(qty), 0) FROM lines) THEN 1 ELSE 0 END`
	// state sums up a database's shop, to compare the targets with the
	// source.
	state = `SELECT (SELECT count(*) FROM orders) || ' orders, ' || (SELECT count(*) FROM lines) || ' lines, '
	|| (SELECT coalesce(sum(total), 0) FROM orders) || ' ordered, ' || (SELECT sum(reserved) FROM stock) || ' reserved'`
)

var tables = []string{"orders", "lines", "stock"}

func main() {
	n := flag.Int("transactions", 10000, "source transactions: orders placed, and some cancelled")
	writers := flag.Int("writers", 4, "connections placing orders at once")
	client := flag.String("client", "", "Kafka client library: librdkafka or franz (default: the first built in)")
	flag.Parse()
	if err := run(*n, *writers, *client); err != nil {
		fmt.Fprintln(os.Stderr, "cdc:", err)
		os.Exit(1)
	}
}

// target is one database written from Kafka, and what its reader saw.
type target struct {
	name, url   string
	reads, torn int
}

func run(n, writers int, client string) error {
	ctx := context.Background()
	fmt.Println("starting Postgres (initdb in a temporary directory, wal_level=logical) and the embedded broker")
	pg, err := pgtest.Start(ctx, pgtest.Logical())
	if err != nil {
		return err
	}
	defer pg.Stop() //nolint:errcheck // the demo is over
	broker, err := embedded.Start()
	if err != nil {
		return err
	}
	defer broker.Close()
	src, err := pg.CreateDatabaseWith(ctx, "shop", sourceSchema)
	if err != nil {
		return err
	}
	gate := &target{name: "causal sink, whole transactions"}
	perTopic := &target{name: "a sink per topic, no gate"}
	if gate.url, err = pg.CreateDatabaseWith(ctx, "target_gate", targetSchema); err != nil {
		return err
	}
	if perTopic.url, err = pg.CreateDatabaseWith(ctx, "target_per_topic", targetSchema); err != nil {
		return err
	}
	log, _ := zap.NewProduction()
	w, err := connectworker.New(connectworker.Config{Bootstrap: broker.Addr(), Client: client, Listen: "127.0.0.1:0", WorkerID: "demo", Log: log.WithOptions(zap.IncreaseLevel(zap.WarnLevel)),
		Sinks:   map[string]connect.Sink{"PostgresSink": postgres.Sink{}},
		Sources: map[string]connect.Source{"PostgresCdcSource": pgcdc.Source{}}})
	if err != nil {
		return err
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()
	defer func() { stop(); <-done }()
	if err := connectors(w.Addr(), src, gate.url, perTopic.url); err != nil {
		return err
	}
	fmt.Printf("capturing database shop into Kafka; placing %d transactions from %d connections\n", n, writers)

	readers, readersDone := make(chan struct{}), make(chan error, 2)
	for _, t := range []*target{gate, perTopic} {
		go func() { readersDone <- t.watch(ctx, readers) }()
	}
	start := time.Now()
	if err := place(ctx, src, n, writers); err != nil {
		return err
	}
	placed := time.Since(start)
	want, err := stateOf(ctx, src)
	if err != nil {
		return err
	}
	fmt.Printf("placed in %s; the source holds %s\n", placed.Round(time.Millisecond), want)
	for _, t := range []*target{gate, perTopic} {
		if err := t.await(ctx, want); err != nil {
			close(readers)
			return err
		}
	}
	close(readers)
	for range 2 {
		if err := <-readersDone; err != nil {
			return err
		}
	}
	fmt.Printf("\n%-36s %10s %12s\n", "", "reads", "torn reads")
	for _, t := range []*target{gate, perTopic} {
		fmt.Printf("%-36s %10d %12d\n", t.name, t.reads, t.torn)
	}
	fmt.Printf("\nboth targets end as the source: %s\n", want)
	if gate.torn != 0 {
		return errors.New("the causal sink should show no torn read")
	}
	fmt.Println("the causal sink applied each source transaction whole; the sinks per topic showed readers transactions in part")
	return nil
}

// connectors makes, over the worker's REST API, the capture, the causal
// sink and a sink for each topic, each sink as Debezium's users write
// one: ExtractNewRecordState, and a RegexRouter to the table's name.
func connectors(addr, src, gate, perTopic string) error {
	jsonConv := "org.apache.kafka.connect.json.JsonConverter"
	if err := connectrest.Put(addr, "shop-cdc", map[string]string{"connector.class": connectworker.DebeziumPostgresClass, pgcdc.URL: src,
		pgcdc.TopicPrefix: "shop", pgcdc.SlotName: "shop", pgcdc.PollInterval: "20", "topic.creation.default.partitions": "2",
		"key.converter": jsonConv, "value.converter": jsonConv}); err != nil {
		return err
	}
	sink := func(url string, topics []string) map[string]string {
		return map[string]string{"connector.class": connectworker.JDBCSinkClass, "connection.url": url,
			"topics": strings.Join(topics, ","), "key.converter": jsonConv, "value.converter": jsonConv,
			"insert.mode": "upsert", "pk.mode": "record_key", "delete.enabled": "true",
			"transforms": "unwrap,route", "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState",
			"transforms.unwrap.delete.handling.mode": "none",
			"transforms.route.type":                  "org.apache.kafka.connect.transforms.RegexRouter",
			"transforms.route.regex":                 `[^.]+\.[^.]+\.([^.]+)`, "transforms.route.replacement": "$1"}
	}
	var all []string
	for _, t := range tables {
		all = append(all, "shop.public."+t)
	}
	whole := sink(gate, append(all, "shop.transaction"))
	whole["causal.transaction.topic"] = "shop.transaction"
	if err := connectrest.Put(addr, "target-gate", whole); err != nil {
		return err
	}
	for _, t := range all {
		cfg := sink(perTopic, []string{t})
		cfg["causal.gate"] = "false"
		if err := connectrest.Put(addr, "target-"+t, cfg); err != nil {
			return err
		}
	}
	return nil
}

// place runs n transactions from writers connections: mostly an order
// with one to three lines and their stock moves; one in ten cancels an
// order placed before, deleting it and returning its stock.
func place(ctx context.Context, url string, n, writers int) error {
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for wr := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := pgx.Connect(ctx, url)
			if err != nil {
				errs <- err
				return
			}
			defer conn.Close(ctx)
			rng := rand.New(rand.NewPCG(uint64(wr), 7))
			for i := wr; i < n; i += writers {
				var err error
				if i%10 == 9 {
					err = cancel(ctx, conn, i-9)
				} else {
					err = order(ctx, conn, i, rng)
				}
				if err != nil {
					errs <- fmt.Errorf("transaction %d: %w", i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// order places order id: its lines and their stock moves, in one
// transaction.
func order(ctx context.Context, conn *pgx.Conn, id int, rng *rand.Rand) error {
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		nLines, total := 1+rng.IntN(3), 0
		qty := make([]int, nLines)
		for l := range qty {
			qty[l] = 1 + rng.IntN(3)
			total += qty[l]
		}
		lineItems := make([]int, nLines)
		for l := range lineItems {
			lineItems[l] = 1 + (id*7+l*3)%items
		}
		if err := lockStock(ctx, tx, lineItems); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO orders VALUES ($1, $2)`, id, total); err != nil {
			return err
		}
		for l, q := range qty {
			item := lineItems[l]
			if _, err := tx.Exec(ctx, `INSERT INTO lines VALUES ($1, $2, $3, $4)`, id, l+1, item, q); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE stock SET on_hand = on_hand - $2, reserved = reserved + $2 WHERE item = $1`, item, q); err != nil {
				return err
			}
		}
		return nil
	})
}

// lockStock locks the stock rows of items in the order of their ids, so
// that the transactions of the connections placing orders at once wait
// for each other instead of deadlocking.
func lockStock(ctx context.Context, tx pgx.Tx, items []int) error {
	_, err := tx.Exec(ctx, `SELECT 1 FROM stock WHERE item = ANY($1) ORDER BY item FOR UPDATE`, items)
	return err
}

// cancel cancels order id, if it was placed: its stock back, its lines
// and itself deleted, in one transaction. The order is locked first: an
// order committed after the stock was returned would otherwise have its
// lines deleted with their stock still reserved.
func cancel(ctx context.Context, conn *pgx.Conn, id int) error {
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		var lineItems []int
		if err := tx.QueryRow(ctx, `SELECT coalesce(array_agg(l.item), '{}') FROM orders o LEFT JOIN lines l ON l.order_id = o.id
			WHERE o.id = $1 GROUP BY o.id`, id).Scan(&lineItems); errors.Is(err, pgx.ErrNoRows) {
			return nil // not placed (yet): nothing to cancel
		} else if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `SELECT 1 FROM orders WHERE id = $1 FOR UPDATE`, id); err != nil {
			return err
		}
		if err := lockStock(ctx, tx, lineItems); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE stock s SET on_hand = on_hand + l.qty, reserved = reserved - l.qty
			FROM (SELECT item, sum(qty) AS qty FROM lines WHERE order_id = $1 GROUP BY item) l WHERE s.item = l.item`, id); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM lines WHERE order_id = $1`, id); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DELETE FROM orders WHERE id = $1`, id)
		return err
	})
}

// watch reads the target's invariants every 10 ms until stop closes.
func (t *target) watch(ctx context.Context, stop <-chan struct{}) error {
	conn, err := pgx.Connect(ctx, t.url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	for {
		select {
		case <-stop:
			return nil
		case <-time.After(10 * time.Millisecond):
		}
		var broken int
		if err := conn.QueryRow(ctx, torn).Scan(&broken); err != nil {
			return fmt.Errorf("read %s: %w", t.name, err)
		}
		t.reads++
		if broken > 0 {
			t.torn++
		}
	}
}

// await waits until the target holds what the source does, saying
// every few seconds how far it is.
func (t *target) await(ctx context.Context, want string) error {
	start := time.Now()
	deadline, say := start.Add(5*time.Minute), start.Add(5*time.Second)
	for {
		got, err := stateOf(ctx, t.url)
		if err != nil {
			return err
		}
		if got == want {
			return nil
		}
		if now := time.Now(); now.After(deadline) {
			return fmt.Errorf("%s holds %s after 5 minutes; the source holds %s", t.name, got, want)
		} else if now.After(say) {
			fmt.Printf("  %s: %s so far\n", t.name, got)
			say = now.Add(5 * time.Second)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func stateOf(ctx context.Context, url string) (string, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	var s *string
	if err := conn.QueryRow(ctx, state).Scan(&s); err != nil {
		return "", err
	}
	if s == nil {
		return "an empty shop", nil
	}
	return *s, nil
}
