package postgres

import (
	"context"
	"fmt"
	"hash/fnv"
	"maps"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/connect"
	"github.com/causeway-stream/causeway/internal/pgtest"
)

// pg is the Postgres server this package's tests share, each test with a
// database of its own.
var pg *pgtest.Cluster

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m, &pg)) }

// databases counts the databases made, to name each apart.
var databases atomic.Int32

// openSink makes a database with schema in it and opens a task of the
// sink on it with settings (the URL added), for topic.
func openSink(t *testing.T, schema string, settings map[string]string, topic string) (*task, *pgx.Conn) {
	t.Helper()
	ctx := context.Background()
	h := fnv.New32a()
	h.Write([]byte(t.Name())) //nolint:errcheck // a hash does not fail
	url, err := pg.CreateDatabase(ctx, fmt.Sprintf("s%08x_%d", h.Sum32(), databases.Add(1)))
	require.NoError(t, err)
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) })
	_, err = conn.Exec(ctx, schema)
	require.NoError(t, err)
	values := maps.Clone(settings)
	values[ConnectionURL] = url
	cfg, err := Sink{}.Config().Parse(values)
	require.NoError(t, err)
	st, err := Sink{}.Open(ctx, "c", []string{topic}, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return st.(*task), conn
}

// put writes recs and commits them, and returns what was refused.
func put(t *testing.T, tk *task, recs ...connect.Record) []connect.Rejected {
	t.Helper()
	rej, err := tk.Put(context.Background(), recs)
	require.NoError(t, err)
	require.NoError(t, tk.Commit(context.Background(), nil))
	return rej
}

// rowsOf is query's rows, each as its columns' texts joined by commas.
func rowsOf(t *testing.T, conn *pgx.Conn, query string) []string {
	t.Helper()
	rows, err := conn.Query(context.Background(), query)
	require.NoError(t, err)
	var out []string
	for rows.Next() {
		vals, err := rows.Values()
		require.NoError(t, err)
		out = append(out, strings.TrimSpace(fmt.Sprintln(vals...)))
	}
	require.NoError(t, rows.Err())
	return out
}

var itemSchema = &connect.Schema{Type: "struct", Fields: []connect.Schema{
	{Field: "sku", Type: "string"}, {Field: "qty", Type: "int32", Optional: true}, {Field: "note", Type: "string", Optional: true}}}

// pk.mode kafka keys each row by the record's topic, partition and offset,
// in columns auto.create makes NOT NULL; pk.fields renames them.
func TestKafkaPrimaryKeysAreTheRecordsCoordinates(t *testing.T) {
	tk, conn := openSink(t, "SELECT 1", map[string]string{PKMode: "kafka", PKFields: "t,p,o", AutoCreate: "true"}, "items")
	put(t, tk, connect.Record{Topic: "items", Partition: 2, Offset: 7, Value: []byte(`{"sku":"a","qty":1}`), ValueSchema: itemSchema},
		connect.Record{Topic: "items", Partition: 2, Offset: 8, Value: []byte(`{"sku":"a","qty":2}`), ValueSchema: itemSchema})
	assert.Equal(t, []string{"items 2 7 a 1 <nil>", "items 2 8 a 2 <nil>"}, rowsOf(t, conn, `SELECT t, p, o, sku, qty, note FROM items ORDER BY o`))
	var pk string
	require.NoError(t, conn.QueryRow(context.Background(), `SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = 'items'::regclass AND contype = 'p'`).Scan(&pk))
	assert.Equal(t, "PRIMARY KEY (t, p, o)", pk)
}

// insert.mode update changes the rows that exist, by the value's key
// fields, and leaves out the records of rows that do not, as Confluent's
// sink does; fields.whitelist writes only the fields it names besides the
// key's.
func TestUpdateModeAndTheFieldsWhitelist(t *testing.T) {
	tk, conn := openSink(t, "CREATE TABLE items (sku text PRIMARY KEY, qty int, note text); INSERT INTO items VALUES ('a', 1, 'old');",
		map[string]string{PKMode: "record_value", PKFields: "sku", InsertMode: "update", FieldsWhitelist: "qty"}, "items")
	rej := put(t, tk, connect.Record{Topic: "items", Value: []byte(`{"sku":"a","qty":5,"note":"new","extra":1}`)},
		connect.Record{Topic: "items", Offset: 1, Value: []byte(`{"sku":"b","qty":9}`)})
	assert.Empty(t, rej)
	assert.Equal(t, []string{"a 5 old"}, rowsOf(t, conn, `SELECT sku, qty, note FROM items ORDER BY sku`),
		"a's qty updated, its note not whitelisted, extra not a column; b not there to update")
}

// With trim.sensitive.log, a refused row's error names the SQLSTATE and
// the constraint, not the database's message quoting the row's values.
func TestTrimSensitiveLogLeavesTheValuesOut(t *testing.T) {
	schema := "CREATE TABLE items (sku text PRIMARY KEY, qty int CHECK (qty > 0), note text)"
	rec := connect.Record{Topic: "items", Value: []byte(`{"sku":"secret-sku","qty":-1}`)}
	for _, trim := range []bool{false, true} {
		t.Run(fmt.Sprint(trim), func(t *testing.T) {
			tk, _ := openSink(t, schema, map[string]string{TrimSensitiveLog: fmt.Sprint(trim)}, "items")
			rej := put(t, tk, rec)
			require.Len(t, rej, 1)
			assert.Contains(t, rej[0].Err.Error(), "items_qty_check")
			if trim {
				assert.NotContains(t, rej[0].Err.Error(), "secret-sku")
				assert.Contains(t, rej[0].Err.Error(), "23514")
			}
		})
	}
}

// auto.evolve adds an optional field's column, and refuses, naming the
// field, one that is neither optional nor has a default: the task fails,
// as Confluent's does. auto.create needs a schema.
func TestAutoEvolveAndAutoCreateSayWhatTheyCannotDo(t *testing.T) {
	tk, conn := openSink(t, "CREATE TABLE items (sku text PRIMARY KEY)", map[string]string{AutoEvolve: "true"}, "items")
	put(t, tk, connect.Record{Topic: "items", Value: []byte(`{"sku":"a","qty":3}`), ValueSchema: itemSchema})
	assert.Equal(t, []string{"a 3 <nil>"}, rowsOf(t, conn, `SELECT sku, qty, note FROM items`))
	required := &connect.Schema{Type: "struct", Fields: []connect.Schema{{Field: "sku", Type: "string"}, {Field: "size", Type: "int32"}}}
	_, err := tk.Put(context.Background(), []connect.Record{{Topic: "items", Offset: 4, Value: []byte(`{"sku":"b","size":1}`), ValueSchema: required}})
	assert.ErrorContains(t, err, `items/0@4: "items" lacks the column of field "size"`)
	require.NoError(t, tk.Abort(context.Background()))

	tk, _ = openSink(t, "SELECT 1", map[string]string{AutoCreate: "true", PositionsTable: "p2"}, "things")
	_, err = tk.Put(context.Background(), []connect.Record{{Topic: "things", Value: []byte(`{"sku":"a"}`)}})
	assert.ErrorIs(t, err, errNoSchema)
}

// A table auto.create made in a transaction that was rolled back is gone:
// the task forgets it and makes it again with the next records.
func TestATableMadeInAnAbortedTransactionIsMadeAgain(t *testing.T) {
	tk, conn := openSink(t, "SELECT 1", map[string]string{AutoCreate: "true"}, "items")
	ctx := context.Background()
	rec := connect.Record{Topic: "items", Value: []byte(`{"sku":"a"}`), ValueSchema: itemSchema}
	_, err := tk.Put(ctx, []connect.Record{rec})
	require.NoError(t, err)
	require.NoError(t, tk.Abort(ctx))
	assert.Equal(t, []string{"<nil>"}, rowsOf(t, conn, `SELECT to_regclass('items')::text`), "rolled back with the rows")
	put(t, tk, rec)
	assert.Equal(t, []string{"a"}, rowsOf(t, conn, `SELECT sku FROM items`))
}

// A view is written to only when table.types allows views.
func TestTableTypesSayWhatMayBeWritten(t *testing.T) {
	schema := "CREATE TABLE base (sku text PRIMARY KEY); CREATE VIEW items AS SELECT * FROM base"
	ctx := context.Background()
	url, err := pg.CreateDatabase(ctx, "tabletypes")
	require.NoError(t, err)
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, schema)
	require.NoError(t, err)
	for _, types := range []string{"TABLE", "TABLE,VIEW"} {
		cfg, err := Sink{}.Config().Parse(map[string]string{ConnectionURL: url, TableTypes: types})
		require.NoError(t, err)
		st, err := Sink{}.Open(ctx, "c", []string{"items"}, cfg)
		if types == "TABLE" {
			assert.ErrorContains(t, err, `"items" is a VIEW, and table.types does not allow writing to one`)
			continue
		}
		require.NoError(t, err)
		put(t, st.(*task), connect.Record{Topic: "items", Value: []byte(`{"sku":"v"}`)})
		require.NoError(t, st.Close())
	}
	assert.Equal(t, []string{"v"}, rowsOf(t, conn, `SELECT sku FROM base`))
}

// Positions changed while a task still runs (an operator's offsets call
// on a connector whose task has not stopped yet) fence that task: its
// next commit, which moves the position from where it read it, fails with
// connect.ErrFenced and writes nothing.
func TestSetPositionsFenceATaskStillWriting(t *testing.T) {
	tk, conn := openSink(t, "CREATE TABLE items (sku text PRIMARY KEY)", map[string]string{}, "items")
	ctx := context.Background()
	ch := causal.Channel{Topic: "items"}
	_, err := tk.Put(ctx, []connect.Record{{Topic: "items", Value: []byte(`{"sku":"a"}`)}})
	require.NoError(t, err)
	require.NoError(t, tk.Commit(ctx, []connect.Move{{Channel: ch, From: -1, To: 1}}))

	require.NoError(t, tk.SetPositions(ctx, map[causal.Channel]int64{ch: 0}))
	_, err = tk.Put(ctx, []connect.Record{{Topic: "items", Offset: 1, Value: []byte(`{"sku":"b"}`)}})
	require.NoError(t, err)
	assert.ErrorIs(t, tk.Commit(ctx, []connect.Move{{Channel: ch, From: 1, To: 2}}), connect.ErrFenced)
	assert.Equal(t, []string{"a"}, rowsOf(t, conn, `SELECT sku FROM items`), "the fenced commit wrote nothing")

	require.NoError(t, tk.ResetPositions(ctx))
	positions, err := tk.Positions(ctx)
	require.NoError(t, err)
	assert.Empty(t, positions)
}

// The sink reads Debezium's change events as Debezium's own JDBC sink
// does, without ExtractNewRecordState: a create, read or update writes
// its after; a delete deletes its key; a truncate is refused; a record
// that is not an event is written as it is.
func TestDebeziumChangeEventsAreReadAsTheirRows(t *testing.T) {
	tk, conn := openSink(t, `CREATE TABLE items (sku text PRIMARY KEY, qty int, note text)`,
		map[string]string{PKMode: "record_key", InsertMode: "upsert", DeleteEnabled: "true", TableNameFormat: "items"}, "shop.public.items")
	after := *itemSchema
	after.Field, after.Optional = "after", true
	before := after
	before.Field = "before"
	envelope := &connect.Schema{Type: "struct", Name: "shop.public.items.Envelope", Fields: []connect.Schema{before, after,
		{Field: "source", Type: "struct", Fields: []connect.Schema{{Field: "lsn", Type: "int64"}}}, {Field: "op", Type: "string"}}}
	keySchema := &connect.Schema{Type: "struct", Fields: []connect.Schema{{Field: "sku", Type: "string"}}}
	event := func(offset int64, sku, op, row string) connect.Record {
		return connect.Record{Topic: "shop.public.items", Offset: offset, Key: []byte(`{"sku":"` + sku + `"}`), KeySchema: keySchema,
			Value: []byte(`{"before":null,"after":` + row + `,"source":{"lsn":1},"op":"` + op + `"}`), ValueSchema: envelope}
	}
	rej := put(t, tk,
		event(0, "a", "r", `{"sku":"a","qty":1,"note":null}`),
		event(1, "b", "c", `{"sku":"b","qty":2,"note":"x"}`),
		event(2, "a", "u", `{"sku":"a","qty":5,"note":"y"}`),
		event(3, "b", "d", `null`),
		event(4, "c", "t", `null`),
		// Schemaless, as with value.converter.schemas.enable=false.
		connect.Record{Topic: "shop.public.items", Offset: 5, Key: []byte(`{"sku":"d"}`),
			Value: []byte(`{"before":null,"after":{"sku":"d","qty":7},"source":{},"op":"c"}`)},
	)
	require.Len(t, rej, 1)
	assert.ErrorIs(t, rej[0].Err, ErrTruncateEvent)
	assert.Equal(t, []string{"a 5 y", "d 7 <nil>"}, rowsOf(t, conn, `SELECT sku, qty, note FROM items ORDER BY sku`))
}
