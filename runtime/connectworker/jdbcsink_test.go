package connectworker_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"maps"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/internal/pgtest"
	"github.com/causeway-stream/causeway/runtime/connectworker"
	"github.com/causeway-stream/causeway/runtime/internal/transport"
)

// orderSchemaV1 is the value schema of the orders the JDBC sink test
// writes, as Kafka Connect's JsonConverter writes it: every logical type
// Connect has, bytes, an optional field and one with a default.
const orderSchemaV1 = `{"type":"struct","name":"order","optional":false,"fields":[
	{"field":"customer","type":"string","optional":false},
	{"field":"amount","type":"bytes","optional":false,"name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"scale":"2"}},
	{"field":"placed","type":"int32","optional":false,"name":"org.apache.kafka.connect.data.Date","version":1},
	{"field":"packed","type":"int32","optional":true,"name":"org.apache.kafka.connect.data.Time","version":1},
	{"field":"at","type":"int64","optional":true,"name":"org.apache.kafka.connect.data.Timestamp","version":1},
	{"field":"paid","type":"boolean","optional":true,"default":false},
	{"field":"blob","type":"bytes","optional":true}]}`

// orderSchemaV2 adds an optional field, for auto.evolve.
var orderSchemaV2 = strings.Replace(orderSchemaV1, `{"field":"blob","type":"bytes","optional":true}]`,
	`{"field":"blob","type":"bytes","optional":true},{"field":"channel","type":"string","optional":true}]`, 1)

// envelope is a record value as the JsonConverter writes it with
// schemas.enable=true.
func envelope(schema, payload string) string {
	return `{"schema":` + schema + `,"payload":` + payload + `}`
}

// A sink configuration in Confluent's JDBC sink's form, as its
// documentation writes one (only the addresses changed), works as written
// on a real worker and a real Postgres: the JDBC connector class and URL,
// a user of its own, the JsonConverter's schema envelope with Connect's
// logical types, a StringConverter key, auto.create, auto.evolve, upsert
// on the record key (one key twice in a batch), deletes on tombstones and
// db.timezone. The table is made from the schema, with the types
// Confluent's sink makes, by the configured user; the rows hold what the
// records said.
func TestAConfluentJDBCSinkConfigWorksAsWritten(t *testing.T) {
	t.Parallel()
	e := newFakeEnv(t)
	e.topics(1, "orders")
	db, conn := e.database("jdbc", "SELECT 1")
	ctx := context.Background()
	role := "sinker_" + strings.TrimPrefix(strings.ToLower(strings.Split(db[strings.LastIndexByte(db, '/')+1:], "?")[0]), "t")
	_, err := conn.Exec(ctx, fmt.Sprintf(`CREATE ROLE %s LOGIN PASSWORD 'not-logged'; GRANT CREATE, USAGE ON SCHEMA public TO %[1]s`, role))
	require.NoError(t, err)
	u, err := url.Parse(db)
	require.NoError(t, err)
	jdbc := "jdbc:postgresql://" + u.Host + u.Path

	day := func(y int, m time.Month, d int) int64 { return time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Unix() / 86400 }
	at := time.Date(2024, 3, 1, 10, 0, 0, 0, time.UTC).UnixMilli()
	b64 := func(b ...byte) string { return base64.StdEncoding.EncodeToString(b) }
	records := []struct{ key, value string }{
		{"o1", envelope(orderSchemaV1, fmt.Sprintf(`{"customer":"c1","amount":%q,"placed":%d,"paid":true}`, b64(0x04, 0xd2), day(2024, 3, 1)))},
		{"o2", envelope(orderSchemaV1, fmt.Sprintf(`{"customer":"c2","amount":%q,"placed":%d,"at":null}`, b64(0x04, 0xd2), day(2024, 3, 1)))},
		{"o1", envelope(orderSchemaV1, fmt.Sprintf(`{"customer":"c1","amount":%q,"placed":%d,"paid":false,"blob":%q}`, b64(0x04, 0xd3), day(2024, 3, 1), b64(9)))},
		{"o1", envelope(orderSchemaV1, fmt.Sprintf(`{"customer":"c1b","amount":%q,"placed":%d,"packed":%d,"at":%d,"paid":true,"blob":%q}`,
			b64(0x16, 0x2e), day(2024, 3, 2), (9*3600+30*60)*1000+250, at, b64(1, 2)))},
		{"o3", envelope(orderSchemaV2, fmt.Sprintf(`{"customer":"c3","amount":%q,"placed":%d,"channel":"web"}`, b64(0xfb), day(1969, 12, 31)))},
	}
	for _, r := range records {
		e.produce("orders", 0, r.key, r.value)
	}
	_, err = e.fake.Produce(transport.Message{Topic: "orders", Key: []byte("o2"), Timestamp: time.Now()})
	require.NoError(t, err)

	cfg := map[string]string{
		"connector.class":                "io.confluent.connect.jdbc.JdbcSinkConnector",
		"tasks.max":                      "1",
		"topics":                         "orders",
		"connection.url":                 jdbc,
		"connection.user":                role,
		"connection.password":            "not-logged",
		"auto.create":                    "true",
		"auto.evolve":                    "true",
		"insert.mode":                    "upsert",
		"pk.mode":                        "record_key",
		"pk.fields":                      "id",
		"delete.enabled":                 "true",
		"db.timezone":                    "Europe/Berlin",
		"key.converter":                  "org.apache.kafka.connect.storage.StringConverter",
		"value.converter":                "org.apache.kafka.connect.json.JsonConverter",
		"value.converter.schemas.enable": "true",
	}
	seen, logs := observer.New(zap.DebugLevel)
	w := e.startWith("w1", func(c *connectworker.Config) { c.Log = zap.New(zapcore.NewTee(c.Log.Core(), seen)) })
	code, body := w.call(t, "PUT", "/connector-plugins/JdbcSinkConnector/config/validate", withName(cfg, "jdbc"))
	require.Equal(t, 200, code, "%v", body)
	var errs []any
	for _, c := range body.(map[string]any)["configs"].([]any) {
		v := c.(map[string]any)["value"].(map[string]any)
		errs = append(errs, v["errors"].([]any)...)
		if v["name"] == "connection.password" {
			assert.Equal(t, "[hidden]", v["value"], "validate masks the password")
		}
	}
	assert.Empty(t, errs)
	assert.EqualValues(t, 0, body.(map[string]any)["error_count"])
	code, body = w.call(t, "POST", "/connectors", map[string]any{"name": "jdbc", "config": cfg})
	require.Equal(t, 201, code, "%v", body)

	type row struct {
		customer, amount, placed, packed, at string
		paid                                 *bool
		blob                                 []byte
		channel                              *string
	}
	read := func() map[string]row {
		rows, err := conn.Query(ctx, `SELECT id, customer, amount::text, placed::text, coalesce(packed::text, ''), coalesce(at::text, ''), paid, blob, channel FROM orders ORDER BY id`)
		if err != nil {
			return nil // not made yet
		}
		out := map[string]row{}
		for rows.Next() {
			var id string
			var r row
			require.NoError(t, rows.Scan(&id, &r.customer, &r.amount, &r.placed, &r.packed, &r.at, &r.paid, &r.blob, &r.channel))
			out[id] = r
		}
		if rows.Err() != nil {
			return nil
		}
		return out
	}
	var got map[string]row
	eventually(t, "every record written", func() bool {
		got = read()
		_, o3 := got["o3"]
		_, o2 := got["o2"]
		return o3 && !o2 && len(got) == 2
	})
	yes := true
	web := "web"
	assert.Equal(t, row{customer: "c1b", amount: "56.78", placed: "2024-03-02", packed: "09:30:00.25", at: "2024-03-01 11:00:00",
		paid: &yes, blob: []byte{1, 2}}, got["o1"], "upserted three times, twice in a row; the timestamp as Berlin's wall time")
	assert.Equal(t, row{customer: "c3", amount: "-0.05", placed: "1969-12-31", paid: new(bool), channel: &web}, got["o3"],
		"a field with a default takes it; the evolved column")

	var owner string
	require.NoError(t, conn.QueryRow(ctx, `SELECT tableowner FROM pg_tables WHERE tablename = 'orders'`).Scan(&owner))
	assert.Equal(t, role, owner, "the table is made as connection.user")
	assert.Equal(t, map[string]string{
		"id": "text NO", "customer": "text NO", "amount": "numeric NO", "placed": "date NO", "packed": "time without time zone YES",
		"at": "timestamp without time zone YES", "paid": "boolean YES", "blob": "bytea YES", "channel": "text YES",
	}, columnsOf(t, conn, "orders"))

	code, body = w.call(t, "GET", "/connectors/jdbc/status", nil)
	require.Equal(t, 200, code)
	assert.Equal(t, "PostgresSink", body.(map[string]any)["served_by"], "the status says which plugin serves the class")

	// The password is in no log line, status or metric.
	assert.NotContains(t, fmt.Sprint(body), "not-logged")
	assert.NotContains(t, fmt.Sprint(w.metrics(t)), "not-logged")
	require.NotEmpty(t, logs.All())
	for _, entry := range logs.All() {
		assert.NotContains(t, entry.Message+fmt.Sprint(entry.ContextMap()), "not-logged", "a log line")
	}
}

// withName is cfg with its name set.
func withName(cfg map[string]string, name string) map[string]string {
	out := maps.Clone(cfg)
	out["name"] = name
	return out
}

// columnsOf is each column of table with its type and whether it may be
// null.
func columnsOf(t *testing.T, conn *pgx.Conn, table string) map[string]string {
	t.Helper()
	rows, err := conn.Query(context.Background(), `SELECT column_name, data_type, is_nullable FROM information_schema.columns WHERE table_name = $1`, table)
	require.NoError(t, err)
	out := map[string]string{}
	for rows.Next() {
		var name, typ, null string
		require.NoError(t, rows.Scan(&name, &typ, &null))
		out[name] = typ + " " + null
	}
	require.NoError(t, rows.Err())
	return out
}

// Validate flags a setting no part of the configuration knows (a typo,
// which Kafka Connect lets pass), refuses by name Kafka Connect's settings
// the worker does not serve, saying why, and accepts those it does;
// creating the connector refuses the same.
func TestUnknownAndUnservedSettingsAreRefusedByName(t *testing.T) {
	t.Parallel()
	_, db, w := ordersOnFake(t, "CREATE TABLE orders (id text PRIMARY KEY, amount int NOT NULL);")
	base := map[string]string{"name": "shop", "connector.class": "PostgresSink", "topics": "orders", "connection.url": db, "pk.mode": "record_key",
		"value.converter.schemas.enable": "false", "errors.log.enable": "true", "errors.deadletterqueue.context.headers.enable": "true",
		"config.action.reload": "restart", "errors.retry.delay.max.ms": "60000", "errors.retry.timeout": "0", "errors.log.include.messages": "false",
		"errors.deadletterqueue.topic.replication.factor": "-1", "header.converter": "org.apache.kafka.connect.storage.SimpleHeaderConverter",
		"mssql.use.merge.holdlock": "true", "dialect.name": "PostgreSqlDatabaseDialect", "table.types": "TABLE", "connection.attempts": "3",
		"connection.backoff.ms": "100", "quote.sql.identifiers": "always", "trim.sensitive.log": "false", "max.retries": "10", "retry.backoff.ms": "3000",
		"batch.size": "3000", "fields.whitelist": "amount", "db.timezone": "UTC", "auto.create": "false", "auto.evolve": "false",
		"delete.enabled": "false", "insert.mode": "insert", "table.name.format": "${topic}", "tasks.max": "1", "errors.tolerance": "none",
		"key.converter": "org.apache.kafka.connect.storage.StringConverter", "value.converter": "org.apache.kafka.connect.json.JsonConverter",
		"value.converter.schemas.cache.size": "100", "value.converter.decimal.format": "NUMERIC", "value.converter.replace.null.with.default": "true"}
	tests := []struct {
		key, value, want string
	}{
		{"", "", ""},
		{"insert.mod", "upsert", "is not a setting of this connector's plugin nor of Kafka Connect's connectors"},
		{"value.converter.schemas.enabled", "false", "is not a setting of org.apache.kafka.connect.json.JsonConverter"},
		{"consumer.override.max.poll.records", "10", "is not supported: per-connector client settings"},
		{"topic.creation.groups", "big", "is not supported: sinks make no topics"},
		{"errors.retry.timeout", "300000", `only "0" is served`},
		{"errors.log.include.messages", "true", `only "false" is served`},
		{"errors.deadletterqueue.topic.replication.factor", "3", `only "-1" is served`},
		{"header.converter", "io.confluent.connect.json.JsonSchemaConverter", `only "org.apache.kafka.connect.storage.SimpleHeaderConverter" is served`},
		{"quote.sql.identifiers", "never", `only "always" is served`},
		{"dialect.name", "MySqlDatabaseDialect", "is not one of PostgreSqlDatabaseDialect"},
		{"producer.override.acks", "1", "is not supported: per-connector client settings"},
		{"admin.override.retries", "1", "is not supported: per-connector client settings"},
		{"offsets.storage.topic", "x", "is not supported: sources keep their offsets"},
		{"key.converter.schemas.enable", "false", "is not a setting of org.apache.kafka.connect.storage.StringConverter"},
		{"value.converter.schemas.enable", "maybe", `"maybe" is not true or false`},
		{"value.converter", "io.confluent.connect.protobuf.ProtobufConverter", `"io.confluent.connect.protobuf.ProtobufConverter" is not one of`},
	}
	for _, tt := range tests {
		cfg := maps.Clone(base)
		if tt.key != "" {
			cfg[tt.key] = tt.value
		}
		code, body := w.call(t, "PUT", "/connector-plugins/PostgresSink/config/validate", cfg)
		require.Equal(t, 200, code, "%v", body)
		var errs []string
		for _, c := range body.(map[string]any)["configs"].([]any) {
			v := c.(map[string]any)["value"].(map[string]any)
			for _, e := range v["errors"].([]any) {
				errs = append(errs, v["name"].(string)+": "+e.(string))
			}
		}
		if tt.want == "" {
			assert.Empty(t, errs, "the settings served pass")
			continue
		}
		require.Len(t, errs, 1, "%s: %v", tt.key, errs)
		assert.Contains(t, errs[0], tt.key+": ")
		assert.Contains(t, errs[0], tt.want)
		code, body = w.call(t, "POST", "/connectors", map[string]any{"name": "shop", "config": cfg})
		assert.Equal(t, 400, code, "%s", tt.key)
		assert.Contains(t, fmt.Sprint(body), tt.key, "the refusal names the setting")
	}

	// The Avro converter reads its registry's address and nothing else:
	// the registry's other settings are refused, not ignored.
	avro := maps.Clone(base)
	maps.Copy(avro, map[string]string{"value.converter": "io.confluent.connect.avro.AvroConverter", "value.converter.schema.registry.url": "http://registry:8081",
		"value.converter.basic.auth.user.info": "u:p"})
	delete(avro, "value.converter.schemas.cache.size")
	delete(avro, "value.converter.decimal.format")
	delete(avro, "value.converter.replace.null.with.default")
	delete(avro, "value.converter.schemas.enable")
	code, body := w.call(t, "PUT", "/connector-plugins/PostgresSink/config/validate", avro)
	require.Equal(t, 200, code)
	var errs []string
	for _, c := range body.(map[string]any)["configs"].([]any) {
		v := c.(map[string]any)["value"].(map[string]any)
		for _, e := range v["errors"].([]any) {
			errs = append(errs, v["name"].(string)+": "+e.(string))
		}
	}
	assert.Equal(t, []string{"value.converter.basic.auth.user.info: is not supported: the Avro converter reads only schema.registry.url"}, errs)
}

// A refused record goes to the dead-letter topic as it came; with
// errors.deadletterqueue.context.headers.enable it carries KIP-298's ten
// context headers, saying where it came from, which task refused it, at
// which stage, and why; without, none of them, as Kafka Connect's.
func TestDeadLetterContextHeadersFollowTheirSetting(t *testing.T) {
	t.Parallel()
	for _, enabled := range []bool{false, true} {
		t.Run(fmt.Sprint(enabled), func(t *testing.T) {
			e, db, w := ordersOnFake(t, "CREATE TABLE orders (id text PRIMARY KEY, amount int NOT NULL CHECK (amount >= 0));")
			e.produce("orders", 0, "o1", `{"amount": -1}`)
			e.produce("orders", 0, "o2", `{"amount": 2}`)
			cfg := map[string]string{"connector.class": "PostgresSink", "topics": "orders", "connection.url": db, "pk.mode": "record_key",
				"value.converter.schemas.enable": "false", "errors.tolerance": "all", "errors.deadletterqueue.topic.name": "dead",
				"errors.deadletterqueue.context.headers.enable": fmt.Sprint(enabled)}
			code, body := w.call(t, "POST", "/connectors", map[string]any{"name": "shop", "config": cfg})
			require.Equal(t, 201, code, "%v", body)
			var letters []map[string]string
			eventually(t, "the dead letter", func() bool {
				letters = nil
				e.readAll(func(r *kgo.Record) {
					h := map[string]string{"key": string(r.Key), "value": string(r.Value)}
					for _, x := range r.Headers {
						h[x.Key] = string(x.Value)
					}
					letters = append(letters, h)
				}, "dead")
				return len(letters) > 0
			})
			require.Len(t, letters, 1)
			got := letters[0]
			assert.Equal(t, "o1", got["key"])
			assert.JSONEq(t, `{"amount": -1}`, got["value"])
			if !enabled {
				for k := range got {
					assert.NotContains(t, k, "__connect.errors", "no context headers")
				}
				return
			}
			for k, want := range map[string]string{"__connect.errors.topic": "orders", "__connect.errors.partition": "0", "__connect.errors.offset": "0",
				"__connect.errors.connector.name": "shop", "__connect.errors.task.id": "0", "__connect.errors.stage": "TASK_PUT",
				"__connect.errors.class.name": "PostgresSink"} {
				assert.Equal(t, want, got[k], k)
			}
			assert.Contains(t, got["__connect.errors.exception.message"], "orders_amount_check")
			assert.NotEmpty(t, got["__connect.errors.exception.class.name"])
			assert.NotEmpty(t, got["__connect.errors.exception.stacktrace"])
		})
	}
}

// Transforms change a record's schema with its data on the way to the
// table: Flatten makes the nested struct's fields columns auto.create
// types from their schemas, Cast changes a column's type, InsertField adds
// the record's offset, and Filter with a predicate drops the records it
// matches, whose positions still move (a record after them is written).
func TestTransformsReshapeRowsAndTheirSchemas(t *testing.T) {
	t.Parallel()
	e := newFakeEnv(t)
	e.topics(1, "orders")
	db, conn := e.database("xf", "SELECT 1")
	const schema = `{"type":"struct","optional":false,"fields":[{"field":"id","type":"string","optional":false},
		{"field":"qty","type":"string","optional":false},{"field":"test","type":"boolean","optional":true},
		{"field":"ship","type":"struct","optional":true,"fields":[{"field":"city","type":"string","optional":false},
			{"field":"day","type":"int32","optional":true,"name":"org.apache.kafka.connect.data.Date","version":1}]}]}`
	e.produce("orders", 0, "", envelope(schema, `{"id":"o1","qty":"3","ship":{"city":"Oslo","day":19783}}`))
	rec := envelope(schema, `{"id":"t1","qty":"1","test":true}`)
	_, err := e.fake.Produce(transport.Message{Topic: "orders", Value: []byte(rec), Headers: []framework.Header{{Key: "test-run", Value: []byte("1")}}, Timestamp: time.Now()})
	require.NoError(t, err)
	e.produce("orders", 0, "", envelope(schema, `{"id":"o2","qty":"5"}`))
	cfg := map[string]string{"connector.class": connectworker.JDBCSinkClass, "topics": "orders", "connection.url": db, "auto.create": "true",
		"pk.mode": "record_value", "pk.fields": "id", "insert.mode": "upsert",
		"transforms": "skipTests,flat,qty,offset", "transforms.skipTests.type": "org.apache.kafka.connect.transforms.Filter",
		"transforms.skipTests.predicate": "isTest", "predicates": "isTest",
		"predicates.isTest.type": "org.apache.kafka.connect.transforms.predicates.HasHeaderKey", "predicates.isTest.name": "test-run",
		"transforms.flat.type": "org.apache.kafka.connect.transforms.Flatten$Value", "transforms.flat.delimiter": "_",
		"transforms.qty.type": "org.apache.kafka.connect.transforms.Cast$Value", "transforms.qty.spec": "qty:int32",
		"transforms.offset.type": "org.apache.kafka.connect.transforms.InsertField$Value", "transforms.offset.offset.field": "kafka_offset"}
	w := e.start("w1")
	code, body := w.call(t, "POST", "/connectors", map[string]any{"name": "xf", "config": cfg})
	require.Equal(t, 201, code, "%v", body)
	eventually(t, "the second order written past the filtered one", func() bool {
		var n int
		return conn.QueryRow(context.Background(), `SELECT count(*) FROM orders WHERE id = 'o2'`).Scan(&n) == nil && n == 1
	})
	assert.Equal(t, map[string]string{"id": "text NO", "qty": "integer NO", "test": "boolean YES", "ship_city": "text YES",
		"ship_day": "date YES", "kafka_offset": "bigint YES"}, columnsOf(t, conn, "orders"))
	rows, err := conn.Query(context.Background(), `SELECT id || ' ' || qty || ' ' || coalesce(ship_city, '-') || ' ' || coalesce(ship_day::text, '-') || ' ' || kafka_offset FROM orders ORDER BY id`)
	require.NoError(t, err)
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	assert.Equal(t, []string{"o1 3 Oslo 2024-03-01 0", "o2 5 - - 2"}, got, "t1 filtered out")
}

// A source's Kafka Connect settings are checked too: exactly-once support
// and transaction boundaries as Causeway's sources have them (one Kafka
// transaction a poll) pass, others are refused by name.
func TestASourcesFrameworkSettingsAreChecked(t *testing.T) {
	t.Parallel()
	e := newFakeEnv(t)
	w := e.start("w1")
	base := map[string]string{"name": "web", "connector.class": "HttpSource", "http.topics": "events",
		"exactly.once.support": "required", "transaction.boundary": "poll", "topic.creation.default.replication.factor": "-1"}
	for _, tt := range []struct {
		key, value, want string
		more             map[string]string
	}{
		{"", "", "", nil},
		{"transaction.boundary", "connector", `only "poll" is served`, nil},
		{"exactly.once.support", "maybe", "is not one of requested, required", nil},
		{"value.converter", "org.apache.kafka.connect.json.JsonConverter", "", nil},
		{"value.converter", "org.apache.kafka.connect.storage.StringConverter", "sources write JSON or Avro", nil},
		{"value.converter", "io.confluent.connect.avro.AvroConverter", "have no schema, which Avro needs", map[string]string{"value.converter.schema.registry.url": "mock://http"}},
	} {
		cfg := maps.Clone(base)
		maps.Copy(cfg, tt.more)
		if tt.key != "" {
			cfg[tt.key] = tt.value
		}
		code, body := w.call(t, "PUT", "/connector-plugins/HttpSource/config/validate", cfg)
		require.Equal(t, 200, code, "%v", body)
		if tt.want == "" {
			assert.EqualValues(t, 0, body.(map[string]any)["error_count"], "%v", body)
			continue
		}
		assert.EqualValues(t, 1, body.(map[string]any)["error_count"], tt.key)
		assert.Contains(t, fmt.Sprint(body), tt.want, tt.key)
	}
}

// With a JDBC sink configuration's retry settings, a database that
// restarts under the sink costs no record and no failure: the commits
// that fail meanwhile are tried again, retry.backoff.ms apart.
func TestAJDBCSinkConfigRidesOutADatabaseRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	own, err := pgtest.Start(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = own.Stop() })
	db, err := own.CreateDatabase(ctx, "restart")
	require.NoError(t, err)
	e := newFakeEnv(t)
	e.topics(1, "orders")
	cfg := map[string]string{"connector.class": connectworker.JDBCSinkClass, "topics": "orders", "connection.url": db,
		"auto.create": "true", "pk.mode": "record_key", "pk.fields": "id", "insert.mode": "upsert", "max.retries": "40", "retry.backoff.ms": "250",
		"key.converter": "org.apache.kafka.connect.storage.StringConverter"}
	const schema = `{"type":"struct","fields":[{"field":"amount","type":"int32","optional":false}],"optional":false}`
	w := e.start("w1")
	code, body := w.call(t, "POST", "/connectors", map[string]any{"name": "jdbc", "config": cfg})
	require.Equal(t, 201, code, "%v", body)
	e.produce("orders", 0, "o00", envelope(schema, `{"amount": 0}`))
	rows := func() int {
		conn, err := pgx.Connect(ctx, db)
		if err != nil {
			return -1
		}
		defer conn.Close(ctx)
		var n int
		if conn.QueryRow(ctx, `SELECT count(*) FROM orders`).Scan(&n) != nil {
			return -1
		}
		return n
	}
	eventually(t, "the first order written", func() bool { return rows() == 1 })

	require.NoError(t, own.Pause(ctx))
	for j := 1; j <= 20; j++ {
		e.produce("orders", 0, fmt.Sprintf("o%02d", j), envelope(schema, fmt.Sprintf(`{"amount": %d}`, j)))
	}
	time.Sleep(2 * time.Second) // commits fail meanwhile
	require.NoError(t, own.Resume(ctx))
	eventually(t, "every order written after the restart", func() bool { return rows() == 21 })
	code, body = w.call(t, "GET", "/connectors/jdbc/status", nil)
	require.Equal(t, 200, code)
	assert.Equal(t, "RUNNING", body.(map[string]any)["tasks"].([]any)[0].(map[string]any)["state"], "no failure")
}
