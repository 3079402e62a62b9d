package pgcdc

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/causeway-stream/causeway/connect"
)

// stream reads the log until it holds max.batch.size events of whole
// transactions, or poll.interval.ms went by; between transactions it
// writes a heartbeat when one is due.
func (t *task) stream(ctx context.Context) ([]connect.SourceRecord, error) {
	// Room for as many records as the last poll returned.
	out := make([]connect.SourceRecord, 0, t.lastPoll)
	defer func() { t.lastPoll = min(len(out), 2*t.s.maxBatch) }()
	deadline := time.Now().Add(t.s.pollWait)
	// A cancelled ctx ends the read under way at once (receive).
	stop := context.AfterFunc(ctx, func() { t.repl.Conn().SetReadDeadline(time.Now()) }) //nolint:errcheck // a closed connection fails the read anyway
	defer stop()
	for len(out) < t.s.maxBatch {
		if time.Now().After(t.nextStatus) {
			if err := t.sendStatus(ctx); err != nil {
				return nil, err
			}
		}
		idle := t.open == nil && len(out) == 0
		if idle && t.s.heartbeat > 0 && !time.Now().Before(t.nextHeartbeat) {
			return t.heartbeatRecord(ctx)
		}
		wait := time.Until(deadline)
		switch {
		case t.open != nil:
			wait = max(wait, 100*time.Millisecond) // a transaction is read whole
		case len(out) > 0:
			wait = min(wait, 2*time.Millisecond) // only what has come
		}
		data, err := t.receive(ctx, max(wait, time.Millisecond))
		if err != nil {
			return nil, err
		}
		if data == nil {
			if t.open == nil && (len(out) > 0 || !time.Now().Before(deadline)) {
				return out, nil
			}
			continue
		}
		if out, err = t.handle(ctx, data, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// receive returns the next message of the replication stream's, nil when
// none came within wait. The wait is the connection's read deadline, not
// a context: pgconn watches a context that can end with a goroutine of
// its own for each call, a cost a message at a time adds up at the
// stream's rate. stream cuts the wait short when ctx ends.
func (t *task) receive(ctx context.Context, wait time.Duration) ([]byte, error) {
	if err := t.repl.Conn().SetReadDeadline(time.Now().Add(wait)); err != nil {
		return nil, fmt.Errorf("replication from slot %q: %w", t.s.slot, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err // ended before the deadline above was set
	}
	msg, err := t.repl.ReceiveMessage(context.Background())
	if err != nil {
		if pgconn.Timeout(err) && ctx.Err() == nil {
			return nil, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("replication from slot %q: %w", t.s.slot, err)
	}
	switch m := msg.(type) {
	case *pgproto3.CopyData:
		return m.Data, nil
	case *pgproto3.ErrorResponse:
		return nil, fmt.Errorf("replication from slot %q: %w", t.s.slot, pgconn.ErrorResponseToPgError(m))
	}
	return nil, nil
}

// handle takes one message of the stream; a transaction it completes is
// appended to out.
func (t *task) handle(ctx context.Context, data []byte, out []connect.SourceRecord) ([]connect.SourceRecord, error) {
	switch data[0] {
	case pglogrepl.PrimaryKeepaliveMessageByteID:
		k, err := pglogrepl.ParsePrimaryKeepaliveMessage(data[1:])
		if err != nil {
			return nil, err
		}
		t.serverEnd = max(t.serverEnd, k.ServerWALEnd)
		if k.ReplyRequested {
			return out, t.sendStatus(ctx)
		}
		return out, nil
	case pglogrepl.XLogDataByteID:
		x, err := pglogrepl.ParseXLogData(data[1:])
		if err != nil {
			return nil, err
		}
		msg, err := pglogrepl.Parse(x.WALData)
		if err != nil {
			return nil, fmt.Errorf("decode the log at %s: %w", x.WALStart, err)
		}
		return t.logical(ctx, msg, uint64(x.WALStart), out)
	}
	return out, nil
}

// logical takes one pgoutput message.
func (t *task) logical(ctx context.Context, msg pglogrepl.Message, at uint64, out []connect.SourceRecord) ([]connect.SourceRecord, error) {
	switch m := msg.(type) {
	case *pglogrepl.RelationMessage:
		return out, t.relation(ctx, m)
	case *pglogrepl.BeginMessage:
		if m.FinalLSN < t.skipBelow {
			// Written before the committed offset: a transaction the
			// slot sends again after a restart.
			t.open = &txn{id: ""}
			return out, nil
		}
		t.open = t.newTxn(fmt.Sprintf("%d:%d", m.Xid, uint64(m.FinalLSN)), m.CommitTime.UnixMilli())
		t.open.xid = m.Xid
		return out, nil
	case *pglogrepl.CommitMessage:
		x := t.open
		t.open = nil
		if x == nil || x.id == "" || x.empty() {
			return out, nil
		}
		t.returned = m.TransactionEndLSN
		return append(out, x.finish(offset{LSN: uint64(m.TransactionEndLSN), TxID: x.xid})...), nil
	case *pglogrepl.InsertMessage:
		return out, t.row(m.RelationID, "c", nil, m.Tuple, at)
	case *pglogrepl.UpdateMessage:
		return out, t.update(m, at)
	case *pglogrepl.DeleteMessage:
		return out, t.row(m.RelationID, "d", m.OldTuple, nil, at)
	case *pglogrepl.TruncateMessage:
		for _, id := range m.RelationIDs {
			if err := t.row(id, "t", nil, nil, at); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// relation takes a table's description: its columns from the message,
// its key from the catalog (the message flags the replica identity's
// columns, all of them under REPLICA IDENTITY FULL).
func (t *task) relation(ctx context.Context, m *pglogrepl.RelationMessage) error {
	if !t.s.captured(m.Namespace, m.RelationName) {
		t.byID[m.RelationID] = nil
		return nil
	}
	cat, err := t.describe(ctx, m.RelationID, m.Namespace, m.RelationName)
	if err != nil {
		return err
	}
	keys := map[string]bool{}
	for _, c := range cat.columns {
		keys[c.name] = c.key
	}
	tb := &table{schema: m.Namespace, name: m.RelationName}
	for _, c := range m.Columns {
		tb.columns = append(tb.columns, column{name: c.Name, oid: c.DataType, typmod: c.TypeModifier, key: keys[c.Name]})
	}
	t.s.prepare(tb)
	t.byID[m.RelationID] = tb
	return nil
}

// update adds an update's events: one u event, or, when the key changed,
// a delete of the old key and a create of the new, as Debezium does.
func (t *task) update(m *pglogrepl.UpdateMessage, at uint64) error {
	tb := t.byID[m.RelationID]
	if tb == nil || t.open == nil || t.open.id == "" {
		return nil
	}
	before, after := cells(m.OldTuple), cells(m.NewTuple)
	if before != nil && keyChanged(tb, before, after) {
		if err := t.row(m.RelationID, "d", m.OldTuple, nil, at); err != nil {
			return err
		}
		return t.row(m.RelationID, "c", nil, m.NewTuple, at)
	}
	if m.OldTupleType != 'O' {
		before = nil // only REPLICA IDENTITY FULL gives the whole row before
	}
	return t.add(tb, "u", before, after, at)
}

// row adds a change of one row (or a truncate) to the open transaction.
func (t *task) row(relation uint32, op string, before, after *pglogrepl.TupleData, at uint64) error {
	tb := t.byID[relation]
	if tb == nil || t.open == nil || t.open.id == "" {
		return nil
	}
	return t.add(tb, op, cells(before), cells(after), at)
}

func (t *task) add(tb *table, op string, before, after []cell, at uint64) error {
	if t.s.skipped[op] {
		return nil
	}
	o := &origin{tsMs: t.open.tsMs, snapshot: "false", txID: t.open.xid, lsn: at}
	return t.open.change(tb, op, before, after, o)
}

func keyChanged(tb *table, before, after []cell) bool {
	for i, c := range tb.columns {
		if c.key && i < len(before) && i < len(after) && before[i].kind == 't' && string(before[i].text) != string(after[i].text) {
			return true
		}
	}
	return false
}

// cells copies a tuple's values out of the message buffer.
func cells(td *pglogrepl.TupleData) []cell {
	if td == nil {
		return nil
	}
	out := make([]cell, len(td.Columns))
	for i, c := range td.Columns {
		out[i] = cell{kind: c.DataType}
		if c.DataType == 't' {
			out[i].text = append([]byte(nil), c.Data...)
		}
	}
	return out
}

// sendStatus tells the server how far the task has written: the
// committed offset's position; or, when everything read is committed and
// no transaction is open, as far as the server said it had decoded, so
// that a quiet connector lets the slot move on.
func (t *task) sendStatus(ctx context.Context) error {
	flush := t.confirmed
	if t.open == nil && t.confirmed >= t.returned {
		flush = max(flush, t.serverEnd)
	}
	t.nextStatus = time.Now().Add(t.s.statusEvery)
	if err := pglogrepl.SendStandbyStatusUpdate(ctx, t.repl, pglogrepl.StandbyStatusUpdate{
		WALWritePosition: max(flush, t.returned), WALFlushPosition: flush, WALApplyPosition: flush}); err != nil {
		return fmt.Errorf("replication status to slot %q: %w", t.s.slot, err)
	}
	return nil
}

// heartbeatRecord runs heartbeat.action.query and returns the heartbeat
// event, which carries the position the task may confirm once it is
// committed.
func (t *task) heartbeatRecord(ctx context.Context) ([]connect.SourceRecord, error) {
	t.nextHeartbeat = time.Now().Add(t.s.heartbeat)
	if t.s.heartbeatQuery != "" {
		if _, err := t.conn.Exec(ctx, t.s.heartbeatQuery); err != nil {
			return nil, fmt.Errorf("heartbeat.action.query: %w", err)
		}
	}
	at := t.returned
	if t.confirmed >= t.returned {
		at = max(at, t.serverEnd)
	}
	off, _ := json.Marshal(offset{LSN: uint64(at)})
	now := time.Now()
	key, _ := json.Marshal(map[string]string{"serverName": t.s.prefix})
	value, _ := json.Marshal(map[string]int64{"ts_ms": now.UnixMilli()})
	return []connect.SourceRecord{{Topic: t.s.heartbeatTopic, Key: key, Value: value, Timestamp: now, Offset: off,
		KeySchema: heartbeatKeySchema, ValueSchema: heartbeatValSchema}}, nil
}

func timeOfMillis(ms int64) time.Time { return time.UnixMilli(ms) }
