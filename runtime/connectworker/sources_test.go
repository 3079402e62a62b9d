package connectworker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap/zaptest"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/connect/postgres"
	"github.com/causeway-stream/causeway/runtime/connectworker"
	"github.com/causeway-stream/causeway/runtime/internal/transport/transporttest"
	"github.com/causeway-stream/causeway/runtime/sinkworker"
)

// A sink connector with tasks.max 2 on two workers runs a task on each,
// whichever worker it was made on; when one worker goes, the other takes
// everything over, and every record is written once.
func TestTasksAreDealtOverTheWorkers(t *testing.T) {
	for _, client := range transporttest.Kafkas() {
		t.Run(client, func(t *testing.T) {
			t.Parallel()
			e := envOn(t, client)
			e.topics(2, "customers", "orders")
			db, conn := e.database("sink", sinkSchema)
			w1, w2 := e.start("w1"), e.start("w2")
			code, body := w1.call(t, "POST", "/connectors", map[string]any{"name": "shop", "config": map[string]string{
				"connector.class": "PostgresSink", "value.converter.schemas.enable": "false", "topics": "customers,orders", "connection.url": db, "pk.mode": "record_key", "tasks.max": "2"}})
			require.Equal(t, 201, code, "%v", body)

			code, body = w2.call(t, "GET", "/connectors", nil)
			assert.Equal(t, 200, code)
			assert.Equal(t, []any{"shop"}, body, "a connector made on one worker is known to the other")
			tasks := func(w *worker) map[string]string {
				_, body := w.call(t, "GET", "/connectors/shop/status", nil)
				out := map[string]string{}
				for _, task := range body.(map[string]any)["tasks"].([]any) {
					m := task.(map[string]any)
					out[m["worker_id"].(string)] = m["state"].(string)
				}
				return out
			}
			eventually(t, "a task running on each worker", func() bool {
				return fmt.Sprint(tasks(w2)) == "map[w1:RUNNING w2:RUNNING]"
			})
			for i := range 20 {
				e.produce("customers", int32(i%2), fmt.Sprintf("c%02d", i), `{"name": "x"}`)
			}
			eventually(t, "20 customers", func() bool { return count(t, conn, "customers") == 20 })

			require.NoError(t, w1.stop())
			eventually(t, "one task, on w2", func() bool { return fmt.Sprint(tasks(w2)) == "map[w2:RUNNING]" })
			for i := 20; i < 40; i++ {
				e.produce("customers", int32(i%2), fmt.Sprintf("c%02d", i), `{"name": "x"}`)
			}
			eventually(t, "40 customers", func() bool { return count(t, conn, "customers") == 40 })
			assert.Equal(t, map[string]string{"w2": "RUNNING"}, tasks(w2), "no record written twice (insert mode would fail the task)")
		})
	}
}

// lagSink writes parents and children from Kafka into the database db
// with two sink workers on assigned channels: one reads every channel but
// parents/1 and starts at once, the other reads parents/1 and starts a
// second and a half later. It returns how many children the database
// refused (foreign keys broken) and how many it holds.
func (e *env) lagSink(db, parents, children string, nChildren int) (refused int) {
	conn, err := pgx.Connect(context.Background(), db)
	require.NoError(e.t, err)
	defer conn.Close(context.Background())
	e.t.Helper()
	start := func(chs []causal.Channel) (*sinkworker.Worker, func() error) {
		def := postgres.Sink{}
		cfg, err := def.Config().Parse(map[string]string{postgres.ConnectionURL: db, postgres.PKMode: "record_key"})
		require.NoError(e.t, err)
		task, err := def.Open(context.Background(), "lag", []string{parents, children}, cfg)
		require.NoError(e.t, err)
		e.topics(1, "dead")
		w, err := sinkworker.New(sinkworker.Config{Connector: "lag", Topics: []string{parents, children}, Task: task, Bootstrap: e.bootstrap,
			Client: e.client, Channels: chs, GateOff: e.gateOff, DeadLetterTopic: "dead", ToleranceAll: true, InstanceID: fmt.Sprint(chs), Log: zaptest.NewLogger(e.t)})
		require.NoError(e.t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		return w, func() error { cancel(); return <-done }
	}
	a, stopA := start([]causal.Channel{{Topic: parents}, {Topic: children}, {Topic: children, Partition: 1}})
	time.Sleep(1500 * time.Millisecond)
	_, stopB := start([]causal.Channel{{Topic: parents, Partition: 1}})
	eventually(e.t, "every child handled", func() bool { return count(e.t, conn, children)+a.Status().Rejected >= nChildren })
	require.NoError(e.t, stopA())
	require.NoError(e.t, stopB())
	return a.Status().Rejected
}

const sourceSchema = `
CREATE TABLE customers (id serial PRIMARY KEY, name text NOT NULL);
CREATE TABLE orders (id serial PRIMARY KEY, customer int NOT NULL REFERENCES customers(id), amount int NOT NULL);`

const copySchema = `
CREATE TABLE src_customers (id int PRIMARY KEY, name text NOT NULL);
CREATE TABLE src_orders (id int PRIMARY KEY, customer int NOT NULL REFERENCES src_customers(id), amount int NOT NULL);`

// readIDs reads a topic to its end, read committed, and returns the "id"
// field of every value.
func (e *env) readIDs(topic string) []int {
	e.t.Helper()
	var ids []int
	e.readAll(func(r *kgo.Record) {
		var v struct{ ID int }
		require.NoError(e.t, json.Unmarshal(r.Value, &v))
		ids = append(ids, v.ID)
	}, topic)
	return ids
}

// insertShop inserts customers and, after each, its orders, into the
// source database, from customer first on.
func insertShop(t *testing.T, exec func(string, ...any) error, first, customers, ordersEach int) {
	t.Helper()
	for i := first; i < first+customers; i++ {
		require.NoError(t, exec(`INSERT INTO customers (id, name) VALUES ($1, $2)`, i, fmt.Sprintf("customer %d", i)))
		for j := range ordersEach {
			require.NoError(t, exec(`INSERT INTO orders (customer, amount) VALUES ($1, $2)`, i, j))
		}
	}
}

// The query-based Postgres source writes each row once, across a restart
// of its worker, and stamps each with its session's clock: a sink whose
// parent partition lags writes no order before its customer. Without the
// gate (the negative control), orders of lagging customers break their
// foreign key.
func TestThePostgresSourceWritesRowsOnceAndInCausalOrder(t *testing.T) {
	for _, client := range transporttest.Kafkas() {
		t.Run(client, func(t *testing.T) {
			t.Parallel()
			e := envOn(t, client)
			src, conn := e.database("src", sourceSchema)
			exec := func(sql string, args ...any) error {
				_, err := conn.Exec(context.Background(), sql, args...)
				return err
			}
			insertShop(t, exec, 1, 10, 3)

			create := func(w *worker) {
				code, body := w.call(t, "PUT", "/connectors/shop-src/config", map[string]string{
					"connector.class": "PostgresSource", "connection.url": src, "table.whitelist": "customers,orders",
					"topic.prefix": "src_", "poll.interval.ms": "100", "topic.creation.default.partitions": "2",
					"transforms": "key,id", "transforms.key.type": "org.apache.kafka.connect.transforms.ValueToKey", "transforms.key.fields": "id",
					"transforms.id.type": "org.apache.kafka.connect.transforms.ExtractField$Key", "transforms.id.field": "id"})
				require.Contains(t, []int{200, 201}, code, "%v", body)
			}
			w1 := e.start("w1")
			create(w1)
			eventually(t, "40 rows in Kafka", func() bool { return len(e.readIDs("src_orders"))+len(e.readIDs("src_customers")) == 40 })
			require.NoError(t, w1.stop())

			insertShop(t, exec, 11, 10, 3)
			w2 := e.start("w2")
			eventually(t, "80 rows in Kafka", func() bool { return len(e.readIDs("src_orders"))+len(e.readIDs("src_customers")) == 80 })
			code, body := w2.call(t, "GET", "/connectors/shop-src/offsets", nil)
			assert.Equal(t, 200, code)
			assert.Equal(t, map[string]any{"offsets": []any{map[string]any{"partition": map[string]any{"connector": "shop-src"},
				"offset": map[string]any{"tables": map[string]any{"customers": 20.0, "orders": 60.0}}}}}, body,
				"the last ids read of each table")
			require.NoError(t, w2.stop())
			orders := e.readIDs("src_orders")
			assert.ElementsMatch(t, seq(1, 60), orders, "every order once")
			assert.ElementsMatch(t, seq(1, 20), e.readIDs("src_customers"), "every customer once")

			for _, gateOff := range []bool{false, true} {
				dst, dconn := e.database(fmt.Sprintf("dst_%v", gateOff), copySchema)
				refused := e.lagSinkGate(dst, "src_customers", "src_orders", 60, gateOff)
				if gateOff {
					assert.Positive(t, refused, "without the gate, orders of lagging customers break their foreign key")
					continue
				}
				assert.Zero(t, refused, "with the gate no order comes before its customer")
				assert.Equal(t, 60, count(t, dconn, "src_orders"))
			}
		})
	}
}

// lagSinkGate is lagSink with the gate on or off.
func (e *env) lagSinkGate(db, parents, children string, nChildren int, gateOff bool) int {
	e.t.Helper()
	e.gateOff = gateOff
	defer func() { e.gateOff = false }()
	return e.lagSink(db, parents, children, nChildren)
}

func seq(from, to int) []int {
	var out []int
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

// post posts records to the HTTP source web on w, with a session token
// (none when empty), and returns the answer's code and token.
func (w *worker) post(t *testing.T, topic, token string, key, value string) (int, string) {
	t.Helper()
	body := fmt.Sprintf(`{"records": [{"key": %s, "value": %s}]}`, key, value)
	req, err := http.NewRequest("POST", w.base+"/connectors/web/topics/"+topic, strings.NewReader(body))
	require.NoError(t, err)
	if token != "" {
		req.Header.Set(connectworker.SessionHeader, token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out struct {
		Session string `json:"session"`
		Offsets []struct {
			Partition int32  `json:"partition"`
			Offset    *int64 `json:"offset"`
		} `json:"offsets"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&out)
	if resp.StatusCode == 200 {
		assert.Len(t, out.Offsets, 1)
		assert.Equal(t, out.Session, resp.Header.Get(connectworker.SessionHeader))
	}
	return resp.StatusCode, out.Session
}

// A client of the HTTP source that sends each answer's session token
// with its next request has its order written after its customer by a
// sink whose customers lag. The negative control: the same posts without
// the token break foreign keys.
func TestHTTPSourceSessionsKeepAClientsWritesInOrder(t *testing.T) {
	for _, client := range transporttest.Kafkas() {
		for _, tokens := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/tokens %v", client, tokens), func(t *testing.T) {
				t.Parallel()
				e := envOn(t, client)
				w := e.start("w1")
				code, body := w.call(t, "POST", "/connectors", map[string]any{"name": "web", "config": map[string]string{
					"connector.class": "HttpSource", "http.topics": "customers,orders", "topic.creation.default.partitions": "2"}})
				require.Equal(t, 201, code, "%v", body)
				eventually(t, "the source ready", func() bool {
					code, _ := w.post(t, "customers", "", `"c00"`, `{"name": "zero"}`)
					return code == 200
				})
				code, _ = w.post(t, "customers", "not a token", `"x"`, `{}`)
				assert.Equal(t, 400, code, "a token that is not one is refused")
				code, _ = w.post(t, "elsewhere", "", `"x"`, `{}`)
				assert.Equal(t, 404, code, "a topic not in http.topics is refused")

				for i := 1; i < 20; i++ {
					c := fmt.Sprintf("c%02d", i)
					code, tok := w.post(t, "customers", "", fmt.Sprintf("%q", c), `{"name": "x"}`)
					require.Equal(t, 200, code)
					if !tokens {
						tok = ""
					}
					for j := range 3 {
						code, tok = w.post(t, "orders", tok, fmt.Sprintf(`"o%02d%d"`, i, j), fmt.Sprintf(`{"customer": %q, "amount": %d}`, c, j))
						require.Equal(t, 200, code)
						if !tokens {
							tok = ""
						}
					}
				}
				assert.Equal(t, "77", w.metrics(t)[`causeway_connect_source_records_total{connector="web"}`], "records the source wrote")
				require.NoError(t, w.stop())
				db, conn := e.database("dst", sinkSchema)
				refused := e.lagSink(db, "customers", "orders", 57)
				if !tokens {
					assert.Positive(t, refused, "orders posted without their customer's token break foreign keys")
					return
				}
				assert.Zero(t, refused)
				assert.Equal(t, 57, count(t, conn, "orders"))
			})
		}
	}
}
