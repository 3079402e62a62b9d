package connectworker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap/zaptest"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/connect"
	"github.com/causeway-stream/causeway/connect/postgres"
	"github.com/causeway-stream/causeway/internal/pgtest"
	"github.com/causeway-stream/causeway/runtime/connectworker"
	"github.com/causeway-stream/causeway/runtime/embedded"
	"github.com/causeway-stream/causeway/runtime/internal/transport"
	"github.com/causeway-stream/causeway/runtime/internal/transport/transporttest"
	"github.com/causeway-stream/causeway/runtime/sinkworker"
)

// pg is the Postgres server the tests share; each test has databases of
// its own.
var pg *pgtest.Cluster

func TestMain(m *testing.M) {
	if os.Getenv("CAUSEWAY_CONNECT_WORKER") != "" {
		os.Exit(runWorkerProcess())
	}
	os.Exit(pgtest.Main(m, &pg, pgtest.Logical()))
}

// env is a test's Kafka and databases. Its Kafka is the in-process one
// (transporttest), on which the workers run in the test's process in
// milliseconds, or the embedded broker, which worker processes reach
// over TCP.
type env struct {
	t         *testing.T
	client    string
	bootstrap string
	// fake is the in-process Kafka; broker and cl are set instead for the
	// embedded broker.
	fake   *transporttest.Cluster
	broker *embedded.Broker
	cl     *kgo.Client
	// gateOff turns the gate of lagSink's workers off.
	gateOff bool
}

// envOn is an env on the in-process Kafka, or on the embedded broker
// with workers on client.
func envOn(t *testing.T, client string) *env {
	t.Helper()
	if client == transporttest.InProcess {
		return newFakeEnv(t)
	}
	return newEnv(t, client)
}

// newEnv is an env on the embedded broker, its workers on client.
func newEnv(t *testing.T, client string) *env {
	t.Helper()
	b, err := embedded.Start()
	require.NoError(t, err)
	t.Cleanup(b.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return &env{t: t, client: client, bootstrap: b.Addr(), broker: b, cl: cl}
}

// newFakeEnv is an env on the in-process Kafka.
func newFakeEnv(t *testing.T) *env {
	t.Helper()
	f := transporttest.New(t)
	return &env{t: t, client: f.Client(), bootstrap: f.Bootstrap(), fake: f}
}

// clusterID is the Kafka cluster's id, asked of it apart from the worker.
func (e *env) clusterID() string {
	e.t.Helper()
	if e.fake != nil {
		return e.fake.ID()
	}
	md, err := kadm.NewClient(e.cl).BrokerMetadata(context.Background())
	require.NoError(e.t, err)
	require.NotEmpty(e.t, md.Cluster, "the embedded broker says its cluster's id")
	return md.Cluster
}

// database makes a database of the test's with schema in it, and returns
// its URL and a connection to it.
func (e *env) database(suffix, schema string) (string, *pgx.Conn) {
	e.t.Helper()
	ctx := context.Background()
	h := fnv.New32a()
	h.Write([]byte(e.t.Name())) //nolint:errcheck // a hash does not fail
	name := fmt.Sprintf("t%08x_%s", h.Sum32(), suffix)
	url, err := pg.CreateDatabase(ctx, name)
	require.NoError(e.t, err)
	conn, err := pgx.Connect(ctx, url)
	require.NoError(e.t, err)
	e.t.Cleanup(func() { conn.Close(context.Background()) })
	_, err = conn.Exec(ctx, schema)
	require.NoError(e.t, err)
	return url, conn
}

func (e *env) topics(partitions int32, names ...string) {
	e.t.Helper()
	if e.fake != nil {
		for _, n := range names {
			require.NoError(e.t, e.fake.CreateTopic(n, partitions, nil))
		}
		return
	}
	_, err := kadm.NewClient(e.cl).CreateTopics(context.Background(), partitions, 1, nil, names...)
	require.NoError(e.t, err)
}

// worker is a running connect worker.
type worker struct {
	w    *connectworker.Worker
	base string
	stop func() error
}

// start runs a connect worker until the test ends or stop is called.
func (e *env) start(id string) *worker {
	e.t.Helper()
	return e.startWith(id, nil)
}

// startWith is start, with the worker's configuration changed by mutate.
func (e *env) startWith(id string, mutate func(*connectworker.Config)) *worker {
	e.t.Helper()
	cfg := connectworker.Config{Bootstrap: e.bootstrap, Client: e.client, Listen: "127.0.0.1:0", WorkerID: id,
		Sinks: map[string]connect.Sink{"PostgresSink": postgres.Sink{}}, Sources: map[string]connect.Source{"PostgresSource": postgres.Source{}},
		Heartbeat: 300 * time.Millisecond, Log: zaptest.NewLogger(e.t).Named(id)}
	if mutate != nil {
		mutate(&cfg)
	}
	w, err := connectworker.New(cfg)
	require.NoError(e.t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var runErr error
	go func() {
		defer close(done)
		runErr = w.Run(ctx)
	}()
	var once sync.Once
	stop := func() error {
		once.Do(func() {
			cancel()
			<-done
		})
		return runErr
	}
	e.t.Cleanup(func() { _ = stop() })
	return &worker{w: w, base: "http://" + w.Addr(), stop: stop}
}

// call sends a request to the worker's REST API, and returns the answer's
// code and its body decoded (nil when empty).
func (w *worker) call(t *testing.T, method, path string, body any) (int, any) {
	t.Helper()
	var raw []byte
	if body != nil {
		var err error
		raw, err = json.Marshal(body)
		require.NoError(t, err)
	}
	code, b := w.raw(t, method, path, raw)
	var out any
	if len(bytes.TrimSpace([]byte(b))) > 0 {
		require.NoError(t, json.Unmarshal([]byte(b), &out), "body of %s %s: %s", method, path, b)
	}
	return code, out
}

// raw sends body as it is (nil: none) and returns the answer's code and
// body as they are.
func (w *worker) raw(t *testing.T, method, path string, body []byte) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, w.base+path, rd)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// metrics reads the worker's /metrics: each series' value by its name and
// labels.
func (w *worker) metrics(t *testing.T) map[string]string {
	t.Helper()
	resp, err := http.Get(w.base + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	out := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if i := strings.LastIndexByte(line, ' '); i > 0 && !strings.HasPrefix(line, "#") {
			out[line[:i]] = line[i+1:]
		}
	}
	return out
}

// readAll reads topics to their end, read committed (three quiet polls
// in a row), handing each record to each.
func (e *env) readAll(each func(*kgo.Record), topics ...string) {
	e.t.Helper()
	if e.fake != nil {
		counts := e.fake.Partitions()
		for _, topic := range topics {
			for p := range counts[topic] {
				for _, m := range e.fake.Records(causal.Channel{Topic: topic, Partition: p}) {
					r := &kgo.Record{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset, Key: m.Key, Value: m.Value, Timestamp: m.Timestamp}
					for _, h := range m.Headers {
						r.Headers = append(r.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
					}
					each(r)
				}
			}
		}
		return
	}
	// To the last stable offsets (what read committed can see now), not
	// until a few polls come back empty: a loaded machine may take longer
	// than those polls to fetch anything at all.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(e.cl).ListCommittedOffsets(ctx, topics...)
	require.NoError(e.t, err)
	from, left := map[string]map[int32]kgo.Offset{}, map[causal.Channel]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			if from[o.Topic] == nil {
				from[o.Topic] = map[int32]kgo.Offset{}
			}
			from[o.Topic][o.Partition] = kgo.NewOffset().AtStart()
			left[causal.Channel{Topic: o.Topic, Partition: o.Partition}] = o.Offset
		}
	})
	if len(left) == 0 {
		return
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.broker.Addr()), kgo.ConsumePartitions(from), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords())
	require.NoError(e.t, err)
	defer cl.Close()
	for len(left) > 0 {
		fs := cl.PollFetches(ctx)
		require.NoError(e.t, ctx.Err(), "reading %v to their ends: %v left", topics, left)
		fs.EachRecord(func(r *kgo.Record) {
			ch := causal.Channel{Topic: r.Topic, Partition: r.Partition}
			end, ok := left[ch]
			if !ok || r.Offset >= end {
				return
			}
			if r.Offset+1 >= end {
				delete(left, ch)
			}
			if !r.Attrs.IsControl() {
				each(r)
			}
		})
	}
}

// deadLetters reads a dead-letter topic to its end: each letter's key
// and reason.
func (e *env) deadLetters(topic string) []string {
	e.t.Helper()
	var out []string
	e.readAll(func(r *kgo.Record) {
		for _, h := range r.Headers {
			if h.Key == sinkworker.HeaderMessage {
				out = append(out, string(r.Key)+": "+string(h.Value))
			}
		}
	}, topic)
	return out
}

// members counts the members of a consumer group.
func (e *env) members(group string) int {
	if e.fake != nil {
		return e.fake.Members(group)
	}
	groups, err := kadm.NewClient(e.cl).DescribeGroups(context.Background(), group)
	if err != nil {
		return -1
	}
	return len(groups[group].Members)
}

// eventually waits up to a minute for cond.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

func count(t *testing.T, conn *pgx.Conn, table string) int {
	t.Helper()
	var n int
	require.NoError(t, conn.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n))
	return n
}

// Kafka Connect's REST entities, by the JSON names of their fields
// (org.apache.kafka.connect.runtime.rest.entities). A body the worker
// answers must have these names and no others; trace (a failed state's)
// is left out when empty, as Connect leaves it out.
var connectShapes = map[string][]string{
	"ErrorMessage":       {"error_code", "message"},
	"ConnectorInfo":      {"config", "name", "tasks", "type"},
	"ConnectorTaskId":    {"connector", "task"},
	"ConnectorStateInfo": {"connector", "name", "tasks", "type"},
	"ConnectorState":     {"state", "worker_id"},
	"TaskState":          {"id", "state", "worker_id"},
	"ConfigInfos":        {"configs", "error_count", "groups", "name"},
	"ConfigInfo":         {"definition", "value"},
	"ConfigKeyInfo":      {"default_value", "dependents", "display_name", "documentation", "group", "importance", "name", "order", "required", "type", "width"},
	"ConfigValueInfo":    {"errors", "name", "recommended_values", "value", "visible"},
	"PluginInfo":         {"class", "type", "version"},
	"TaskInfo":           {"config", "id"},
	"ServerInfo":         {"commit", "kafka_cluster_id", "version"},
	"ConnectorOffsets":   {"offsets"},
	"ConnectorOffset":    {"offset", "partition"},
	"WorkerHealth":       {"message", "status"},
	"Message":            {"message"},
}

// shaped checks that v is an object with the fields of Connect's entity
// (plus those optional names, when present), and returns it.
func shaped(t *testing.T, entity string, v any, optional ...string) map[string]any {
	t.Helper()
	m, ok := v.(map[string]any)
	require.True(t, ok, "%s: %v is not an object", entity, v)
	keys := slices.Sorted(maps.Keys(m))
	keys = slices.DeleteFunc(keys, func(k string) bool { return slices.Contains(optional, k) })
	assert.Equal(t, connectShapes[entity], keys, "%s's fields", entity)
	return m
}

// A negative control for shaped: a body with a field of another name
// fails it.
func TestShapedCatchesAFieldConnectDoesNotHave(t *testing.T) {
	inner := &testing.T{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		shaped(inner, "ErrorMessage", map[string]any{"code": 404, "message": "x"})
	}()
	<-done
	assert.True(t, inner.Failed(), "errorCode instead of error_code must fail")
}

const sinkSchema = `
CREATE TABLE customers (id text PRIMARY KEY, name text NOT NULL);
CREATE TABLE orders (id text PRIMARY KEY, customer text NOT NULL REFERENCES customers(id), amount int NOT NULL CHECK (amount >= 0));`

// produce writes one record.
func (e *env) produce(topic string, partition int32, key, value string) {
	e.t.Helper()
	if e.fake != nil {
		_, err := e.fake.Produce(transport.Message{Topic: topic, Partition: partition, Key: []byte(key), Value: []byte(value), Timestamp: time.Now()})
		require.NoError(e.t, err)
		return
	}
	res := e.cl.ProduceSync(context.Background(), &kgo.Record{Topic: topic, Partition: partition, Key: []byte(key), Value: []byte(value)})
	require.NoError(e.t, res.FirstErr())
}

// Every endpoint the connectors issue names, on a real worker writing a
// real Postgres: the shapes of the bodies are Kafka Connect's, the codes
// its own, and pause, resume, restart and delete do what they say.
func TestTheRESTAPIManagesAConnectorAsKafkaConnectDoes(t *testing.T) {
	for _, client := range transporttest.Kafkas() {
		t.Run(client, func(t *testing.T) {
			t.Parallel()
			e := envOn(t, client)
			e.topics(1, "customers", "orders", "dead")
			db, conn := e.database("sink", sinkSchema)
			w := e.start("w1")

			code, body := w.call(t, "GET", "/", nil)
			assert.Equal(t, 200, code)
			server := shaped(t, "ServerInfo", body)
			assert.Equal(t, e.clusterID(), server["kafka_cluster_id"], "the cluster's id, as the cluster says it")
			assert.NotEmpty(t, server["version"])

			code, body = w.call(t, "GET", "/connector-plugins", nil)
			require.Equal(t, 200, code)
			var classes []string
			for _, p := range body.([]any) {
				m := shaped(t, "PluginInfo", p)
				classes = append(classes, m["class"].(string)+"/"+m["type"].(string))
			}
			assert.Equal(t, []string{"HttpSource/source", "PostgresSink/sink", "PostgresSource/source", "io.confluent.connect.jdbc.JdbcSinkConnector/sink"}, classes)

			cfg := map[string]string{"name": "shop", "connector.class": "PostgresSink", "value.converter.schemas.enable": "false", "topics": "customers,orders", "connection.url": db,
				"pk.mode": "record_key", "insert.mode": "merge", "tasks.max": "1", "errors.deadletterqueue.context.headers.enable": "true"}

			// Validation names the field that is wrong.
			code, body = w.call(t, "PUT", "/connector-plugins/PostgresSink/config/validate", cfg)
			require.Equal(t, 200, code)
			infos := shaped(t, "ConfigInfos", body)
			assert.EqualValues(t, 1, infos["error_count"])
			var wrong []string
			for _, c := range infos["configs"].([]any) {
				ci := shaped(t, "ConfigInfo", c)
				def := shaped(t, "ConfigKeyInfo", ci["definition"])
				val := shaped(t, "ConfigValueInfo", ci["value"])
				assert.Equal(t, def["name"], val["name"])
				if errs := val["errors"].([]any); len(errs) > 0 {
					wrong = append(wrong, val["name"].(string)+": "+errs[0].(string))
				}
			}
			assert.Equal(t, []string{`insert.mode: "merge" is not one of insert, upsert, update`}, wrong)

			code, body = w.call(t, "POST", "/connectors", map[string]any{"name": "shop", "config": cfg})
			assert.Equal(t, 400, code)
			assert.Contains(t, shaped(t, "ErrorMessage", body)["message"], `setting "insert.mode": "merge" is not one of insert, upsert`)

			// Create.
			cfg["insert.mode"] = "insert"
			cfg["errors.tolerance"] = "none"
			cfg["errors.deadletterqueue.topic.name"] = "dead" // for skips
			code, body = w.call(t, "POST", "/connectors", map[string]any{"name": "shop", "config": cfg})
			require.Equal(t, 201, code, "%v", body)
			info := shaped(t, "ConnectorInfo", body)
			assert.Equal(t, "sink", info["type"])
			assert.Equal(t, "shop", info["config"].(map[string]any)["name"])
			require.Len(t, info["tasks"], 1)
			assert.Equal(t, map[string]any{"connector": "shop", "task": 0.0}, shaped(t, "ConnectorTaskId", info["tasks"].([]any)[0]))

			code, body = w.call(t, "POST", "/connectors", map[string]any{"name": "shop", "config": cfg})
			assert.Equal(t, 409, code)
			shaped(t, "ErrorMessage", body)

			code, body = w.call(t, "GET", "/connectors", nil)
			assert.Equal(t, 200, code)
			assert.Equal(t, []any{"shop"}, body)
			code, body = w.call(t, "GET", "/connectors?expand=status&expand=info", nil)
			assert.Equal(t, 200, code)
			shaped(t, "ConnectorInfo", body.(map[string]any)["shop"].(map[string]any)["info"])
			code, body = w.call(t, "GET", "/connectors/shop/tasks", nil)
			assert.Equal(t, 200, code)
			shaped(t, "TaskInfo", body.([]any)[0])

			status := func() (string, string, string) {
				code, body := w.call(t, "GET", "/connectors/shop/status", nil)
				require.Equal(t, 200, code)
				st := shaped(t, "ConnectorStateInfo", body)
				conn := shaped(t, "ConnectorState", st["connector"], "trace")
				if len(st["tasks"].([]any)) == 0 {
					return conn["state"].(string), "", "" // not dealt yet
				}
				task := shaped(t, "TaskState", st["tasks"].([]any)[0], "trace")
				trace, _ := task["trace"].(string)
				return conn["state"].(string), task["state"].(string), trace
			}
			eventually(t, "the task running", func() bool { _, task, _ := status(); return task == "RUNNING" })

			e.produce("customers", 0, "c1", `{"name": "one"}`)
			eventually(t, "the customer written", func() bool { return count(t, conn, "customers") == 1 })

			// Pause: nothing is written until resume.
			code, _ = w.call(t, "PUT", "/connectors/shop/pause", nil)
			assert.Equal(t, 202, code)
			eventually(t, "the task paused", func() bool { c, task, _ := status(); return c == "PAUSED" && task == "PAUSED" })
			e.produce("customers", 0, "c2", `{"name": "two"}`)
			time.Sleep(time.Second)
			assert.Equal(t, 1, count(t, conn, "customers"), "a paused connector writes nothing")
			code, _ = w.call(t, "PUT", "/connectors/shop/resume", nil)
			assert.Equal(t, 202, code)
			eventually(t, "the second customer written", func() bool { return count(t, conn, "customers") == 2 })
			// The sink's offsets are the positions in the database: past
			// both customers of customers/0.
			eventually(t, "the offsets at 2", func() bool {
				code, body := w.call(t, "GET", "/connectors/shop/offsets", nil)
				require.Equal(t, 200, code)
				for _, o := range shaped(t, "ConnectorOffsets", body)["offsets"].([]any) {
					m := shaped(t, "ConnectorOffset", o)
					if fmt.Sprint(m["partition"]) == "map[kafka_partition:0 kafka_topic:customers]" {
						return fmt.Sprint(m["offset"]) == "map[kafka_offset:2]"
					}
				}
				return false
			})
			// The resumed task is a new one: it counts the one row it wrote.
			eventually(t, "the metrics counting it", func() bool {
				m := w.metrics(t)
				return m[`causeway_connect_sink_records_total{connector="shop",outcome="written"}`] == "1" &&
					m[`causeway_connect_tasks{connector="shop",state="RUNNING"}`] == "1"
			})

			// A row the database refuses fails the task (errors.tolerance
			// none); once the constraint is dropped, a restart of the failed
			// task writes it.
			e.produce("orders", 0, "o1", `{"customer": "c1", "amount": -5}`)
			eventually(t, "the task failed", func() bool { _, task, _ := status(); return task == "FAILED" })
			_, _, trace := status()
			assert.Contains(t, trace, "orders/0@0 refused by the sink")
			code, body = w.call(t, "GET", "/connectors/shop/tasks/0/status", nil)
			assert.Equal(t, 200, code)
			assert.Equal(t, "FAILED", shaped(t, "TaskState", body, "trace")["state"])
			_, err := conn.Exec(context.Background(), "ALTER TABLE orders DROP CONSTRAINT orders_amount_check")
			require.NoError(t, err)
			code, body = w.call(t, "POST", "/connectors/shop/restart?includeTasks=true&onlyFailed=true", nil)
			assert.Equal(t, 202, code)
			st := shaped(t, "ConnectorStateInfo", body)
			assert.Equal(t, "RESTARTING", st["tasks"].([]any)[0].(map[string]any)["state"])
			eventually(t, "the order written after the restart", func() bool { return count(t, conn, "orders") == 1 })
			eventually(t, "the task running again", func() bool { _, task, _ := status(); return task == "RUNNING" })
			// Skip: a row refused again stops the task; a skip sends it to
			// the dead-letter topic, and the task goes on past it.
			code, _ = w.call(t, "POST", "/connectors/shop/tasks/0/skip", nil)
			assert.Equal(t, 409, code, "a running task has nothing to skip")
			_, err = conn.Exec(context.Background(), "ALTER TABLE orders ADD CONSTRAINT orders_amount_check CHECK (amount >= 0) NOT VALID")
			require.NoError(t, err)
			e.produce("orders", 0, "o2", `{"customer": "c1", "amount": -7}`)
			eventually(t, "the task failed again", func() bool { _, task, _ := status(); return task == "FAILED" })
			code, body = w.call(t, "POST", "/connectors/shop/tasks/0/skip", nil)
			assert.Equal(t, 202, code)
			assert.Equal(t, map[string]any{"topic": "orders", "partition": 0.0, "offset": 1.0}, body)
			e.produce("orders", 0, "o3", `{"customer": "c1", "amount": 3}`)
			eventually(t, "the order after the skipped one written", func() bool { return count(t, conn, "orders") == 2 })
			eventually(t, "the task running again", func() bool { _, task, _ := status(); return task == "RUNNING" })
			assert.Equal(t, []string{"o2: " + sinkworker.ErrSkipped.Error()}, e.deadLetters("dead"))

			code, _ = w.call(t, "POST", "/connectors/shop/restart", nil)
			assert.Equal(t, 204, code)
			code, _ = w.call(t, "POST", "/connectors/shop/tasks/0/restart", nil)
			assert.Equal(t, 204, code)
			// Restarts work every time they are asked, not once per task
			// ever: a sink recovers from a second and a third outage too.
			for i, restart := range []string{"/connectors/shop/restart?includeTasks=true&onlyFailed=true", "/connectors/shop/tasks/0/restart"} {
				e.produce("orders", 0, fmt.Sprintf("o%d", 4+i), `{"customer": "c1", "amount": -9}`)
				eventually(t, "the task failed once more", func() bool { _, task, _ := status(); return task == "FAILED" })
				_, err = conn.Exec(context.Background(), "ALTER TABLE orders DROP CONSTRAINT orders_amount_check")
				require.NoError(t, err)
				code, _ = w.call(t, "POST", restart, nil)
				assert.Contains(t, []int{202, 204}, code)
				eventually(t, "the refused order written after "+restart, func() bool { return count(t, conn, "orders") == 3+i })
				eventually(t, "the task running again", func() bool { _, task, _ := status(); return task == "RUNNING" })
				_, err = conn.Exec(context.Background(), "ALTER TABLE orders ADD CONSTRAINT orders_amount_check CHECK (amount >= 0) NOT VALID")
				require.NoError(t, err)
			}

			// Reconfigure.
			cfg["batch.size"] = "100"
			code, body = w.call(t, "PUT", "/connectors/shop/config", cfg)
			assert.Equal(t, 200, code)
			assert.Equal(t, "100", shaped(t, "ConnectorInfo", body)["config"].(map[string]any)["batch.size"])
			code, body = w.call(t, "GET", "/connectors/shop/config", nil)
			assert.Equal(t, 200, code)
			assert.Equal(t, "100", body.(map[string]any)["batch.size"])
			eventually(t, "the task running again", func() bool { _, task, _ := status(); return task == "RUNNING" })
			e.produce("customers", 0, "c3", `{"name": "three"}`)
			eventually(t, "the third customer written", func() bool { return count(t, conn, "customers") == 3 })

			// Delete: the task stops, and the connector is gone.
			code, _ = w.call(t, "DELETE", "/connectors/shop", nil)
			assert.Equal(t, 204, code)
			code, body = w.call(t, "GET", "/connectors/shop", nil)
			assert.Equal(t, 404, code)
			assert.Equal(t, "Connector shop not found", shaped(t, "ErrorMessage", body)["message"])
			// Tasks stop after the answer, as Connect's do: the sink's group
			// empties once this worker's task has left it.
			eventually(t, "the sink's task gone from its group", func() bool { return e.members("connect-shop") == 0 })
			e.produce("customers", 0, "c4", `{"name": "four"}`)
			time.Sleep(time.Second)
			assert.Equal(t, 3, count(t, conn, "customers"), "a deleted connector writes nothing")
			code, _ = w.call(t, "PUT", "/connectors/shop/pause", nil)
			assert.Equal(t, 404, code)
			require.NoError(t, w.stop())
		})
	}
}

// The REST API takes only what it can keep whole: a body over
// MaxRequestBody is answered 413, without reading it all; a name that
// is not UTF-8 is refused rather than stored with U+FFFD in place of its
// bytes; answers quote no long input. The worker answers /healthz and
// /readyz as the stream worker does, and /readyz says which of its tasks
// failed.
func TestTheRESTAPIRefusesWhatItCannotKeepWhole(t *testing.T) {
	t.Parallel()
	e, db, w := ordersOnFake(t, "CREATE TABLE orders (id text PRIMARY KEY, amount int NOT NULL CHECK (amount >= 0));")
	raw := func(method, path string, body []byte) (int, string) {
		t.Helper()
		return w.raw(t, method, path, body)
	}
	code, body := raw("GET", "/healthz", nil)
	assert.Equal(t, 200, code, body)
	code, body = raw("GET", "/readyz", nil)
	assert.Equal(t, 200, code, body)
	assert.Equal(t, "ready\n", body)

	// An unknown path or method gets Kafka Connect's error shape, not
	// net/http's plain text.
	for _, c := range []struct {
		method, path string
		code         int
		message      string
	}{
		{"GET", "/no-such-thing", 404, "HTTP 404 Not Found"},
		{"GET", "/connectors/x/no-such-thing", 404, "HTTP 404 Not Found"},
		{"PATCH", "/connectors", 405, "HTTP 405 Method Not Allowed"},
	} {
		got, answer := w.call(t, c.method, c.path, nil)
		assert.Equal(t, c.code, got, "%s %s", c.method, c.path)
		assert.Equal(t, map[string]any{"error_code": float64(c.code), "message": c.message}, answer, "%s %s", c.method, c.path)
	}

	big := bytes.Repeat([]byte("x"), 2*connectworker.MaxRequestBody)
	huge, err := json.Marshal(map[string]any{"name": string(big), "config": map[string]string{"connector.class": "PostgresSink"}})
	require.NoError(t, err)
	code, body = raw("POST", "/connectors", huge)
	assert.Equal(t, 413, code)
	assert.Less(t, len(body), 200, "the answer quotes no input")
	code, body = raw("PUT", "/connectors/big/config", huge)
	assert.Equal(t, 413, code, body)

	cfg := map[string]string{"connector.class": "PostgresSink", "value.converter.schemas.enable": "false", "topics": "orders", "connection.url": db, "pk.mode": "record_key", "insert.mode": "insert"}
	b, err := json.Marshal(map[string]any{"name": "shop\xff", "config": cfg})
	require.NoError(t, err) // json.Marshal itself puts U+FFFD there: write the bytes by hand
	b = bytes.Replace(b, []byte(`shop\ufffd`), []byte("shop\xff"), 1)
	code, body = raw("POST", "/connectors", b)
	assert.Equal(t, 400, code)
	assert.Contains(t, body, "not valid UTF-8")
	code, body = raw("PUT", "/connectors/shop%FF/config", mustJSON(t, cfg))
	assert.Equal(t, 400, code)
	assert.Contains(t, body, "not valid UTF-8")
	long := strings.Repeat("n", connectworker.MaxNameLength+1)
	code, body = raw("POST", "/connectors", mustJSON(t, map[string]any{"name": long, "config": cfg}))
	assert.Equal(t, 400, code)
	assert.NotContains(t, body, long)
	code, body = raw("GET", "/connectors", nil)
	assert.Equal(t, 200, code)
	assert.Equal(t, "[]\n", body, "nothing was stored")

	// A task that fails leaves the worker ready, and says so.
	code, body = raw("POST", "/connectors", mustJSON(t, map[string]any{"name": "shop", "config": cfg}))
	require.Equal(t, 201, code, body)
	e.produce("orders", 0, "o1", `{"amount": -5}`)
	eventually(t, "/readyz naming the failed task", func() bool {
		code, body := raw("GET", "/readyz", nil)
		return code == 200 && strings.Contains(body, "degraded: tasks FAILED: shop/0")
	})
}

// A stopped connector has no tasks, as in Kafka Connect (KIP-875): its
// info, status and task list show none, and its task calls answer 404;
// resumed, it has its tasks again.
func TestAStoppedConnectorListsNoTasks(t *testing.T) {
	t.Parallel()
	_, db, w := ordersOnFake(t, "CREATE TABLE orders (id text PRIMARY KEY, amount int NOT NULL);")
	cfg := map[string]string{"connector.class": "PostgresSink", "value.converter.schemas.enable": "false", "topics": "orders", "connection.url": db, "pk.mode": "record_key", "insert.mode": "insert"}
	code, body := w.call(t, "POST", "/connectors", map[string]any{"name": "shop", "config": cfg})
	require.Equal(t, 201, code, "%v", body)
	tasks := func() (state string, info, status, list int) {
		_, body := w.call(t, "GET", "/connectors/shop/status", nil)
		st := body.(map[string]any)
		_, in := w.call(t, "GET", "/connectors/shop", nil)
		_, ls := w.call(t, "GET", "/connectors/shop/tasks", nil)
		return st["connector"].(map[string]any)["state"].(string), len(in.(map[string]any)["tasks"].([]any)), len(st["tasks"].([]any)), len(ls.([]any))
	}
	eventually(t, "the task running", func() bool {
		_, body := w.call(t, "GET", "/connectors/shop/tasks/0/status", nil)
		return body.(map[string]any)["state"] == "RUNNING"
	})

	code, _ = w.call(t, "PUT", "/connectors/shop/stop", nil)
	require.Equal(t, 204, code)
	state, info, status, list := tasks()
	assert.Equal(t, "STOPPED", state)
	assert.Zero(t, info, "GET /connectors/shop lists no task")
	assert.Zero(t, status, "the status lists no task")
	assert.Zero(t, list, "GET /connectors/shop/tasks lists none")
	code, _ = w.call(t, "GET", "/connectors/shop/tasks/0/status", nil)
	assert.Equal(t, 404, code)

	code, _ = w.call(t, "PUT", "/connectors/shop/resume", nil)
	require.Equal(t, 202, code)
	state, info, status, list = tasks()
	assert.Equal(t, "RUNNING", state)
	assert.Equal(t, []int{1, 1, 1}, []int{info, status, list}, "resumed, the connector has its task again")
}

// topics.regex is refused by name at create and validate time, alone or
// with topics, rather than ignored.
func TestTopicsRegexIsRefusedByName(t *testing.T) {
	t.Parallel()
	_, db, w := ordersOnFake(t, "CREATE TABLE orders (id text PRIMARY KEY, amount int NOT NULL);")
	for _, c := range []map[string]string{
		{"topics.regex": "ord.*"},
		{"topics": "orders", "topics.regex": "ord.*"},
	} {
		cfg := map[string]string{"connector.class": "PostgresSink", "value.converter.schemas.enable": "false", "connection.url": db, "pk.mode": "record_key"}
		maps.Copy(cfg, c)
		code, body := w.call(t, "POST", "/connectors", map[string]any{"name": "shop", "config": cfg})
		assert.Equal(t, 400, code, "%v", c)
		assert.Contains(t, fmt.Sprint(body), `setting "topics.regex": is not supported`, "%v", c)
		code, body = w.call(t, "PUT", "/connector-plugins/PostgresSink/config/validate", cfg)
		require.Equal(t, 200, code, "%v", body)
		var errs []any
		for _, ci := range body.(map[string]any)["configs"].([]any) {
			if v := ci.(map[string]any)["value"].(map[string]any); v["name"] == "topics.regex" {
				errs = v["errors"].([]any)
			}
		}
		assert.Equal(t, []any{"is not supported: name the topics in topics"}, errs, "%v", c)
	}
	code, body := w.call(t, "GET", "/connectors", nil)
	assert.Equal(t, 200, code)
	assert.Empty(t, body, "nothing was created")
}

// ordersOnFake is an env on the in-process Kafka with a topic orders of
// one partition, a database made with schema (its URL), and a worker.
func ordersOnFake(t *testing.T, schema string) (*env, string, *worker) {
	t.Helper()
	e := newFakeEnv(t)
	e.topics(1, "orders")
	db, _ := e.database("sink", schema)
	return e, db, e.start("w1")
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// With the restart policy on, a connect task that failed (here on a row
// the database refused) is started again without an operator, the trace
// saying when; once what failed it is mended, an attempt writes the row.
// Kafka Connect never restarts a failed task by itself.
func TestTheRestartPolicyRestartsAFailedConnectTask(t *testing.T) {
	t.Parallel()
	e := newFakeEnv(t)
	e.topics(1, "customers", "orders")
	db, conn := e.database("sink", sinkSchema)
	w := e.startWith("w1", func(c *connectworker.Config) {
		c.Restarts = connectworker.RestartPolicy{Initial: 300 * time.Millisecond, Max: 2 * time.Second}
	})
	cfg := map[string]string{"connector.class": "PostgresSink", "value.converter.schemas.enable": "false", "topics": "customers,orders", "connection.url": db,
		"pk.mode": "record_key", "insert.mode": "insert", "max.retries": "0"}
	code, body := w.call(t, "POST", "/connectors", map[string]any{"name": "shop", "config": cfg})
	require.Equal(t, 201, code, "%v", body)
	e.produce("customers", 0, "c1", `{"name": "one"}`)
	e.produce("orders", 0, "o1", `{"customer": "c1", "amount": -5}`)
	eventually(t, "the trace naming the next attempt", func() bool {
		_, body := w.call(t, "GET", "/connectors/shop/status", nil)
		tasks := body.(map[string]any)["tasks"].([]any)
		if len(tasks) == 0 {
			return false // not dealt yet
		}
		task := tasks[0].(map[string]any)
		trace, _ := task["trace"].(string)
		return task["state"] == "FAILED" && strings.Contains(trace, "(restart policy: attempt ")
	})
	eventually(t, "a restart counted", func() bool {
		n, err := strconv.ParseFloat(w.metrics(t)[`causeway_connect_task_restarts_total{connector="shop",task="0"}`], 64)
		return err == nil && n >= 1
	})
	_, err := conn.Exec(context.Background(), "ALTER TABLE orders DROP CONSTRAINT orders_amount_check")
	require.NoError(t, err)
	eventually(t, "the order written by a restart nobody asked for", func() bool { return count(t, conn, "orders") == 1 })
}
