package pgcdc_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/connect"
	"github.com/causeway-stream/causeway/connect/pgcdc"
	"github.com/causeway-stream/causeway/internal/pgtest"
)

var pg *pgtest.Cluster

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m, &pg, pgtest.Logical())) }

var dbs atomic.Int32

// newDB makes a database of its own for a test, with stmts run in it.
func newDB(t *testing.T, stmts ...string) (string, *pgx.Conn) {
	t.Helper()
	ctx := context.Background()
	name := fmt.Sprintf("cdc%d", dbs.Add(1))
	url, err := pg.CreateDatabase(ctx, name)
	require.NoError(t, err)
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) })
	for _, s := range stmts {
		_, err := conn.Exec(ctx, s)
		require.NoError(t, err, s)
	}
	return url, conn
}

// open opens a task of the source with the settings given over a
// database URL's.
func open(t *testing.T, url string, kv ...string) (connect.SourceTask, error) {
	t.Helper()
	// Slots are the cluster's: each database's own by default.
	db := url[strings.LastIndex(url, "/")+1 : strings.Index(url, "?")]
	values := map[string]string{pgcdc.URL: url, pgcdc.TopicPrefix: "shop", pgcdc.PollInterval: "200", pgcdc.SlotName: "slot_" + db}
	for i := 0; i+1 < len(kv); i += 2 {
		values[kv[i]] = kv[i+1]
	}
	cfg, err := pgcdc.Source{}.Config().Parse(values)
	require.NoError(t, err)
	return pgcdc.Source{}.Open(context.Background(), "cdc", cfg)
}

// event is a change event's value, read back.
type event struct {
	Before map[string]any `json:"before"`
	After  map[string]any `json:"after"`
	Op     string         `json:"op"`
	Source struct {
		Snapshot string `json:"snapshot"`
		Table    string `json:"table"`
		TxID     *int64 `json:"txId"`
		LSN      int64  `json:"lsn"`
	} `json:"source"`
	Transaction *struct {
		ID    string `json:"id"`
		Order int64  `json:"total_order"`
	} `json:"transaction"`
}

// pollUntil polls until records come (a transaction at least), and
// commits them as the runtime would.
func pollUntil(t *testing.T, task connect.SourceTask, off []byte) ([]connect.SourceRecord, []byte) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		recs, err := task.Poll(ctx, off)
		require.NoError(t, err)
		if len(recs) == 0 {
			continue
		}
		for _, r := range recs {
			if r.Offset != nil {
				off = r.Offset
			}
		}
		require.NoError(t, task.(connect.CommitListener).Committed(ctx, off))
		return recs, off
	}
	t.Fatal("no records came in 15 s")
	return nil, nil
}

// changes are the change events among recs (not BEGIN, END or
// tombstones), read.
func changes(t *testing.T, recs []connect.SourceRecord) []event {
	t.Helper()
	var out []event
	for _, r := range recs {
		if r.Value == nil || strings.HasSuffix(r.Topic, ".transaction") {
			continue
		}
		var e event
		require.NoError(t, json.Unmarshal(r.Value, &e), string(r.Value))
		out = append(out, e)
	}
	return out
}

const shopSchema = `CREATE TABLE orders (id int PRIMARY KEY, customer text NOT NULL, total numeric(10,2) NOT NULL);
CREATE TABLE lines (order_id int REFERENCES orders, line_no int, qty int, PRIMARY KEY (order_id, line_no))`

func TestASnapshotThenTheTransactionsAfterIt(t *testing.T) {
	url, db := newDB(t, shopSchema,
		`INSERT INTO orders VALUES (1, 'ann', 12.50), (2, 'bob', 3.00)`,
		`INSERT INTO lines VALUES (1, 1, 2), (1, 2, 1), (2, 1, 3)`)
	task, err := open(t, url)
	require.NoError(t, err)
	defer func() { require.NoError(t, task.Close()) }()

	recs, off := pollUntil(t, task, nil)
	snap := changes(t, recs)
	require.Len(t, snap, 5)
	for i, e := range snap {
		assert.Equal(t, "r", e.Op)
		want := "true"
		if i == len(snap)-1 {
			want = "last"
		}
		assert.Equal(t, want, e.Source.Snapshot)
	}
	assert.Equal(t, "lines", snap[0].Source.Table, "tables in the catalog's order")
	assert.Equal(t, map[string]any{"id": 1.0, "customer": "ann", "total": "BOI="}, snap[3].After, "12.50 as a Decimal of scale 2: 1250 = 0x04e2")
	require.Equal(t, "shop.transaction", recs[0].Topic)
	assert.Contains(t, string(recs[0].Value), `"status":"BEGIN"`)
	end := recs[len(recs)-1]
	assert.True(t, end.EndsTransaction)
	assert.Contains(t, string(end.Value), `"event_count":5`)
	for _, r := range recs {
		assert.Equal(t, recs[0].Transaction, r.Transaction, "the snapshot is one transaction")
	}

	// One transaction over two tables, then an update and a delete.
	ctx := context.Background()
	tx, err := db.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `INSERT INTO orders VALUES (3, 'cy', 7.25)`)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `INSERT INTO lines VALUES (3, 1, 1), (3, 2, 4)`)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	_, err = db.Exec(ctx, `UPDATE orders SET total = 8.00 WHERE id = 3`)
	require.NoError(t, err)
	_, err = db.Exec(ctx, `DELETE FROM lines WHERE order_id = 2`)
	require.NoError(t, err)

	var got []connect.SourceRecord
	for len(changes(t, got)) < 5 {
		recs, off = pollUntil(t, task, off)
		got = append(got, recs...)
	}
	ev := changes(t, got)
	require.Len(t, ev, 5)
	assert.Equal(t, []string{"c", "c", "c", "u", "d"}, []string{ev[0].Op, ev[1].Op, ev[2].Op, ev[3].Op, ev[4].Op})
	assert.Equal(t, ev[0].Transaction.ID, ev[2].Transaction.ID, "an order and its lines: one transaction")
	assert.NotEqual(t, ev[0].Transaction.ID, ev[3].Transaction.ID)
	assert.Equal(t, []int64{1, 2, 3}, []int64{ev[0].Transaction.Order, ev[1].Transaction.Order, ev[2].Transaction.Order})
	assert.Nil(t, ev[3].Before, "no before under REPLICA IDENTITY DEFAULT")
	assert.Equal(t, "AyA=", ev[3].After["total"], "8.00: 800 = 0x0320")
	assert.Equal(t, map[string]any{"order_id": 2.0, "line_no": 1.0, "qty": nil}, ev[4].Before, "a delete's before holds the key")
	var ends, tombstones int
	for _, r := range got {
		if r.EndsTransaction {
			ends++
		}
		if r.Value == nil {
			tombstones++
			assert.JSONEq(t, `{"order_id":2,"line_no":1}`, string(r.Key))
		}
	}
	assert.Equal(t, 3, ends)
	assert.Equal(t, 1, tombstones)
}

func TestARestartedTaskResumesAfterTheCommittedOffset(t *testing.T) {
	url, db := newDB(t, shopSchema)
	ctx := context.Background()
	task, err := open(t, url, pgcdc.SnapshotMode, "never", pgcdc.SlotName, "resume")
	require.NoError(t, err)
	recs, err := task.Poll(ctx, nil) // makes the slot, no snapshot
	require.NoError(t, err)
	require.Empty(t, recs)
	insert := func(id int) {
		_, err := db.Exec(ctx, fmt.Sprintf(`INSERT INTO orders VALUES (%d, 'c%d', 1)`, id, id))
		require.NoError(t, err)
	}
	insert(1)
	recs, committed := pollUntil(t, task, nil)
	require.Len(t, changes(t, recs), 1)
	// The next transaction is read but never committed: the task dies.
	insert(2)
	var read []event
	for len(read) == 0 {
		recs, err := task.Poll(ctx, committed)
		require.NoError(t, err)
		read = changes(t, recs)
	}
	require.NoError(t, task.Close())
	insert(3)

	again, err := open(t, url, pgcdc.SnapshotMode, "never", pgcdc.SlotName, "resume")
	require.NoError(t, err)
	defer func() { require.NoError(t, again.Close()) }()
	var ids []any
	for len(ids) < 2 {
		recs, err := again.Poll(ctx, committed)
		require.NoError(t, err)
		for _, e := range changes(t, recs) {
			ids = append(ids, e.After["id"])
		}
	}
	assert.Equal(t, []any{2.0, 3.0}, ids, "order 1 was committed: not again; 2 was not: again")
}

// slotsAndPublications lists what the server holds for a database: a
// refused setup must leave nothing behind.
func slotsAndPublications(t *testing.T, db *pgx.Conn) (slots, pubs []string) {
	t.Helper()
	ctx := context.Background()
	rows, err := db.Query(ctx, "SELECT slot_name FROM pg_replication_slots WHERE database = current_database()")
	require.NoError(t, err)
	slots, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	rows, err = db.Query(ctx, "SELECT pubname FROM pg_publication")
	require.NoError(t, err)
	pubs, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return slots, pubs
}

func TestBadSetupsAreRefusedByNameAndMakeNothing(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name   string
		stmts  []string
		kv     []string
		user   string
		want   error
		saying string
	}{
		{name: "a table without a primary key", stmts: []string{shopSchema, "CREATE TABLE notes (body text)"},
			want: pgcdc.ErrNoPrimaryKey, saying: "public.notes"},
		{name: "a keyless table left out", stmts: []string{shopSchema, "CREATE TABLE notes (body text)"},
			kv: []string{pgcdc.TableExclude, `public\.notes`}},
		{name: "a user without REPLICATION", stmts: []string{shopSchema, "DROP ROLE IF EXISTS clerk", "CREATE ROLE clerk LOGIN"},
			user: "clerk", want: pgcdc.ErrNoReplication, saying: `"clerk"`},
		{name: "no publication, autocreate disabled", stmts: []string{shopSchema},
			kv: []string{pgcdc.PublicationAutocreate, "disabled"}, want: pgcdc.ErrNoPublication, saying: "dbz_publication"},
		{name: "no table matches", stmts: []string{shopSchema},
			kv: []string{pgcdc.TableInclude, `public\.nothing`}, want: pgcdc.ErrNoTables},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			url, db := newDB(t, c.stmts...)
			if c.user != "" {
				url = strings.Replace(url, "postgres@", c.user+"@", 1)
			}
			task, err := open(t, url, c.kv...)
			if c.want == nil {
				require.NoError(t, err)
				require.NoError(t, task.Close())
				return
			}
			require.ErrorIs(t, err, c.want)
			assert.Contains(t, err.Error(), c.saying)
			slots, pubs := slotsAndPublications(t, db)
			assert.Empty(t, slots)
			assert.Empty(t, pubs)
		})
	}

	t.Run("a slot another client reads", func(t *testing.T) {
		url, _ := newDB(t, shopSchema)
		first, err := open(t, url, pgcdc.SlotName, "taken")
		require.NoError(t, err)
		defer func() { require.NoError(t, first.Close()) }()
		_, err = first.Poll(ctx, nil)
		require.NoError(t, err)
		_, err = open(t, url, pgcdc.SlotName, "taken", pgcdc.SlotMaxRetries, "2", pgcdc.SlotRetryDelay, "50")
		require.ErrorIs(t, err, pgcdc.ErrSlotInUse)
		assert.Contains(t, err.Error(), `"taken"`)
	})

	t.Run("a slot gone under an offset", func(t *testing.T) {
		url, db := newDB(t, shopSchema)
		task, err := open(t, url, pgcdc.SlotName, "gone")
		require.NoError(t, err)
		defer func() { require.NoError(t, task.Close()) }()
		_, err = task.Poll(ctx, []byte(`{"lsn":1234}`))
		require.ErrorIs(t, err, pgcdc.ErrSlotMissing)
		slots, _ := slotsAndPublications(t, db)
		assert.Empty(t, slots)
	})

	t.Run("wal_level replica", func(t *testing.T) {
		plain, err := pgtest.Start(ctx)
		require.NoError(t, err)
		defer func() { require.NoError(t, plain.Stop()) }()
		url, err := plain.CreateDatabase(ctx, "plain")
		require.NoError(t, err)
		conn, err := pgx.Connect(ctx, url)
		require.NoError(t, err)
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, shopSchema)
		require.NoError(t, err)
		_, err = open(t, url)
		require.ErrorIs(t, err, pgcdc.ErrWALLevel)
		assert.Contains(t, err.Error(), `"replica"`)
	})
}

// confirmedFlush is the slot's confirmed_flush_lsn, as a number.
func confirmedFlush(t *testing.T, db *pgx.Conn, slot string) int64 {
	t.Helper()
	var n int64
	require.NoError(t, db.QueryRow(context.Background(),
		"SELECT confirmed_flush_lsn - '0/0'::pg_lsn FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&n))
	return n
}

func TestTheSlotMovesOnWhileTheCapturedTablesAreQuiet(t *testing.T) {
	url, db := newDB(t, shopSchema, "CREATE TABLE busy (id serial PRIMARY KEY, n int)")
	ctx := context.Background()
	task, err := open(t, url, pgcdc.SlotName, "quiet", pgcdc.SnapshotMode, "never", pgcdc.TableInclude, `public\.orders,public\.lines`,
		pgcdc.PublicationAutocreate, "filtered", pgcdc.StatusInterval, "100", pgcdc.HeartbeatInterval, "300")
	require.NoError(t, err)
	defer func() { require.NoError(t, task.Close()) }()
	_, err = task.Poll(ctx, nil)
	require.NoError(t, err)
	before := confirmedFlush(t, db, "quiet")
	// WAL the slot reads past and never sends: a table outside the
	// publication.
	for i := range 50 {
		_, err := db.Exec(ctx, "INSERT INTO busy (n) VALUES ($1)", i)
		require.NoError(t, err)
	}
	var heartbeats int
	deadline := time.Now().Add(15 * time.Second)
	for confirmedFlush(t, db, "quiet") <= before && time.Now().Before(deadline) {
		recs, err := task.Poll(ctx, nil)
		require.NoError(t, err)
		for _, r := range recs {
			require.Equal(t, "__debezium-heartbeat.shop", r.Topic, "nothing captured changed")
			heartbeats++
			require.NoError(t, task.(connect.CommitListener).Committed(ctx, r.Offset))
		}
	}
	assert.Greater(t, confirmedFlush(t, db, "quiet"), before, "confirmed_flush_lsn moved past the quiet tables")
	assert.Positive(t, heartbeats)
}

func TestAPollEndsWhenItsContextDoesAndTheTaskGoesOn(t *testing.T) {
	url, db := newDB(t, shopSchema)
	ctx := context.Background()
	// A poll that would wait a minute for the log.
	task, err := open(t, url, pgcdc.SnapshotMode, "never", pgcdc.PollInterval, "60000")
	require.NoError(t, err)
	defer func() { require.NoError(t, task.Close()) }()
	_, err = task.Poll(ctx, nil)
	require.NoError(t, err)

	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	_, err = task.Poll(cctx, nil)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Less(t, time.Since(start), 10*time.Second, "the poll ended with its context, not at poll.interval.ms")

	// The next poll reads on.
	_, err = db.Exec(ctx, "INSERT INTO orders VALUES (1, 'ann', 5)")
	require.NoError(t, err)
	recs, _ := pollUntil(t, task, nil)
	got := changes(t, recs)
	require.Len(t, got, 1)
	assert.Equal(t, "c", got[0].Op)
}

func TestColumnTypesAsDebeziumWritesThem(t *testing.T) {
	const row = `CREATE TABLE kinds (id bigint PRIMARY KEY, b bool, s smallint, f float8, n numeric, d date, tm time(3), ts timestamp,
		tz timestamptz, raw bytea, u uuid, j jsonb, txt text);
		INSERT INTO kinds VALUES (7, true, -3, 1.5, -12.345, '1970-01-11', '01:02:03.456', '2024-01-02 03:04:05.123456',
		'2024-01-02 03:04:05.5+02', '\x00ff', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{"a": 1}', 'hi')`
	cases := []struct {
		name string
		kv   []string
		want map[string]any
	}{
		{name: "defaults (adaptive, precise)", want: map[string]any{"id": 7.0, "b": true, "s": -3.0, "f": 1.5,
			"n": map[string]any{"scale": 3.0, "value": "z8c="}, // -12345: 0xcfc7
			"d": 10.0, "tm": 3723456.0, "ts": 1704164645123456.0, "tz": "2024-01-02T01:04:05.5Z", "raw": "AP8=",
			"u": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "j": `{"a": 1}`, "txt": "hi"}},
		{name: "connect times, decimals as text", kv: []string{pgcdc.TimePrecision, "connect", pgcdc.DecimalHandling, "string"},
			want: map[string]any{"id": 7.0, "b": true, "s": -3.0, "f": 1.5, "n": "-12.345", "d": 10.0, "tm": 3723456.0,
				"ts": 1704164645123.0, "tz": "2024-01-02T01:04:05.5Z", "raw": "AP8=", "u": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
				"j": `{"a": 1}`, "txt": "hi"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			url, _ := newDB(t, row)
			task, err := open(t, url, c.kv...)
			require.NoError(t, err)
			defer func() { require.NoError(t, task.Close()) }()
			recs, _ := pollUntil(t, task, nil)
			ev := changes(t, recs)
			require.Len(t, ev, 1)
			assert.Equal(t, c.want, ev[0].After)
		})
	}
}

func TestTextOfAnyCharacterIsWrittenAsJSON(t *testing.T) {
	// Control characters, a character outside the basic plane that Go
	// does not print, the line separator, quotes and backslashes: in the
	// key, the row, and the names of the table and a column.
	const odd = "a\x1bb\x07c\x0bd\x00e\U000E0001f\u2028g\"h\\i<j>&k\u00e9"
	lit := strings.ReplaceAll(odd, "\x00", "") // text holds no NUL
	sqlText := "'a' || chr(27) || 'b' || chr(7) || 'c' || chr(11) || 'de' || chr(917505) || 'f' || chr(8232) || 'g\"h\\i<j>&k' || chr(233)"
	url, _ := newDB(t, `CREATE TABLE "we""ird\" (k text PRIMARY KEY, "v ""x""" text)`,
		`INSERT INTO "we""ird\" VALUES (`+sqlText+`, `+sqlText+`)`)
	task, err := open(t, url)
	require.NoError(t, err)
	defer func() { require.NoError(t, task.Close()) }()
	recs, _ := pollUntil(t, task, nil)
	var ev []connect.SourceRecord
	for _, r := range recs {
		if !strings.HasSuffix(r.Topic, ".transaction") {
			ev = append(ev, r)
		}
	}
	require.Len(t, ev, 1)
	assert.Equal(t, "shop.public.we_ird_", ev[0].Topic, "a name Kafka takes, as Debezium makes it")
	var key map[string]string
	require.NoError(t, json.Unmarshal(ev[0].Key, &key), "%q", ev[0].Key)
	assert.Equal(t, map[string]string{"k": lit}, key)
	var value struct {
		After  map[string]string `json:"after"`
		Source struct {
			Table string `json:"table"`
		} `json:"source"`
	}
	require.NoError(t, json.Unmarshal(ev[0].Value, &value), "%q", ev[0].Value)
	assert.Equal(t, map[string]string{"k": lit, `v "x"`: lit}, value.After)
	assert.Equal(t, `we"ird\`, value.Source.Table)
}

func TestReplicaIdentityToastKeyChangesAndTruncates(t *testing.T) {
	url, db := newDB(t, `CREATE TABLE docs (id int PRIMARY KEY, title text, body text);
		ALTER TABLE docs ALTER COLUMN body SET STORAGE EXTERNAL;
		CREATE TABLE tags (id int PRIMARY KEY, name text);
		ALTER TABLE tags REPLICA IDENTITY FULL`)
	ctx := context.Background()
	task, err := open(t, url, pgcdc.SnapshotMode, "never", pgcdc.SkippedOperations, "none")
	require.NoError(t, err)
	defer func() { require.NoError(t, task.Close()) }()
	_, err = task.Poll(ctx, nil)
	require.NoError(t, err)
	for _, s := range []string{
		`INSERT INTO docs VALUES (1, 'a', repeat('x', 10000))`,
		`UPDATE docs SET title = 'b' WHERE id = 1`, // body unchanged, TOASTed: not in the log
		`INSERT INTO tags VALUES (1, 'red')`,
		`UPDATE tags SET name = 'blue' WHERE id = 1`, // FULL: the whole row before
		`UPDATE tags SET id = 2 WHERE id = 1`,        // a new key: delete and create
		`TRUNCATE tags`,
	} {
		_, err := db.Exec(ctx, s)
		require.NoError(t, err, s)
	}
	var got []event
	var off []byte
	for len(got) < 7 {
		var recs []connect.SourceRecord
		recs, off = pollUntil(t, task, off)
		got = append(got, changes(t, recs)...)
	}
	require.Len(t, got, 7)
	ops := make([]string, len(got))
	for i, e := range got {
		ops[i] = e.Op
	}
	assert.Equal(t, []string{"c", "u", "c", "u", "d", "c", "t"}, ops)
	assert.Equal(t, "__debezium_unavailable_value", got[1].After["body"])
	assert.Equal(t, "b", got[1].After["title"])
	assert.Equal(t, map[string]any{"id": 1.0, "name": "red"}, got[3].Before)
	assert.Equal(t, map[string]any{"id": 1.0, "name": "blue"}, got[4].Before)
	assert.Equal(t, map[string]any{"id": 2.0, "name": "blue"}, got[5].After)
	assert.Equal(t, "tags", got[6].Source.Table)
}

// The task reports where it stands: what it handed to Kafka, what the
// slot confirmed, and the WAL the slot holds.
func TestTheTaskReportsItsPositionsAndTheSlotsLag(t *testing.T) {
	url, db := newDB(t, shopSchema)
	ctx := context.Background()
	task, err := open(t, url, pgcdc.SnapshotMode, "never", pgcdc.StatusInterval, "1")
	require.NoError(t, err)
	defer func() { require.NoError(t, task.Close()) }()
	_, err = task.Poll(ctx, nil)
	require.NoError(t, err)
	insert := func(id int) {
		_, err := db.Exec(ctx, fmt.Sprintf(`INSERT INTO orders VALUES (%d, 'c', 1)`, id))
		require.NoError(t, err)
	}
	insert(1)
	_, committed := pollUntil(t, task, nil)
	time.Sleep(5 * time.Millisecond) // the slot's lag is read again
	_, err = task.Poll(ctx, committed)
	require.NoError(t, err)
	rep := task.(connect.Reporter).Report()
	assert.Positive(t, rep[pgcdc.GaugeConfirmed])
	assert.Equal(t, rep[pgcdc.GaugeWritten], rep[pgcdc.GaugeConfirmed], "everything handed over is committed")
	assert.Contains(t, rep, pgcdc.GaugeRetainedWAL)
	assert.GreaterOrEqual(t, rep[pgcdc.GaugeRetainedWAL], rep[pgcdc.GaugeUnconfirmedWAL])
	// The status names the slot, and its confirmed position is the one
	// the server shows for the slot, once the server has heard it.
	slot := "slot_" + db.Config().Database
	var server string
	for deadline := time.Now().Add(10 * time.Second); ; {
		require.NoError(t, db.QueryRow(ctx, `SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&server))
		if server == task.(connect.Describer).Describe()[pgcdc.FactConfirmed] || time.Now().After(deadline) {
			break
		}
		_, err = task.Poll(ctx, committed)
		require.NoError(t, err)
	}
	facts := task.(connect.Describer).Describe()
	assert.Equal(t, slot, facts[pgcdc.FactSlot])
	assert.Equal(t, server, facts[pgcdc.FactConfirmed])
	assert.Equal(t, facts[pgcdc.FactConfirmed], facts[pgcdc.FactWritten])

	insert(2) // handed over, never committed
	for {
		recs, err := task.Poll(ctx, committed)
		require.NoError(t, err)
		if len(recs) > 0 {
			break
		}
	}
	rep = task.(connect.Reporter).Report()
	assert.Greater(t, rep[pgcdc.GaugeWritten], rep[pgcdc.GaugeConfirmed], "a transaction handed over and not committed")
	assert.GreaterOrEqual(t, rep[pgcdc.GaugeLag], 0.0)
	facts = task.(connect.Describer).Describe()
	written, err := pglogrepl.ParseLSN(facts[pgcdc.FactWritten])
	require.NoError(t, err)
	assert.Equal(t, rep[pgcdc.GaugeWritten], float64(written))
	assert.Equal(t, server, facts[pgcdc.FactConfirmed], "nothing more confirmed")
}
