// Package postgres is a sink plugin that writes Kafka topics into
// PostgreSQL tables, one table per topic, through pgx: insert, upsert,
// update, and delete on a tombstone. Rows and the positions of the
// channels written go into one Postgres transaction, in a positions table
// of the sink's own, so that a task resumes exactly where the database
// says it stopped. It also holds a query-based source (Source).
//
// The sink's settings are Confluent's JDBC sink's, with their meanings
// (config.go): a JDBC or libpq connection, insert and primary-key modes,
// fields.whitelist, table naming and types, db.timezone, auto.create and
// auto.evolve from the record's Connect schema (schema.go, ddl.go).
// Record values are JSON objects whose fields name columns (Postgres
// converts each to its column's type, as json_populate_record does);
// with a schema, Connect's logical types are written as what they stand
// for. Keys are JSON objects, or a single value for a one-column key.
package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/connect"
	"github.com/causeway-stream/causeway/connect/internal/jsonscan"
	"github.com/causeway-stream/causeway/connect/internal/jsontext"
)

// Sink is the Postgres sink plugin.
type Sink struct{}

var _ connect.Sink = Sink{}

// identifier splits a possibly schema-qualified name.
func identifier(name string) pgx.Identifier { return pgx.Identifier(strings.Split(name, ".")) }

// Open connects to the database, makes the positions table when missing,
// and checks that the table of every topic exists.
func (Sink) Open(ctx context.Context, connector string, topics []string, cfg connect.Config) (connect.SinkTask, error) {
	s, err := parse(cfg)
	if err != nil {
		return nil, err
	}
	pool, err := connectPool(ctx, cfg)
	if err != nil {
		return nil, err
	}
	t := &task{connector: connector, s: s, pool: pool, tables: map[string]*table{}, plans: map[*connect.Schema][]fieldPlan{}, stale: map[string]bool{},
		evolved: map[evolved]bool{}}
	if err := t.prepare(ctx, topics); err != nil {
		pool.Close()
		return nil, err
	}
	return t, nil
}

// task is one task of the sink.
type task struct {
	connector string
	s         settings
	pool      *pgxpool.Pool
	// tables by topic.
	tables map[string]*table
	// tx is the open transaction, nil when none.
	tx pgx.Tx
	// copyBuf is the buffer COPY's rows are written into, kept.
	copyBuf []byte
	// plans caches how the values of each schema are rendered.
	plans map[*connect.Schema][]fieldPlan
	// changed are the topics whose tables the open transaction made or
	// changed; stale those an aborted one did, to be read again.
	changed []string
	stale   map[string]bool
	// evolved are the tables and schemas auto.evolve has checked.
	evolved map[evolved]bool
}

// table is where one topic goes.
type table struct {
	name pgx.Identifier
	// columns the table has, and which make its primary key.
	columns map[string]bool
	pk      []string
	// sql caches inserts by their columns (see insertSQL).
	sql map[string]string
}

func (t *task) prepare(ctx context.Context, topics []string) error {
	if err := t.makePositions(ctx); err != nil {
		return fmt.Errorf("make the positions table %s: %w", t.s.positions.Sanitize(), err)
	}
	for _, topic := range topics {
		tb, err := t.describeTopic(ctx, t.pool, topic)
		var pe *pgconn.PgError
		if errors.Is(err, errMissing) || (errors.As(err, &pe) && pe.Code == "0A000") {
			// No table has its name here (or its name names another
			// database, 0A000 feature_not_supported:
			// Debezium's <prefix>.<schema>.<table>). Its records
			// may go to another table (a transform renames their topic):
			// refused when one comes, if not.
			continue
		}
		if err != nil {
			return err
		}
		t.tables[topic] = tb
	}
	return nil
}

// makePositions makes the positions table when it is missing. Tasks that
// start together would race in CREATE TABLE IF NOT EXISTS, which Postgres
// does not serialise (one fails on its catalog's unique index): an
// advisory lock on the table's name makes them take turns.
func (t *task) makePositions(ctx context.Context) error {
	tx, err := t.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit it does nothing
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext($1))`, t.s.positions.Sanitize()); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+t.s.positions.Sanitize()+` (
		connector text NOT NULL, topic text NOT NULL, partition int NOT NULL, next_offset bigint NOT NULL,
		PRIMARY KEY (connector, topic, partition))`); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// errMissing: the table does not exist.
var errMissing = errors.New("does not exist")

// describe reads a table's columns and primary key.
func (t *task) describe(ctx context.Context, q querier, name pgx.Identifier) (*table, error) {
	var oid uint32
	var kind string
	err := q.QueryRow(ctx, `SELECT c.oid, c.relkind::text FROM pg_class c WHERE c.oid = to_regclass($1)`, name.Sanitize()).Scan(&oid, &kind)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, errMissing
	case err != nil:
		return nil, err
	case !slices.Contains(t.s.kinds, kind):
		what, known := map[string]string{"r": "TABLE", "p": "PARTITIONED_TABLE", "v": "VIEW"}[kind]
		if !known {
			what = "relation of relkind " + kind
		}
		return nil, fmt.Errorf("%s is a %s, and table.types does not allow writing to one", name.Sanitize(), what)
	}
	rows, err := q.Query(ctx, `SELECT a.attname, coalesce(a.attnum = ANY(i.indkey), false)
		FROM pg_attribute a LEFT JOIN pg_index i ON i.indrelid = a.attrelid AND i.indisprimary
		WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`, oid)
	if err != nil {
		return nil, err
	}
	tb := &table{name: name, columns: map[string]bool{}, sql: map[string]string{}}
	for rows.Next() {
		var col string
		var pk bool
		if err := rows.Scan(&col, &pk); err != nil {
			return nil, err
		}
		tb.columns[col] = true
		if pk {
			tb.pk = append(tb.pk, col)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(t.s.pkFields) > 0 {
		tb.pk = t.s.pkFields
	}
	return tb, nil
}

// Positions reads every committed position of the connector.
func (t *task) Positions(ctx context.Context) (map[causal.Channel]int64, error) {
	out, err := t.positionsOf(ctx)
	return out, transient(err)
}

func (t *task) positionsOf(ctx context.Context) (map[causal.Channel]int64, error) {
	rows, err := t.pool.Query(ctx, `SELECT topic, partition, next_offset FROM `+t.s.positions.Sanitize()+` WHERE connector = $1`, t.connector)
	if err != nil {
		return nil, fmt.Errorf("read positions: %w", err)
	}
	out := map[causal.Channel]int64{}
	for rows.Next() {
		var ch causal.Channel
		var next int64
		if err := rows.Scan(&ch.Topic, &ch.Partition, &next); err != nil {
			return nil, fmt.Errorf("read positions: %w", err)
		}
		out[ch] = next
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read positions: %w", err)
	}
	return out, nil
}

// statement is one record's write. An insert also keeps its table, its
// columns and its row, so that a run of inserts into the same columns
// goes to the database as one statement (see group).
type statement struct {
	sql  string
	args []any
	tb   *table
	cols string // the columns, comma-separated: what a run shares
	// insert marks an insert (or upsert) of value, with the key's
	// columns; its doc and sql are made only when a statement writes it
	// (see materialize), not when COPY does.
	insert bool
	value  []byte
	key    map[string]json.RawMessage
	doc    []byte // the row, as JSON, once materialized
	// run, when set, are inserts COPY writes together (see group).
	run []statement
}

// Put writes recs in order into the open transaction. Each batch.size of
// them goes in one round trip under a savepoint; when the database refuses
// one, the batch is rolled back to the savepoint and written again one
// record at a time, each under its own savepoint, so that only the refused
// records are left out.
func (t *task) Put(ctx context.Context, recs []connect.Record) ([]connect.Rejected, error) {
	rejected, err := t.put(ctx, recs)
	return rejected, transient(err)
}

func (t *task) put(ctx context.Context, recs []connect.Record) ([]connect.Rejected, error) {
	if t.tx == nil {
		tx, err := t.pool.Begin(ctx)
		if err != nil {
			return nil, fmt.Errorf("begin: %w", err)
		}
		t.tx = tx
	}
	var rejected []connect.Rejected
	for len(recs) > 0 {
		n := min(len(recs), t.s.batch)
		rej, err := t.putBatch(ctx, recs[:n])
		if err != nil {
			return nil, err
		}
		rejected = append(rejected, rej...)
		recs = recs[n:]
	}
	return rejected, nil
}

func (t *task) putBatch(ctx context.Context, recs []connect.Record) ([]connect.Rejected, error) {
	recs, rejected := rowsOfEvents(recs)
	if err := t.ensureTables(ctx, recs); err != nil {
		return nil, err
	}
	stmts := make([]statement, 0, len(recs))
	ok := make([]connect.Record, 0, len(recs))
	for _, r := range recs {
		st, err := t.statementOf(r)
		if err != nil {
			rejected = append(rejected, connect.Rejected{Record: r, Err: err})
			continue
		}
		stmts, ok = append(stmts, st), append(ok, r)
	}
	if len(stmts) == 0 {
		return rejected, nil
	}
	if _, err := t.tx.Exec(ctx, "SAVEPOINT causeway_batch"); err != nil {
		return nil, fmt.Errorf("savepoint: %w", err)
	}
	err := t.write(ctx, t.group(stmts))
	if err == nil {
		return rejected, nil
	}
	// Whatever the database refused (a row's constraint, or an upsert
	// naming one key twice in a run), the rows go again one at a time.
	var pe *pgconn.PgError
	if !errors.As(err, &pe) && !errors.Is(err, errNotCopied) {
		return nil, fmt.Errorf("write batch: %w", err)
	}
	if _, err := t.tx.Exec(ctx, "ROLLBACK TO SAVEPOINT causeway_batch"); err != nil {
		return nil, fmt.Errorf("roll back batch: %w", err)
	}
	// One at a time, to leave out only what the database refuses.
	for i, st := range stmts {
		st = t.materialize(st)
		if _, err := t.tx.Exec(ctx, "SAVEPOINT causeway_row"); err != nil {
			return nil, fmt.Errorf("savepoint: %w", err)
		}
		_, err := t.tx.Exec(ctx, st.sql, st.args...)
		switch {
		case err == nil:
			continue
		case !refused(err):
			return nil, fmt.Errorf("write %s/%d@%d: %w", ok[i].Topic, ok[i].Partition, ok[i].Offset, err)
		}
		rejected = append(rejected, connect.Rejected{Record: ok[i], Err: t.trimmed(err)})
		if _, err := t.tx.Exec(ctx, "ROLLBACK TO SAVEPOINT causeway_row"); err != nil {
			return nil, fmt.Errorf("roll back row: %w", err)
		}
	}
	return rejected, nil
}

// refused reports whether err is the database refusing the data (a
// constraint, a value of the wrong type): SQLSTATE classes 22 and 23.
// Anything else (the connection, the server) is the task's error.
func refused(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (strings.HasPrefix(pe.Code, "22") || strings.HasPrefix(pe.Code, "23"))
}

// statementOf is the write of one record: a delete for a tombstone, else
// an insert or upsert of the columns the record's value (and key) name.
func (t *task) statementOf(r connect.Record) (statement, error) {
	tb := t.tables[r.Topic]
	if tb == nil {
		return statement{}, fmt.Errorf("topic %q has no table", r.Topic)
	}
	key, err := t.keyColumns(tb, r)
	if err != nil {
		return statement{}, err
	}
	if r.Value == nil {
		if !t.s.deletes {
			return statement{}, errors.New("a tombstone, and delete.enabled is false")
		}
		return t.deleteOf(tb, key)
	}
	value, err := t.render(r.Value, r.ValueSchema)
	if err != nil {
		return statement{}, err
	}
	names, err := jsonscan.TopKeys(value, make([]string, 0, 8))
	if err != nil {
		return statement{}, fmt.Errorf("the value is not a JSON object: %w", err)
	}
	if vs := r.ValueSchema; vs != nil {
		// Every field of the schema is a column, null when the payload
		// leaves it out, as Kafka Connect reads a struct.
		for i := range vs.Fields {
			names = append(names, vs.Fields[i].Field)
		}
	}
	if t.s.fields != nil {
		names = slices.DeleteFunc(names, func(n string) bool { return !t.s.fields[n] && !slices.Contains(tb.pk, n) })
	}
	for c := range key {
		if !slices.Contains(names, c) {
			names = append(names, c)
		}
	}
	for _, c := range names {
		if !tb.columns[c] {
			return statement{}, fmt.Errorf("%s has no column %q", tb.name.Sanitize(), c)
		}
	}
	sort.Strings(names)
	names = slices.Compact(names)
	if t.s.mode == "update" {
		return t.updateOf(tb, names, value, key), nil
	}
	return statement{tb: tb, cols: strings.Join(names, ","), insert: true, value: value, key: key}, nil
}

// updateOf is the update of the row of the primary key's values with the
// other columns of cols, from the value and key's columns.
func (t *task) updateOf(tb *table, cols []string, value []byte, key map[string]json.RawMessage) statement {
	doc := value
	if len(key) > 0 {
		doc = appendFields(slices.Clip(value), key)
	}
	var sets, where []string
	for _, c := range cols {
		id := quoteIdent(c)
		if slices.Contains(tb.pk, c) {
			where = append(where, "t."+id+" = k."+id)
		} else {
			sets = append(sets, id+" = k."+id)
		}
	}
	if len(sets) == 0 {
		sets = append(sets, quoteIdent(tb.pk[0])+" = k."+quoteIdent(tb.pk[0]))
	}
	if len(where) == 0 {
		where = append(where, "false") // no key: nothing to update
	}
	name := tb.name.Sanitize()
	return statement{sql: "UPDATE " + name + " t SET " + strings.Join(sets, ", ") + " FROM json_populate_record(NULL::" + name +
		", $1::json) k WHERE " + strings.Join(where, " AND "), args: []any{string(doc)}}
}

// trimmed is err, the database refusing a row, without the database's
// message when trim.sensitive.log is set: it may quote the row's values.
func (t *task) trimmed(err error) error {
	var pe *pgconn.PgError
	if !t.s.trim || !errors.As(err, &pe) {
		return err
	}
	return fmt.Errorf("the database refused the row: SQLSTATE %s, constraint %q, table %q, column %q", pe.Code, pe.ConstraintName, pe.TableName, pe.ColumnName)
}

// materialize makes an insert's row and statement.
func (t *task) materialize(st statement) statement {
	if !st.insert || st.doc != nil {
		return st
	}
	st.doc = st.value
	if len(st.key) > 0 {
		// The key's columns go last: when the value names one too, the
		// key's wins (Postgres reads the last of a repeated field).
		st.doc = appendFields(slices.Clip(st.value), st.key)
	}
	st.sql, st.args = t.insertSQL(st.tb, strings.Split(st.cols, ","), false), []any{string(st.doc)}
	return st
}

// appendFields returns the JSON object obj with fields added at its end.
func appendFields(obj []byte, fields map[string]json.RawMessage) []byte {
	end := len(obj) - 1
	for end >= 0 && obj[end] != '}' {
		end--
	}
	empty := true
	for i := end - 1; i >= 0 && obj[i] != '{'; i-- {
		if c := obj[i]; c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			empty = false
			break
		}
	}
	out := append(make([]byte, 0, len(obj)+64), obj[:end]...)
	names := make([]string, 0, len(fields))
	for c := range fields {
		names = append(names, c)
	}
	sort.Strings(names)
	for _, c := range names {
		if !empty {
			out = append(out, ',')
		}
		empty = false
		name, _ := json.Marshal(c)
		out = append(append(append(out, name...), ':'), fields[c]...)
	}
	return append(out, '}')
}

// keyColumns are the primary key's columns from the record's key, with
// pk.mode record_key; none otherwise.
func (t *task) keyColumns(tb *table, r connect.Record) (map[string]json.RawMessage, error) {
	switch t.s.pkMode {
	case "kafka":
		return map[string]json.RawMessage{t.s.pkFields[0]: jsontext.AppendString(nil, r.Topic),
			t.s.pkFields[1]: strconv.AppendInt(nil, int64(r.Partition), 10), t.s.pkFields[2]: strconv.AppendInt(nil, r.Offset, 10)}, nil
	case "record_key":
	default:
		return nil, nil
	}
	if len(r.Key) == 0 {
		return nil, errors.New("no key, and pk.mode is record_key")
	}
	key := r.Key
	if ks := r.KeySchema; ks != nil && ks.Type == "struct" {
		var err error
		if key, err = t.render(key, ks); err != nil {
			return nil, fmt.Errorf("the key: %w", err)
		}
	} else if ks != nil && (ks.Name != "" || ks.Type == "bytes") && string(key) != "null" {
		var err error
		if key, err = renderValue(key, ks, t.s.zone); err != nil {
			return nil, fmt.Errorf("the key: %w", err)
		}
	}
	if first := key[jsonscan.SkipSpace(key, 0):]; len(first) > 0 && first[0] == '{' {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(key, &obj); err == nil {
			if len(t.s.pkFields) > 0 {
				maps.DeleteFunc(obj, func(f string, _ json.RawMessage) bool { return !slices.Contains(t.s.pkFields, f) })
			}
			return obj, nil
		}
	}
	if len(tb.pk) != 1 {
		return nil, fmt.Errorf("the key is a single value, and %s's key has %d columns (name them with pk.fields)", tb.name.Sanitize(), len(tb.pk))
	}
	return map[string]json.RawMessage{tb.pk[0]: singleKey(key)}, nil
}

// singleKey is a key that is one value, as JSON: itself when it is JSON
// already, else the JSON string of its bytes.
func singleKey(k []byte) json.RawMessage {
	plain := true
	for _, c := range k {
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			plain = false
			break
		}
	}
	if plain && len(k) > 0 && !strings.ContainsRune("\"{[-0123456789tfn ", rune(k[0])) {
		// Not JSON (it would start otherwise), and nothing to escape.
		return append(append(append(make([]byte, 0, len(k)+2), '"'), k...), '"')
	}
	if json.Valid(k) {
		return k
	}
	b, _ := json.Marshal(string(k)) // a plain string key
	return b
}

// insertSQL is the insert (or upsert) of cols into tb from one JSON row
// ($1), or from a JSON array of rows when set.
func (t *task) insertSQL(tb *table, cols []string, set bool) string {
	key := strings.Join(cols, ",")
	if set {
		key += "/set"
	}
	if sql, ok := tb.sql[key]; ok {
		return sql
	}
	sql := t.buildInsert(tb, cols, set)
	tb.sql[key] = sql
	return sql
}

func (t *task) buildInsert(tb *table, cols []string, set bool) string {
	list := make([]string, len(cols))
	for i, c := range cols {
		list[i] = pgx.Identifier{c}.Sanitize()
	}
	joined := strings.Join(list, ", ")
	from := "json_populate_record"
	if set {
		from = "json_populate_recordset"
	}
	sql := "INSERT INTO " + tb.name.Sanitize() + " (" + joined + ") SELECT " + joined +
		" FROM " + from + "(NULL::" + tb.name.Sanitize() + ", $1::json)"
	if !t.s.upsert {
		return sql
	}
	var updates []string
	for i, c := range cols {
		if !slices.Contains(tb.pk, c) {
			updates = append(updates, list[i]+" = EXCLUDED."+list[i])
		}
	}
	pk := make([]string, len(tb.pk))
	for i, c := range tb.pk {
		pk[i] = pgx.Identifier{c}.Sanitize()
	}
	if len(updates) == 0 {
		return sql + " ON CONFLICT (" + strings.Join(pk, ", ") + ") DO NOTHING"
	}
	return sql + " ON CONFLICT (" + strings.Join(pk, ", ") + ") DO UPDATE SET " + strings.Join(updates, ", ")
}

func (t *task) deleteOf(tb *table, key map[string]json.RawMessage) (statement, error) {
	cols := make([]string, 0, len(key))
	for c := range key {
		if !tb.columns[c] {
			return statement{}, fmt.Errorf("%s has no column %q", tb.name.Sanitize(), c)
		}
		cols = append(cols, c)
	}
	sort.Strings(cols)
	doc, err := json.Marshal(key)
	if err != nil {
		return statement{}, err
	}
	var where []string
	for _, c := range cols {
		id := pgx.Identifier{c}.Sanitize()
		where = append(where, "t."+id+" = k."+id)
	}
	return statement{sql: "DELETE FROM " + tb.name.Sanitize() + " t USING json_populate_record(NULL::" + tb.name.Sanitize() +
		", $1::json) k WHERE " + strings.Join(where, " AND "), args: []any{string(doc)}}, nil
}

// Commit moves the positions and commits. Each position must still be
// where the task read it: the update names its old value, and a row not
// found means another task moved it (connect.ErrFenced).
func (t *task) Commit(ctx context.Context, moves []connect.Move) error {
	return transient(t.commit(ctx, moves))
}

func (t *task) commit(ctx context.Context, moves []connect.Move) error {
	if t.tx == nil {
		if len(moves) == 0 {
			return nil
		}
		tx, err := t.pool.Begin(ctx)
		if err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		t.tx = tx
	}
	tx := t.tx
	t.tx = nil
	pos := t.s.positions.Sanitize()
	for _, m := range moves {
		var tag pgconn.CommandTag
		var err error
		if m.From < 0 {
			tag, err = tx.Exec(ctx, `INSERT INTO `+pos+` (connector, topic, partition, next_offset) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`,
				t.connector, m.Channel.Topic, m.Channel.Partition, m.To)
		} else {
			tag, err = tx.Exec(ctx, `UPDATE `+pos+` SET next_offset = $4 WHERE connector = $1 AND topic = $2 AND partition = $3 AND next_offset = $5`,
				t.connector, m.Channel.Topic, m.Channel.Partition, m.To, m.From)
		}
		if err == nil && tag.RowsAffected() != 1 {
			err = fmt.Errorf("%w: %s is no longer at offset %d", connect.ErrFenced, m.Channel, m.From)
		}
		if err != nil {
			t.forgetChanges()
			return errors.Join(fmt.Errorf("move the position of %s: %w", m.Channel, err), tx.Rollback(ctx))
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.forgetChanges()
		return fmt.Errorf("commit: %w", err)
	}
	t.changed = nil
	return nil
}

// Abort rolls the open transaction back.
func (t *task) Abort(ctx context.Context) error {
	if t.tx == nil {
		return nil
	}
	tx := t.tx
	t.tx = nil
	t.forgetChanges()
	return tx.Rollback(ctx)
}

// Close aborts the open transaction and disconnects.
func (t *task) Close() error {
	err := t.Abort(context.Background())
	t.pool.Close()
	return err
}
