package pgcdc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/causeway-stream/causeway/connect"
)

// Source is the Postgres change data capture source.
type Source struct{}

var (
	_ connect.Source         = Source{}
	_ connect.SourceTask     = (*task)(nil)
	_ connect.CommitListener = (*task)(nil)
)

// offset is what a task commits with its events: the log position after
// the last transaction written (the snapshot's consistent point after the
// snapshot).
type offset struct {
	LSN  uint64 `json:"lsn"`
	TxID uint32 `json:"txId,omitempty"`
}

// task is one running capture: a connection for queries (the catalog,
// the snapshot, heartbeats) and one for replication.
//
//causeway:owned
type task struct {
	s    *settings
	conn *pgx.Conn
	repl *pgconn.PgConn
	// order is the captured tables as the catalog listed them; byID,
	// the tables the log's Relation messages described, by relation id.
	order []*table
	byID  map[uint32]*table
	// streaming: START_REPLICATION has run.
	streaming bool
	// skipBelow: transactions whose commit lies before it were written
	// already (the committed offset's position).
	skipBelow pglogrepl.LSN
	// returned is the end of the last transaction Poll returned;
	// confirmed, the position the slot was told it may let go of;
	// serverEnd, how far the server said it had decoded when idle.
	returned, confirmed, serverEnd pglogrepl.LSN
	// open is the transaction being read from the log, nil between two.
	open *txn
	// lastPoll is how many records the last poll of the stream returned.
	lastPoll      int
	nextStatus    time.Time
	nextHeartbeat time.Time
	// rep is what Report answers.
	rep report
}

// Open checks the database, the user, the tables and the slot, and
// returns a task that makes the publication and the slot (when needed)
// on its first poll.
func (Source) Open(ctx context.Context, connector string, cfg connect.Config) (connect.SourceTask, error) {
	s, err := readSettings(cfg)
	if err != nil {
		return nil, err
	}
	conn, err := pgx.ConnectConfig(ctx, s.pgx())
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", s.conn.Host, err)
	}
	t := &task{s: s, conn: conn, byID: map[uint32]*table{}}
	if err := t.check(ctx); err != nil {
		return nil, errors.Join(err, t.Close())
	}
	return t, nil
}

// Streaming says the task reads the replication stream on from where it
// stopped: only its first Poll reads the committed offset.
func (t *task) Streaming() bool { return true }

// Poll returns whole transactions: the snapshot on the first poll when
// one is due, then those the log holds after the committed offset.
func (t *task) Poll(ctx context.Context, committed []byte) ([]connect.SourceRecord, error) {
	var recs []connect.SourceRecord
	var err error
	if !t.streaming {
		recs, err = t.start(ctx, committed)
	} else {
		recs, err = t.stream(ctx)
	}
	if err != nil {
		return nil, err
	}
	var last time.Time
	if len(recs) > 0 {
		last = recs[len(recs)-1].Timestamp
	}
	if err := t.look(ctx, last); err != nil {
		return nil, fmt.Errorf("the slot's lag: %w", err)
	}
	return recs, nil
}

// start makes what is missing (publication, slot), reads the snapshot
// when one is due, and starts replication.
func (t *task) start(ctx context.Context, committed []byte) ([]connect.SourceRecord, error) {
	var off *offset
	if committed != nil {
		off = &offset{}
		if err := json.Unmarshal(committed, off); err != nil {
			return nil, fmt.Errorf("the committed offset %q: %w", committed, err)
		}
	}
	slot, err := t.freeSlot(ctx)
	if err != nil {
		return nil, err
	}
	snapshot := false
	switch {
	case off == nil && t.s.snapshot != "never":
		snapshot = true
	case off != nil && !slot.exists && t.s.snapshot == "when_needed":
		snapshot = true
	case off != nil && !slot.exists:
		return nil, fmt.Errorf("%w: slot %q is gone while the connector's offset is at %s, so the changes since are lost to it; give snapshot.mode=when_needed to read the tables again",
			ErrSlotMissing, t.s.slot, pglogrepl.LSN(off.LSN))
	}
	made, err := t.ensurePublication(ctx)
	if err != nil {
		return nil, err
	}
	var recs []connect.SourceRecord
	start := pglogrepl.LSN(0)
	switch {
	case snapshot:
		recs, start, err = t.snapshot(ctx, slot.exists)
	case !slot.exists:
		start, err = t.createSlot(ctx, "NOEXPORT_SNAPSHOT")
	default:
		start = slot.confirmed
		if off != nil {
			start = max(start, pglogrepl.LSN(off.LSN))
		}
	}
	if err != nil {
		if made {
			_, derr := t.conn.Exec(context.WithoutCancel(ctx), "DROP PUBLICATION IF EXISTS "+pgx.Identifier{t.s.publication}.Sanitize())
			err = errors.Join(err, derr)
		}
		return nil, err
	}
	t.skipBelow, t.returned, t.confirmed = start, start, start
	if off != nil {
		t.confirmed = pglogrepl.LSN(off.LSN)
	}
	if err := t.connectReplication(ctx); err != nil {
		return nil, err
	}
	if err := pglogrepl.StartReplication(ctx, t.repl, t.s.slot, start, pglogrepl.StartReplicationOptions{
		PluginArgs: []string{"proto_version '1'", "publication_names '" + t.s.publication + "'"}}); err != nil {
		return nil, fmt.Errorf("start replication from slot %q at %s: %w", t.s.slot, start, err)
	}
	t.streaming = true
	return recs, nil
}

// createSlot makes the slot, on a replication connection of its own that
// the task streams on after, and returns its consistent point and
// (with EXPORT_SNAPSHOT) the snapshot's name.
func (t *task) createSlot(ctx context.Context, action string) (pglogrepl.LSN, error) {
	lsn, _, err := t.createSlotNamed(ctx, action)
	return lsn, err
}

func (t *task) createSlotNamed(ctx context.Context, action string) (pglogrepl.LSN, string, error) {
	if err := t.connectReplication(ctx); err != nil {
		return 0, "", err
	}
	res, err := pglogrepl.CreateReplicationSlot(ctx, t.repl, t.s.slot, "pgoutput",
		pglogrepl.CreateReplicationSlotOptions{Mode: pglogrepl.LogicalReplication, SnapshotAction: action})
	if err != nil {
		return 0, "", fmt.Errorf("create replication slot %q: %w", t.s.slot, err)
	}
	lsn, err := pglogrepl.ParseLSN(res.ConsistentPoint)
	return lsn, res.SnapshotName, err
}

// connectReplication opens the replication connection.
func (t *task) connectReplication(ctx context.Context) error {
	if t.repl != nil {
		return nil
	}
	rc := t.s.conn.Copy()
	rc.RuntimeParams["replication"] = "database"
	repl, err := pgconn.ConnectConfig(ctx, rc)
	if err != nil {
		return fmt.Errorf("replication connection: %w", err)
	}
	t.repl = repl
	return nil
}

// snapshot makes the slot (again, when one without an offset exists: a
// snapshot that never committed), reads every captured table in the
// snapshot it exported, and returns the rows as one transaction.
func (t *task) snapshot(ctx context.Context, slotExists bool) ([]connect.SourceRecord, pglogrepl.LSN, error) {
	if slotExists {
		if _, err := t.conn.Exec(ctx, "SELECT pg_drop_replication_slot($1)", t.s.slot); err != nil {
			return nil, 0, fmt.Errorf("drop slot %q, made by a snapshot that never committed: %w", t.s.slot, err)
		}
	}
	lsn, name, err := t.createSlotNamed(ctx, "EXPORT_SNAPSHOT")
	if err != nil {
		return nil, 0, err
	}
	tx, err := t.conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, 0, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, "SET TRANSACTION SNAPSHOT '"+name+"'"); err != nil {
		return nil, 0, fmt.Errorf("take the slot's snapshot: %w", err)
	}
	o := &origin{tsMs: time.Now().UnixMilli(), snapshot: "true", lsn: uint64(lsn)}
	b := t.newTxn(fmt.Sprintf("snapshot:%d", lsn), o.tsMs)
	for _, tb := range t.order {
		if err := t.readTable(ctx, tx, tb, b, o); err != nil {
			return nil, 0, err
		}
	}
	b.markLast()
	if err := tx.Commit(ctx); err != nil {
		return nil, 0, err
	}
	return b.finish(offset{LSN: uint64(lsn)}), lsn, nil
}

// readTable reads one table's rows, in text, into b.
func (t *task) readTable(ctx context.Context, tx pgx.Tx, tb *table, b *txn, o *origin) error {
	rr := tx.Conn().PgConn().ExecParams(ctx, "SELECT * FROM "+pgx.Identifier{tb.schema, tb.name}.Sanitize(), nil, nil, nil, nil)
	for rr.NextRow() {
		vals := rr.Values()
		row := make([]cell, len(vals))
		for i, v := range vals {
			if v == nil {
				row[i] = cell{kind: 'n'}
			} else {
				row[i] = cell{kind: 't', text: append([]byte(nil), v...)}
			}
		}
		if err := b.change(tb, "r", nil, row, o); err != nil {
			return err
		}
	}
	if _, err := rr.Close(); err != nil {
		return fmt.Errorf("read %s.%s: %w", tb.schema, tb.name, err)
	}
	return nil
}

// Committed tells the slot it may let go of the log up to the committed
// offset.
func (t *task) Committed(ctx context.Context, committed []byte) error {
	var off offset
	if err := json.Unmarshal(committed, &off); err != nil {
		return fmt.Errorf("the committed offset %q: %w", committed, err)
	}
	if lsn := pglogrepl.LSN(off.LSN); lsn > t.confirmed {
		t.confirmed = lsn
		return t.sendStatus(ctx)
	}
	return nil
}

// Close closes the connections, and drops the slot when
// slot.drop.on.stop says so.
func (t *task) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var errs []error
	if t.repl != nil {
		errs = append(errs, t.repl.Close(ctx))
	}
	if t.s.dropSlot && t.streaming {
		// The slot is let go by its process as the connection ends: wait
		// for it.
		_, err := t.conn.Exec(ctx, `DO $$ BEGIN
			FOR i IN 1..100 LOOP
				EXIT WHEN NOT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = '`+t.s.slot+`' AND active);
				PERFORM pg_sleep(0.05);
			END LOOP;
			PERFORM pg_drop_replication_slot('`+t.s.slot+`');
		END $$`)
		errs = append(errs, err)
	}
	errs = append(errs, t.conn.Close(ctx))
	return errors.Join(errs...)
}

// pgx is the query connection's configuration.
func (s *settings) pgx() *pgx.ConnConfig {
	cc, _ := pgx.ParseConfig("")
	cc.Config = *s.conn.Copy()
	return cc
}
