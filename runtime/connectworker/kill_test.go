package connectworker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/causeway-stream/causeway/connect"
	"github.com/causeway-stream/causeway/connect/pgcdc"
	"github.com/causeway-stream/causeway/connect/postgres"
	"github.com/causeway-stream/causeway/runtime/connectworker"
	"github.com/causeway-stream/causeway/runtime/internal/transport"
)

// runWorkerProcess is the test binary run as a connect worker process
// (CAUSEWAY_CONNECT_WORKER set), until SIGTERM.
func runWorkerProcess() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	log, _ := zap.NewDevelopment()
	w, err := connectworker.New(connectworker.Config{Bootstrap: os.Getenv("CW_BOOTSTRAP"), Client: os.Getenv("CW_CLIENT"),
		Listen: os.Getenv("CW_LISTEN"), WorkerID: os.Getenv("CW_ID"), Heartbeat: 300 * time.Millisecond, Log: log.Named(os.Getenv("CW_ID")),
		Sinks: map[string]connect.Sink{"PostgresSink": postgres.Sink{}}, Sources: map[string]connect.Source{"PostgresSource": postgres.Source{}, "PostgresCdcSource": pgcdc.Source{}}})
	if err == nil {
		err = w.Run(ctx)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "connect worker:", err)
		return 1
	}
	return 0
}

// restAddr finds, in a worker's log, the address its REST listener took.
var restAddr = regexp.MustCompile(`connect worker started.*"rest": "([^"]+)"`)

// spawn starts a connect worker process; it is killed when the test ends.
// The worker binds a port of its own and the test reads it from its log:
// a port the test found free and closed could be taken by another process
// before the worker binds it (seen in make test, where the port went to
// another test's worker, which then answered for this one).
func (e *env) spawn(id string) (*worker, *exec.Cmd) {
	e.t.Helper()
	exe, err := os.Executable()
	require.NoError(e.t, err)
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), "CAUSEWAY_CONNECT_WORKER=1", "CW_BOOTSTRAP="+e.broker.Addr(), "CW_CLIENT="+e.client,
		"CW_LISTEN=127.0.0.1:0", "CW_ID="+id)
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(e.t, cmd.Start())
	e.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if e.t.Failed() {
			e.t.Logf("worker %s said:\n%s", id, out.String())
		}
	})
	w := &worker{}
	eventually(e.t, "worker "+id+" answering", func() bool {
		if w.base == "" {
			m := restAddr.FindStringSubmatch(out.String())
			if m == nil {
				return false
			}
			w.base = "http://" + m[1]
		}
		resp, err := http.Get(w.base + "/")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return w, cmd
}

// syncBuffer is a process's output, written by its pipes' goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b = append(s.b, p...)
	return len(p), nil
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return string(s.b)
}

// A Postgres source's worker process is killed with SIGKILL while rows
// keep coming, and another worker takes the task over: every row is in
// Kafka once. The offset goes in the same Kafka transaction as the rows,
// so the new task neither skips what the killed one read but did not
// commit, nor writes again what it did.
func TestAKilledSourceWorkerWritesEveryRowOnce(t *testing.T) {
	for _, client := range transport.Clients() {
		t.Run(client, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, client)
			src, conn := e.database("src", sourceSchema)
			insert := func(sql string, args ...any) error {
				_, err := conn.Exec(context.Background(), sql, args...)
				return err
			}
			const customers = 60
			inserted := make(chan struct{})
			go func() {
				defer close(inserted)
				for i := 1; i <= customers; i++ {
					if insert(`INSERT INTO customers (id, name) VALUES ($1, $2)`, i, strconv.Itoa(i)) != nil {
						return
					}
					for j := range 3 {
						if insert(`INSERT INTO orders (customer, amount) VALUES ($1, $2)`, i, j) != nil {
							return
						}
					}
					time.Sleep(30 * time.Millisecond)
				}
			}()
			w1, p1 := e.spawn("p1")
			code, body := w1.call(t, "POST", "/connectors", map[string]any{"name": "src", "config": map[string]string{
				"connector.class": "PostgresSource", "connection.url": src, "table.whitelist": "customers,orders",
				"topic.prefix": "src_", "poll.interval.ms": "50", "batch.max.rows": "7", "topic.creation.default.partitions": "2"}})
			require.Equal(t, 201, code, "%v", body)
			eventually(t, "some rows in Kafka", func() bool { return len(e.readIDs("src_orders")) >= 20 })
			require.NoError(t, p1.Process.Signal(syscall.SIGKILL))
			_ = p1.Wait()
			w2, _ := e.spawn("p2")
			<-inserted
			eventually(t, "every row in Kafka", func() bool {
				return len(e.readIDs("src_orders")) >= 3*customers && len(e.readIDs("src_customers")) >= customers
			})
			time.Sleep(500 * time.Millisecond) // a duplicate would come after
			assert.ElementsMatch(t, seq(1, 3*customers), e.readIDs("src_orders"), "every order once")
			assert.ElementsMatch(t, seq(1, customers), e.readIDs("src_customers"), "every customer once")
			code, body = w2.call(t, "GET", "/connectors/src/status", nil)
			assert.Equal(t, 200, code)
			assert.Equal(t, "p2", body.(map[string]any)["tasks"].([]any)[0].(map[string]any)["worker_id"])
		})
	}
}

// The change data capture source's worker process is killed with SIGKILL
// four times, the first while it reads and writes the snapshot (twenty
// thousand rows in one Kafka transaction), the others once the snapshot
// is in while orders come back to back; each time another worker takes
// the task over. Every change is in Kafka once: each row of the snapshot,
// each order, line and stock move after it.
func TestAKilledCaptureWorkerWritesEveryChangeOnce(t *testing.T) {
	for _, client := range transport.Clients() {
		t.Run(client, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, client)
			const snapshotOrders, orders = 20000, 600
			src, conn := e.database("cdc", cdcSchema+fmt.Sprintf(`INSERT INTO orders SELECT i, 3 FROM generate_series(100001, %d) i;`, 100000+snapshotOrders))
			db := src[strings.LastIndex(src, "/")+1 : strings.Index(src, "?")]
			w, p := e.spawn("p1")
			code, body := w.call(t, "POST", "/connectors", map[string]any{"name": "cdc", "config": map[string]string{
				"connector.class": "PostgresCdcSource", pgcdc.URL: src, pgcdc.TopicPrefix: "shop", pgcdc.SlotName: db,
				pgcdc.PollInterval: "50", pgcdc.MaxBatchSize: "100", pgcdc.SlotRetryDelay: "200", pgcdc.SlotMaxRetries: "100",
				"topic.creation.default.partitions": "2"}})
			require.Equal(t, 201, code, "%v", body)
			// The slot is made right before the snapshot is read: kill the
			// worker while it reads and writes it.
			eventually(t, "the slot made", func() bool {
				var n int
				return conn.QueryRow(context.Background(), "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1", db).Scan(&n) == nil && n == 1
			})
			topics := []string{"shop.public.orders", "shop.public.lines", "shop.public.stock"}
			// rows are the keys of the rows read by the snapshot or
			// created after it, by topic; moves the stock updates, by key
			// and log position; dups what came twice.
			type seen struct {
				rows    map[string]map[string]int
				moves   map[string]int
				created int // orders created after the snapshot
				dups    []string
			}
			read := func() seen {
				got := seen{rows: map[string]map[string]int{}, moves: map[string]int{}}
				for _, topic := range topics {
					got.rows[topic] = map[string]int{}
				}
				e.readAll(func(r *kgo.Record) {
					if r.Value == nil {
						return
					}
					var v struct {
						Op     string `json:"op"`
						Source struct {
							LSN int64 `json:"lsn"`
						} `json:"source"`
					}
					require.NoError(t, json.Unmarshal(r.Value, &v))
					switch v.Op {
					case "r", "c":
						if v.Op == "c" && r.Topic == "shop.public.orders" {
							got.created++
						}
						if got.rows[r.Topic][string(r.Key)]++; got.rows[r.Topic][string(r.Key)] > 1 {
							got.dups = append(got.dups, r.Topic+" "+string(r.Key))
						}
					case "u":
						id := fmt.Sprintf("%s@%d", r.Key, v.Source.LSN)
						if got.moves[id]++; got.moves[id] > 1 {
							got.dups = append(got.dups, "stock move "+id)
						}
					}
				}, topics...)
				return got
			}
			kill := func(next string) {
				require.NoError(t, p.Process.Signal(syscall.SIGKILL))
				_ = p.Wait()
				_, p = e.spawn(next)
			}
			kill("p2")
			eventually(t, "the snapshot in Kafka", func() bool { return len(read().rows["shop.public.orders"]) >= snapshotOrders })
			placed := make(chan struct{})
			go func() {
				defer close(placed)
				// Back to back: the worker is always writing some, so a kill
				// lands in an open Kafka transaction.
				placeOrders(t, conn, 1, orders+1)
			}()
			for i := 3; i <= 5; i++ {
				time.Sleep(time.Duration(100+50*i) * time.Millisecond)
				kill(fmt.Sprintf("p%d", i))
			}
			<-placed
			eventually(t, "every order's changes in Kafka", func() bool {
				got := read()
				return len(got.rows["shop.public.orders"]) >= snapshotOrders+orders && len(got.rows["shop.public.lines"]) >= 2*orders
			})
			time.Sleep(500 * time.Millisecond) // a duplicate would come after
			got := read()
			assert.Len(t, got.rows["shop.public.orders"], snapshotOrders+orders, "every order once: by the snapshot, or created after it")
			assert.Len(t, got.rows["shop.public.lines"], 2*orders)
			assert.Len(t, got.rows["shop.public.stock"], 5)
			assert.Equal(t, orders, got.created, "every order placed after the snapshot, as created")
			assert.Len(t, got.moves, 2*orders, "a stock move per line")
			assert.Empty(t, got.dups, "no change written twice")
		})
	}
}
