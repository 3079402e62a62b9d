package connectworker_test

import (
	"bytes"
	"context"
	"net/http"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Kafka Connect 4's smaller REST answers: GET /health (KIP-1017), the
// Location of a connector POST made, and PATCH of a configuration
// (KIP-477), where a null removes a setting and a wrong one is refused as
// a PUT's would be.
func TestTheRESTAPIAnswersHealthLocationAndPatch(t *testing.T) {
	t.Parallel()
	_, db, w := ordersOnFake(t, "CREATE TABLE orders (id text PRIMARY KEY, amount int NOT NULL);")

	code, body := w.call(t, "GET", "/health", nil)
	require.Equal(t, 200, code, "%v", body)
	assert.Equal(t, "healthy", shaped(t, "WorkerHealth", body)["status"])

	cfg := map[string]string{"connector.class": "PostgresSink", "topics": "orders", "connection.url": db, "pk.mode": "record_key",
		"value.converter.schemas.enable": "false", "batch.size": "10"}
	req, err := http.NewRequest("POST", w.base+"/connectors", bytes.NewReader(mustJSON(t, map[string]any{"name": "shop two", "config": cfg})))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 201, resp.StatusCode)
	assert.Equal(t, "/connectors/shop%20two", resp.Header.Get("Location"))

	code, body = w.call(t, "PATCH", "/connectors/shop%20two/config", map[string]any{"batch.size": nil, "insert.mode": "upsert"})
	require.Equal(t, 200, code, "%v", body)
	got := shaped(t, "ConnectorInfo", body)["config"].(map[string]any)
	assert.Equal(t, "upsert", got["insert.mode"])
	assert.NotContains(t, got, "batch.size", "a null removes the setting")
	assert.Equal(t, "orders", got["topics"], "the others stay")

	code, body = w.call(t, "PATCH", "/connectors/shop%20two/config", map[string]any{"insert.mode": "merge"})
	assert.Equal(t, 400, code)
	assert.Contains(t, shaped(t, "ErrorMessage", body)["message"], `insert.mode`)
	code, _ = w.call(t, "PATCH", "/connectors/none/config", map[string]any{"insert.mode": "upsert"})
	assert.Equal(t, 404, code)
}

// A stopped sink's offsets can be changed (KIP-875): PATCH moves a
// channel's position, and the resumed sink writes again from there;
// DELETE removes them all, and it writes from the beginning. A running
// connector's offsets are refused.
func TestASinksOffsetsAreAlteredAndResetWhileStopped(t *testing.T) {
	t.Parallel()
	e, db, w := ordersOnFake(t, "CREATE TABLE orders (id text PRIMARY KEY, amount int NOT NULL);")
	conn, err := pgx.Connect(context.Background(), db)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	e.produce("orders", 0, "o1", `{"amount": 1}`)
	e.produce("orders", 0, "o2", `{"amount": 2}`)
	cfg := map[string]string{"connector.class": "PostgresSink", "topics": "orders", "connection.url": db, "pk.mode": "record_key",
		"insert.mode": "upsert", "value.converter.schemas.enable": "false"}
	code, body := w.call(t, "POST", "/connectors", map[string]any{"name": "shop", "config": cfg})
	require.Equal(t, 201, code, "%v", body)
	amounts := func() string {
		var s string
		_ = conn.QueryRow(context.Background(), `SELECT coalesce(string_agg(id || '=' || amount, ',' ORDER BY id), '') FROM orders`).Scan(&s)
		return s
	}
	eventually(t, "both written", func() bool { return amounts() == "o1=1,o2=2" })
	offsetOf := func() []any {
		code, body := w.call(t, "GET", "/connectors/shop/offsets", nil)
		require.Equal(t, 200, code, "%v", body)
		return shaped(t, "ConnectorOffsets", body)["offsets"].([]any)
	}

	rewind := map[string]any{"offsets": []any{map[string]any{"partition": map[string]any{"kafka_topic": "orders", "kafka_partition": 0}, "offset": map[string]any{"kafka_offset": 1}}}}
	code, body = w.call(t, "PATCH", "/connectors/shop/offsets", rewind)
	assert.Equal(t, 400, code, "a running connector's offsets stay: %v", body)
	assert.Contains(t, shaped(t, "ErrorMessage", body)["message"], "stop it first")

	code, _ = w.call(t, "PUT", "/connectors/shop/stop", nil)
	require.Equal(t, 204, code)
	eventually(t, "the connector stopped", func() bool {
		_, body := w.call(t, "GET", "/connectors/shop/status", nil)
		return body.(map[string]any)["connector"].(map[string]any)["state"] == "STOPPED"
	})
	_, err = conn.Exec(context.Background(), `UPDATE orders SET amount = 0`)
	require.NoError(t, err)
	code, body = w.call(t, "PATCH", "/connectors/shop/offsets", rewind)
	require.Equal(t, 200, code, "%v", body)
	assert.Contains(t, shaped(t, "Message", body)["message"], "altered")
	assert.Equal(t, map[string]any{"kafka_offset": 1.0}, offsetOf()[0].(map[string]any)["offset"])
	code, _ = w.call(t, "PUT", "/connectors/shop/resume", nil)
	require.Equal(t, 202, code)
	eventually(t, "o2 written again, o1 not", func() bool { return amounts() == "o1=0,o2=2" })

	code, _ = w.call(t, "PUT", "/connectors/shop/stop", nil)
	require.Equal(t, 204, code)
	eventually(t, "the connector stopped", func() bool {
		_, body := w.call(t, "GET", "/connectors/shop/status", nil)
		return body.(map[string]any)["connector"].(map[string]any)["state"] == "STOPPED"
	})
	code, body = w.call(t, "DELETE", "/connectors/shop/offsets", nil)
	require.Equal(t, 200, code, "%v", body)
	assert.Empty(t, offsetOf())
	code, _ = w.call(t, "PUT", "/connectors/shop/resume", nil)
	require.Equal(t, 202, code)
	eventually(t, "everything written again", func() bool { return amounts() == "o1=1,o2=2" })

	bad := map[string]any{"offsets": []any{map[string]any{"partition": map[string]any{"topic": "orders"}, "offset": nil}}}
	code, _ = w.call(t, "PUT", "/connectors/shop/stop", nil)
	require.Equal(t, 204, code)
	code, body = w.call(t, "PATCH", "/connectors/shop/offsets", bad)
	assert.Equal(t, 400, code)
	assert.Contains(t, shaped(t, "ErrorMessage", body)["message"], "kafka_topic")
}

// A stopped source's offset can be replaced and cleared (KIP-875): the
// resumed source reads again from the offset given, then, once cleared,
// from the beginning.
func TestASourcesOffsetIsAlteredAndResetWhileStopped(t *testing.T) {
	t.Parallel()
	e := newFakeEnv(t)
	src, conn := e.database("src", sourceSchema)
	insertShop(t, func(sql string, args ...any) error {
		_, err := conn.Exec(context.Background(), sql, args...)
		return err
	}, 1, 10, 3)
	w := e.start("w1")
	code, body := w.call(t, "PUT", "/connectors/shop-src/config", map[string]string{
		"connector.class": "PostgresSource", "connection.url": src, "table.whitelist": "customers,orders", "topic.prefix": "src_", "poll.interval.ms": "100"})
	require.Equal(t, 201, code, "%v", body)
	rows := func() int { return len(e.readIDs("src_orders")) + len(e.readIDs("src_customers")) }
	eventually(t, "40 rows in Kafka", func() bool { return rows() == 40 })
	stop := func() {
		code, _ := w.call(t, "PUT", "/connectors/shop-src/stop", nil)
		require.Equal(t, 204, code)
		eventually(t, "the connector stopped", func() bool {
			_, body := w.call(t, "GET", "/connectors/shop-src/status", nil)
			return body.(map[string]any)["connector"].(map[string]any)["state"] == "STOPPED"
		})
	}
	stop()
	code, body = w.call(t, "PATCH", "/connectors/shop-src/offsets", map[string]any{"offsets": []any{map[string]any{
		"partition": map[string]any{"connector": "shop-src"}, "offset": map[string]any{"tables": map[string]any{"customers": 10, "orders": 25}}}}})
	require.Equal(t, 200, code, "%v", body)
	code, _ = w.call(t, "PUT", "/connectors/shop-src/resume", nil)
	require.Equal(t, 202, code)
	eventually(t, "orders 26 to 30 read again", func() bool { return rows() == 45 })

	stop()
	code, body = w.call(t, "DELETE", "/connectors/shop-src/offsets", nil)
	require.Equal(t, 200, code, "%v", body)
	code, _ = w.call(t, "PUT", "/connectors/shop-src/resume", nil)
	require.Equal(t, 202, code)
	eventually(t, "every row read again", func() bool { return rows() == 85 })
	assert.ElementsMatch(t, append(append(seq(1, 30), seq(26, 30)...), seq(1, 30)...), e.readIDs("src_orders"))
}

// A source makes a missing topic as its topic-creation group says
// (KIP-158): here the HTTP source, with a group for the state topics.
func TestASourceMakesItsTopicsByTheirGroup(t *testing.T) {
	t.Parallel()
	e := newFakeEnv(t)
	w := e.start("w1")
	code, body := w.call(t, "POST", "/connectors", map[string]any{"name": "web", "config": map[string]string{
		"connector.class": "HttpSource", "http.topics": "events,state.users",
		"topic.creation.default.partitions": "1", "topic.creation.default.replication.factor": "-1",
		"topic.creation.groups": "state", "topic.creation.state.include": `state\..*`, "topic.creation.state.partitions": "3",
		"topic.creation.state.cleanup.policy": "compact"}})
	require.Equal(t, 201, code, "%v", body)
	for _, topic := range []string{"events", "state.users"} {
		eventually(t, "the source running", func() bool {
			code, _ := w.call(t, "POST", "/connectors/web/topics/"+topic, map[string]any{"records": []any{map[string]any{"key": "k", "value": map[string]any{"a": 1}}}})
			return code == 200
		})
	}
	counts := e.fake.Partitions()
	assert.EqualValues(t, 1, counts["events"], "the default group")
	assert.EqualValues(t, 3, counts["state.users"], "the state group")
}

// A connector's active topics (KIP-558): a sink's are the topics it has
// read records from, a source's those it has written; a reset forgets
// them until they are used again.
func TestActiveTopicsAreTrackedAndReset(t *testing.T) {
	t.Parallel()
	e, db, w := ordersOnFake(t, "CREATE TABLE orders (id text PRIMARY KEY, amount int NOT NULL); CREATE TABLE payments (id text PRIMARY KEY, amount int);")
	e.topics(1, "payments")
	topics := func(name string) []any {
		code, body := w.call(t, "GET", "/connectors/"+name+"/topics", nil)
		require.Equal(t, 200, code, "%v", body)
		return body.(map[string]any)[name].(map[string]any)["topics"].([]any)
	}
	cfg := map[string]string{"connector.class": "PostgresSink", "topics": "orders,payments", "connection.url": db, "pk.mode": "record_key",
		"insert.mode": "upsert", "value.converter.schemas.enable": "false"}
	code, body := w.call(t, "POST", "/connectors", map[string]any{"name": "shop", "config": cfg})
	require.Equal(t, 201, code, "%v", body)
	assert.Empty(t, topics("shop"), "nothing read yet")
	e.produce("orders", 0, "o1", `{"amount": 1}`)
	eventually(t, "orders active", func() bool { return len(topics("shop")) == 1 })
	assert.Equal(t, []any{"orders"}, topics("shop"), "payments has no record")

	code, _ = w.call(t, "PUT", "/connectors/shop/topics/reset", nil)
	require.Equal(t, 200, code)
	assert.Empty(t, topics("shop"))
	e.produce("orders", 0, "o2", `{"amount": 2}`)
	eventually(t, "orders active again", func() bool { return len(topics("shop")) == 1 })

	code, body = w.call(t, "POST", "/connectors", map[string]any{"name": "web", "config": map[string]string{"connector.class": "HttpSource", "http.topics": "events"}})
	require.Equal(t, 201, code, "%v", body)
	eventually(t, "the source running", func() bool {
		code, _ := w.call(t, "POST", "/connectors/web/topics/events", map[string]any{"records": []any{map[string]any{"key": "k", "value": 1}}})
		return code == 200
	})
	eventually(t, "events active", func() bool { return len(topics("web")) == 1 })

	code, _ = w.call(t, "DELETE", "/connectors/shop", nil)
	require.Equal(t, 204, code)
	code, body = w.call(t, "POST", "/connectors", map[string]any{"name": "shop", "config": cfg, "initial_state": "STOPPED"})
	require.Equal(t, 201, code, "%v", body)
	assert.Empty(t, topics("shop"), "a deleted connector's topics go with it")
}
