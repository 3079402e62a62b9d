package pgcdc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
)

// The errors of a setup the connector cannot run on. Each is returned
// wrapped, with what was found and what to do, before anything is made.
var (
	// ErrWALLevel: the server's wal_level is not logical.
	ErrWALLevel = errors.New("wal_level is not logical")
	// ErrNoReplication: the user may not replicate.
	ErrNoReplication = errors.New("the user has neither REPLICATION nor SUPERUSER")
	// ErrNoPublication: the publication does not exist and
	// publication.autocreate.mode is disabled.
	ErrNoPublication = errors.New("the publication does not exist")
	// ErrSlotInUse: another process reads the slot.
	ErrSlotInUse = errors.New("the replication slot is in use")
	// ErrSlotMismatch: the slot exists with another plugin or database.
	ErrSlotMismatch = errors.New("the replication slot is not this connector's")
	// ErrSlotMissing: the connector has an offset but its slot is gone,
	// and snapshot.mode does not allow reading the tables again.
	ErrSlotMissing = errors.New("the replication slot does not exist")
	// ErrNoPrimaryKey: a captured table has no primary key.
	ErrNoPrimaryKey = errors.New("a captured table has no primary key")
	// ErrNoTables: nothing is captured.
	ErrNoTables = errors.New("no table is captured")
)

// slotState is what the server says of the slot.
type slotState struct {
	exists    bool
	confirmed pglogrepl.LSN
}

// check checks the server, the user, the tables and the slot, and reads
// the captured tables. It makes nothing.
func (t *task) check(ctx context.Context) error {
	var level string
	if err := t.conn.QueryRow(ctx, "SHOW wal_level").Scan(&level); err != nil {
		return fmt.Errorf("read wal_level: %w", err)
	}
	if level != "logical" {
		return fmt.Errorf("%w: it is %q; set wal_level = logical in postgresql.conf and restart the server", ErrWALLevel, level)
	}
	var user string
	var replication bool
	if err := t.conn.QueryRow(ctx, "SELECT current_user, rolreplication OR rolsuper FROM pg_roles WHERE rolname = current_user").Scan(&user, &replication); err != nil {
		return fmt.Errorf("read the user's attributes: %w", err)
	}
	if !replication {
		return fmt.Errorf("%w: user %q (ALTER ROLE %s REPLICATION)", ErrNoReplication, user, pgx.Identifier{user}.Sanitize())
	}
	if err := t.readTables(ctx); err != nil {
		return err
	}
	var exists bool
	if err := t.conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = $1)", t.s.publication).Scan(&exists); err != nil {
		return fmt.Errorf("read publications: %w", err)
	}
	if !exists && t.s.pubMode == "disabled" {
		return fmt.Errorf("%w: %q, and publication.autocreate.mode is disabled (CREATE PUBLICATION %s FOR ALL TABLES, or another mode)",
			ErrNoPublication, t.s.publication, t.s.publication)
	}
	_, err := t.freeSlot(ctx)
	return err
}

// freeSlot reads the slot's state, looking again slot.max.retries times,
// slot.retry.delay.ms apart, while another process reads it.
func (t *task) freeSlot(ctx context.Context) (slotState, error) {
	for tries := 0; ; tries++ {
		st, err := t.readSlot(ctx)
		if !errors.Is(err, ErrSlotInUse) || tries >= t.s.slotRetries {
			return st, err
		}
		select {
		case <-ctx.Done():
			return st, errors.Join(err, ctx.Err())
		case <-time.After(t.s.slotRetryDelay):
		}
	}
}

// readSlot reads the slot's state, and checks that it is free and this
// connector's kind.
func (t *task) readSlot(ctx context.Context) (slotState, error) {
	var st slotState
	var plugin, database string
	var active bool
	var pid *int32
	var confirmed *string
	err := t.conn.QueryRow(ctx, "SELECT plugin, database, active, active_pid, confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1",
		t.s.slot).Scan(&plugin, &database, &active, &pid, &confirmed)
	if errors.Is(err, pgx.ErrNoRows) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("read replication slots: %w", err)
	}
	st.exists = true
	switch {
	case plugin != "pgoutput" || database != t.s.dbname:
		return st, fmt.Errorf("%w: slot %q decodes %q with %s; this connector needs database %q with pgoutput (give another slot.name)",
			ErrSlotMismatch, t.s.slot, database, plugin, t.s.dbname)
	case active:
		p := int32(0)
		if pid != nil {
			p = *pid
		}
		return st, fmt.Errorf("%w: slot %q is read by server process %d (another connector or client); stop it, or give another slot.name", ErrSlotInUse, t.s.slot, p)
	}
	if confirmed != nil {
		if st.confirmed, err = pglogrepl.ParseLSN(*confirmed); err != nil {
			return st, err
		}
	}
	return st, nil
}

// readTables reads the captured tables' columns and keys from the
// catalog.
func (t *task) readTables(ctx context.Context) error {
	rows, err := t.conn.Query(ctx, `SELECT c.oid, n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%'
		ORDER BY n.nspname, c.relname`)
	if err != nil {
		return fmt.Errorf("read tables: %w", err)
	}
	type named struct {
		oid          uint32
		schema, name string
	}
	var all []named
	for rows.Next() {
		var n named
		if err := rows.Scan(&n.oid, &n.schema, &n.name); err != nil {
			return err
		}
		if t.s.captured(n.schema, n.name) {
			all = append(all, n)
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(all) == 0 {
		return fmt.Errorf("%w: no table of database %q matches table.include.list and table.exclude.list", ErrNoTables, t.s.dbname)
	}
	var keyless []string
	for _, n := range all {
		tb, err := t.describe(ctx, n.oid, n.schema, n.name)
		if err != nil {
			return err
		}
		if !hasKey(tb) {
			keyless = append(keyless, n.schema+"."+n.name)
		}
		t.order = append(t.order, tb)
	}
	if len(keyless) > 0 {
		return fmt.Errorf("%w: %s (add a primary key, or leave the table out with table.exclude.list)", ErrNoPrimaryKey, strings.Join(keyless, ", "))
	}
	return nil
}

func hasKey(tb *table) bool {
	for _, c := range tb.columns {
		if c.key {
			return true
		}
	}
	return false
}

// describe reads a table's columns, in order, and which are its primary
// key's, and makes its events' schemas.
func (t *task) describe(ctx context.Context, oid uint32, schema, name string) (*table, error) {
	rows, err := t.conn.Query(ctx, `SELECT a.attname, a.atttypid, a.atttypmod,
			EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = a.attrelid AND i.indisprimary AND a.attnum = ANY (i.indkey))
		FROM pg_attribute a WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`, oid)
	if err != nil {
		return nil, fmt.Errorf("read the columns of %s.%s: %w", schema, name, err)
	}
	tb := &table{schema: schema, name: name}
	for rows.Next() {
		var c column
		if err := rows.Scan(&c.name, &c.oid, &c.typmod, &c.key); err != nil {
			return nil, err
		}
		tb.columns = append(tb.columns, c)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	t.s.prepare(tb)
	return tb, nil
}

// ensurePublication makes the publication when it does not exist, as
// publication.autocreate.mode says, or sets a filtered one's tables. It
// reports whether it made one.
func (t *task) ensurePublication(ctx context.Context) (bool, error) {
	var exists bool
	if err := t.conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = $1)", t.s.publication).Scan(&exists); err != nil {
		return false, err
	}
	pub := pgx.Identifier{t.s.publication}.Sanitize()
	var tables []string
	for _, tb := range t.order {
		tables = append(tables, pgx.Identifier{tb.schema, tb.name}.Sanitize())
	}
	var stmt string
	switch {
	case exists && t.s.pubMode == "filtered":
		stmt = "ALTER PUBLICATION " + pub + " SET TABLE " + strings.Join(tables, ", ")
	case exists:
		return false, nil
	case t.s.pubMode == "filtered":
		stmt = "CREATE PUBLICATION " + pub + " FOR TABLE " + strings.Join(tables, ", ")
	default:
		stmt = "CREATE PUBLICATION " + pub + " FOR ALL TABLES"
	}
	if _, err := t.conn.Exec(ctx, stmt); err != nil {
		return false, fmt.Errorf("publication %q: %w", t.s.publication, err)
	}
	return !exists, nil
}
