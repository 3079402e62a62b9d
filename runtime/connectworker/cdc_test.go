package connectworker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/connect"
	"github.com/causeway-stream/causeway/connect/pgcdc"
	"github.com/causeway-stream/causeway/runtime/connectworker"
	"github.com/causeway-stream/causeway/runtime/internal/transport"
)

// cdcSchema is a shop whose every order is one transaction over three
// tables: the order, its lines, and a stock move per line.
const cdcSchema = `
CREATE TABLE orders (id int PRIMARY KEY, total int NOT NULL);
CREATE TABLE lines (order_id int REFERENCES orders, line_no int, item int NOT NULL, qty int NOT NULL, PRIMARY KEY (order_id, line_no));
CREATE TABLE stock (item int PRIMARY KEY, on_hand int NOT NULL, reserved int NOT NULL);
INSERT INTO stock SELECT i, 1000, 0 FROM generate_series(1, 5) i;`

// placeOrders places orders from..to-1, each with two lines and their
// stock moves, one transaction each.
func placeOrders(t *testing.T, conn *pgx.Conn, from, to int) {
	t.Helper()
	ctx := context.Background()
	for id := from; id < to; id++ {
		tx, err := conn.Begin(ctx)
		require.NoError(t, err)
		for _, s := range []string{
			fmt.Sprintf(`INSERT INTO orders VALUES (%d, %d)`, id, 3),
			fmt.Sprintf(`INSERT INTO lines VALUES (%d, 1, %d, 1), (%d, 2, %d, 2)`, id, id%5+1, id, (id+1)%5+1),
			fmt.Sprintf(`UPDATE stock SET on_hand = on_hand - 1, reserved = reserved + 1 WHERE item = %d`, id%5+1),
			fmt.Sprintf(`UPDATE stock SET on_hand = on_hand - 2, reserved = reserved + 2 WHERE item = %d`, (id+1)%5+1),
		} {
			_, err := tx.Exec(ctx, s)
			require.NoError(t, err, s)
		}
		require.NoError(t, tx.Commit(ctx))
	}
}

// withCDC gives a worker the change data capture source.
func withCDC(c *connectworker.Config) {
	c.Sources["PostgresCdcSource"] = pgcdc.Source{}
}

// cdcRecord is a record the capture wrote, as a reader sees it.
type cdcRecord struct {
	msg transport.Message
	// txn and end are the transaction the record belongs to and the one
	// it ends, from its headers.
	txn, end string
}

// cdcTopics reads what the capture wrote under prefix, by channel.
func (e *env) cdcTopics(prefix string) map[causal.Channel][]cdcRecord {
	e.t.Helper()
	out := map[causal.Channel][]cdcRecord{}
	for topic, n := range e.fake.Partitions() {
		if !strings.HasPrefix(topic, prefix+".") {
			continue
		}
		for p := range n {
			ch := causal.Channel{Topic: topic, Partition: p}
			for _, m := range e.fake.Records(ch) {
				r := cdcRecord{msg: m}
				for _, h := range m.Headers {
					switch h.Key {
					case connect.TxnHeader:
						r.txn = string(h.Value)
					case connect.TxnEndHeader:
						r.end = string(h.Value)
					}
				}
				out[ch] = append(out[ch], r)
			}
		}
	}
	return out
}

// endsBeforeTheirTransactions reads recs through a gate (or, gateOff,
// as they come), the transaction topic first and the others one record
// at a time, and counts the END events delivered before every change
// event of their transaction was: each END's own event_count, which
// Debezium's metadata gives, against the change events of its id
// delivered so far.
func endsBeforeTheirTransactions(t *testing.T, recs map[causal.Channel][]cdcRecord, ends map[causal.Channel]int64, txnTopic string, gateOff bool) (early, checked int) {
	t.Helper()
	var topics []string
	for ch := range recs {
		if !slices.Contains(topics, ch.Topic) {
			topics = append(topics, ch.Topic)
		}
	}
	opts := []causal.NodeOpt{causal.Inputs(topics...)}
	if gateOff {
		opts = append(opts, causal.DeliverOnArrival())
	}
	node, err := causal.NewNode[cdcRecord](opts...)
	require.NoError(t, err)
	var chs []causal.Channel
	for ch := range recs {
		require.NoError(t, node.Seed(ch, 0))
		chs = append(chs, ch)
	}
	// The transaction topic first: the data partitions lag behind it.
	slices.SortFunc(chs, func(a, b causal.Channel) int {
		if (a.Topic == txnTopic) != (b.Topic == txnTopic) {
			if a.Topic == txnTopic {
				return -1
			}
			return 1
		}
		return strings.Compare(a.String(), b.String())
	})
	delivered := map[string]int64{}
	drain := func() {
		for {
			d, ok := node.Next()
			if !ok {
				return
			}
			r := d.Payload
			switch {
			case r.end != "":
				var v struct {
					Payload struct {
						EventCount int64 `json:"event_count"`
					} `json:"payload"`
				}
				require.NoError(t, json.Unmarshal(r.msg.Value, &v))
				checked++
				if delivered[r.end] < v.Payload.EventCount {
					early++
				}
			case r.txn != "" && r.msg.Value != nil && r.msg.Topic != txnTopic:
				delivered[r.txn]++
			}
		}
	}
	feed := func(ch causal.Channel, r cdcRecord) {
		require.NoError(t, node.Advance(ch, r.msg.Offset)) // the markers before it
		header, present := []byte(nil), false
		for _, h := range r.msg.Headers {
			if h.Key == causal.HeaderKey {
				header, present = h.Value, true
			}
		}
		_, err := node.ReceiveHeader(ch, r.msg.Offset, header, present, r)
		require.NoError(t, err)
		drain()
	}
	first, rest := chs[0], chs[1:]
	for _, r := range recs[first] {
		feed(first, r)
	}
	require.NoError(t, node.Advance(first, ends[first]))
	for i := 0; ; i++ {
		more := false
		for _, ch := range rest {
			if i < len(recs[ch]) {
				feed(ch, recs[ch][i])
				more = true
			} else if i == len(recs[ch]) {
				require.NoError(t, node.Advance(ch, ends[ch]))
			}
		}
		drain()
		if !more {
			break
		}
	}
	return early, checked
}

// The capture writes a snapshot, then each source transaction in one
// Kafka transaction with its offset, across a stop and start of its
// worker, once; in Debezium's envelope with schemas; and its END events
// reach a reader with the gate only after every change event of their
// transaction, though the reader reads the transaction topic first.
// Without the gate (the negative control) they come early.
func TestChangeDataCaptureWritesEachTransactionOnceAndWhole(t *testing.T) {
	t.Parallel()
	e := newFakeEnv(t)
	src, conn := e.database("cdc", cdcSchema)
	db := src[strings.LastIndex(src, "/")+1 : strings.Index(src, "?")]
	cfg := map[string]string{"connector.class": connectworker.DebeziumPostgresClass, pgcdc.URL: src, pgcdc.TopicPrefix: "shop",
		pgcdc.SlotName: db, pgcdc.PollInterval: "100", "topic.creation.default.partitions": "3",
		"key.converter": "org.apache.kafka.connect.json.JsonConverter", "value.converter": "org.apache.kafka.connect.json.JsonConverter"}
	w1 := e.startWith("w1", withCDC)
	code, body := w1.call(t, "PUT", "/connectors/cdc/config", cfg)
	require.Contains(t, []int{200, 201}, code, "%v", body)
	ends := func() int {
		n := 0
		for _, rs := range e.cdcTopics("shop") {
			for _, r := range rs {
				if r.end != "" {
					n++
				}
			}
		}
		return n
	}
	eventually(t, "the snapshot", func() bool { return ends() == 1 })
	placeOrders(t, conn, 1, 21)
	eventually(t, "the snapshot and 20 transactions", func() bool { return ends() == 21 })
	require.NoError(t, w1.stop())

	placeOrders(t, conn, 21, 41)
	w2 := e.startWith("w2", withCDC)
	eventually(t, "40 transactions", func() bool { return ends() == 41 })
	metrics := w2.metrics(t)
	for _, gauge := range []string{pgcdc.GaugeRetainedWAL, pgcdc.GaugeConfirmed, pgcdc.GaugeLag} {
		assert.Contains(t, metrics, "causeway_connect_source_"+gauge+`{connector="cdc"}`, "the task's gauges are the worker's metrics")
	}
	// Its status names the slot and the positions written and confirmed:
	// past the last change written to Kafka (an order's commit comes after
	// its changes), and no further than the server has the slot (other
	// databases' WAL moves it on while the tables are quiet).
	var last pglogrepl.LSN
	for ch, rs := range e.cdcTopics("shop") {
		for _, r := range rs {
			var v struct {
				Payload struct {
					Source struct {
						LSN uint64 `json:"lsn"`
					} `json:"source"`
				} `json:"payload"`
			}
			if r.msg.Value != nil && ch.Topic != "shop.transaction" && json.Unmarshal(r.msg.Value, &v) == nil {
				last = max(last, pglogrepl.LSN(v.Payload.Source.LSN))
			}
		}
	}
	require.NotZero(t, last)
	var facts map[string]string
	var server string
	eventually(t, "the status to show the slot past the last change", func() bool {
		var st connectworker.ConnectorStateInfo
		code, body := w2.raw(t, "GET", "/connectors/cdc/status", nil)
		if code != 200 || json.Unmarshal([]byte(body), &st) != nil || len(st.Tasks) != 1 {
			return false
		}
		facts = st.Tasks[0].Facts
		require.NoError(t, conn.QueryRow(context.Background(), `SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1`, db).Scan(&server))
		confirmed, err := pglogrepl.ParseLSN(facts[pgcdc.FactConfirmed])
		return err == nil && confirmed > last
	})
	assert.Equal(t, db, facts[pgcdc.FactSlot])
	confirmed, err := pglogrepl.ParseLSN(facts[pgcdc.FactConfirmed])
	require.NoError(t, err)
	written, err := pglogrepl.ParseLSN(facts[pgcdc.FactWritten])
	require.NoError(t, err)
	onServer, err := pglogrepl.ParseLSN(server)
	require.NoError(t, err)
	assert.Greater(t, written, last)
	assert.LessOrEqual(t, confirmed, written, "only what was written is confirmed")
	eventually(t, "the server to have the slot where the status says", func() bool {
		require.NoError(t, conn.QueryRow(context.Background(), `SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1`, db).Scan(&server))
		onServer, err = pglogrepl.ParseLSN(server)
		return err == nil && onServer >= confirmed
	})
	require.NoError(t, w2.stop())

	recs := e.cdcTopics("shop")
	ops := map[string]int{}
	seen := map[string]bool{}
	for ch, rs := range recs {
		for _, r := range rs {
			if ch.Topic == "shop.transaction" {
				continue
			}
			if r.msg.Value == nil {
				continue
			}
			var v struct {
				Schema  connect.Schema `json:"schema"`
				Payload struct {
					Op     string         `json:"op"`
					After  map[string]any `json:"after"`
					Source struct {
						LSN int64 `json:"lsn"`
					} `json:"source"`
				} `json:"payload"`
			}
			require.NoError(t, json.Unmarshal(r.msg.Value, &v), string(r.msg.Value))
			assert.Equal(t, ch.Topic+".Envelope", v.Schema.Name)
			assert.NotEmpty(t, r.txn, "a change event names its transaction")
			ops[ch.Topic+" "+v.Payload.Op]++
			id := fmt.Sprint(ch.Topic, v.Payload.Op, v.Payload.After, v.Payload.Source.LSN)
			assert.False(t, seen[id], "written twice: %s", id)
			seen[id] = true
		}
	}
	assert.Equal(t, map[string]int{"shop.public.stock r": 5, "shop.public.orders c": 40, "shop.public.lines c": 80, "shop.public.stock u": 80}, ops)

	endOf := map[causal.Channel]int64{}
	for ch := range recs {
		endOf[ch] = e.fake.End(ch)
	}
	early, checked := endsBeforeTheirTransactions(t, recs, endOf, "shop.transaction", false)
	assert.Equal(t, 41, checked)
	assert.Zero(t, early, "with the gate, no END before its transaction")
	early, _ = endsBeforeTheirTransactions(t, recs, endOf, "shop.transaction", true)
	assert.Positive(t, early, "without the gate, ENDs read first come before their transactions")
}

// targetSchema is cdcSchema's tables in the target, without the foreign
// key: a transaction's rows come in any order within it.
const targetSchema = `
CREATE TABLE orders (id int PRIMARY KEY, total int NOT NULL);
CREATE TABLE lines (order_id int, line_no int, item int NOT NULL, qty int NOT NULL, PRIMARY KEY (order_id, line_no));
CREATE TABLE stock (item int PRIMARY KEY, on_hand int NOT NULL, reserved int NOT NULL);`

// tornReads counts what breaks the shop's invariants in the target now:
// an order whose lines do not add up to its total, a line without its
// order, a stock row whose on hand and reserved do not add up to 1000,
// and stock reserved for other than the orders there are (3 each).
func tornReads(ctx context.Context, conn *pgx.Conn) (int, error) {
	var n int
	err := conn.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM orders o WHERE o.total <> coalesce((SELECT sum(qty) FROM lines l WHERE l.order_id = o.id), 0))
		+ (SELECT count(*) FROM lines l WHERE NOT EXISTS (SELECT 1 FROM orders o WHERE o.id = l.order_id))
		+ (SELECT count(*) FROM stock WHERE on_hand + reserved <> 1000)
		+ CASE WHEN (SELECT coalesce(sum(reserved), 0) FROM stock) <> 3 * (SELECT count(*) FROM orders) THEN 1 ELSE 0 END`).Scan(&n)
	return n, err
}

// Debezium-style events from the capture, written by the causal sink as
// Debezium's users configure a sink (ExtractNewRecordState, a
// RegexRouter to the table's name) with the transaction topic: a reader
// of the target that checks the shop's invariants every 10 ms while
// orders flow sees none broken, and every order lands.
func TestSourceTransactionsLandWholeInTheTarget(t *testing.T) {
	t.Parallel()
	jsonConverter := "org.apache.kafka.connect.json.JsonConverter"
	transactionsLandWhole(t, newFakeEnv(t), map[string]string{"key.converter": jsonConverter, "value.converter": jsonConverter})
}

// transactionsLandWhole captures orders into Kafka and writes them to a
// target with the causal sink, both with the converters conv, and checks
// that no read of the target sees a part of a transaction.
func transactionsLandWhole(t *testing.T, e *env, conv map[string]string) {
	src, conn := e.database("src", cdcSchema)
	dst, target := e.database("dst", targetSchema)
	db := src[strings.LastIndex(src, "/")+1 : strings.Index(src, "?")]
	w := e.startWith("w1", withCDC)
	capture := map[string]string{"connector.class": "PostgresCdcSource", pgcdc.URL: src,
		pgcdc.TopicPrefix: "shop", pgcdc.SlotName: db, pgcdc.PollInterval: "50", "topic.creation.default.partitions": "2"}
	maps.Copy(capture, conv)
	code, body := w.call(t, "PUT", "/connectors/cdc/config", capture)
	require.Contains(t, []int{200, 201}, code, "%v", body)
	topics := "shop.public.orders,shop.public.lines,shop.public.stock,shop.transaction"
	e.topics(2, strings.Split(topics, ",")...)
	sink := map[string]string{"connector.class": "PostgresSink", "connection.url": dst,
		"topics": topics, "causal.transaction.topic": "shop.transaction",
		"insert.mode": "upsert", "pk.mode": "record_key", "delete.enabled": "true",
		"transforms": "unwrap,route", "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState",
		"transforms.unwrap.delete.handling.mode": "none",
		"transforms.route.type":                  "org.apache.kafka.connect.transforms.RegexRouter",
		"transforms.route.regex":                 `[^.]+\.[^.]+\.([^.]+)`, "transforms.route.replacement": "$1"}
	maps.Copy(sink, conv)
	code, body = w.call(t, "PUT", "/connectors/sink/config", sink)
	require.Contains(t, []int{200, 201}, code, "%v", body)

	ctx := context.Background()
	reader, err := pgx.Connect(ctx, dst)
	require.NoError(t, err)
	defer reader.Close(ctx)
	stop := make(chan struct{})
	torn, reads := 0, 0
	var readErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			n, err := tornReads(ctx, reader)
			if err != nil {
				readErr = err
				return
			}
			torn += n
			reads++
		}
	}()
	placeOrders(t, conn, 1, 61)
	eventually(t, "60 orders in the target", func() bool { return count(t, target, "lines") == 120 && count(t, target, "orders") == 60 })
	close(stop)
	<-done
	require.NoError(t, readErr)
	t.Logf("%d reads of the target, %d torn", reads, torn)
	assert.Positive(t, reads)
	assert.Zero(t, torn, "no read of the target saw a part of a transaction (%d reads)", reads)
	n, err := tornReads(ctx, target)
	require.NoError(t, err)
	assert.Zero(t, n)
}
