package pgcdc

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/causeway-stream/causeway/connect"
)

var (
	_ connect.Reporter  = (*task)(nil)
	_ connect.Describer = (*task)(nil)
)

// The facts a task gives for its status (connect.Describer): its slot
// and publication, and the log positions of the gauges GaugeWritten and
// GaugeConfirmed in Postgres's own form (0/16B3748), as pg_replication_slots
// shows them.
const (
	FactSlot        = "slot"
	FactPublication = "publication"
	FactWritten     = "last_written_lsn"
	FactConfirmed   = "confirmed_lsn"
)

// The gauges a task reports (connect.Reporter), served by the worker as
// causeway_connect_source_<name>.
const (
	// GaugeRetainedWAL: the WAL the slot keeps the server from removing
	// (the server's WAL end less the slot's restart_lsn), in bytes.
	GaugeRetainedWAL = "cdc_slot_retained_wal_bytes"
	// GaugeUnconfirmedWAL: the WAL past what the slot has confirmed, in
	// bytes: what the connector has still to read or to commit.
	GaugeUnconfirmedWAL = "cdc_slot_unconfirmed_wal_bytes"
	// GaugeLag: how long ago the last transaction the connector read
	// committed in the source, while it reads; 0 once it has caught up.
	GaugeLag = "cdc_replication_lag_seconds"
	// GaugeWritten and GaugeConfirmed: the log positions of the end of the
	// last transaction handed to Kafka, and of what the slot was told is
	// committed there.
	GaugeWritten   = "cdc_last_written_lsn"
	GaugeConfirmed = "cdc_confirmed_lsn"
)

// report is what Report answers, kept by the task's goroutine.
type report struct {
	mu     sync.Mutex
	gauges map[string]float64
	// written and confirmed are the task's positions (returned and
	// confirmed) as of its last look.
	written, confirmed pglogrepl.LSN
	// next is when the slot's lag is read again.
	next time.Time
}

// Report returns the task's gauges as of its last look.
func (t *task) Report() map[string]float64 {
	t.rep.mu.Lock()
	defer t.rep.mu.Unlock()
	out := make(map[string]float64, len(t.rep.gauges))
	for k, v := range t.rep.gauges {
		out[k] = v
	}
	return out
}

// Describe returns the task's facts as of its last look.
func (t *task) Describe() map[string]string {
	t.rep.mu.Lock()
	defer t.rep.mu.Unlock()
	return map[string]string{FactSlot: t.s.slot, FactPublication: t.s.publication,
		FactWritten: t.rep.written.String(), FactConfirmed: t.rep.confirmed.String()}
}

// look reads the slot's lag from the server every status interval, and
// notes the positions and how far behind the source the last poll was
// (lastCommit, the commit time of its last transaction; zero when it
// found none: caught up).
func (t *task) look(ctx context.Context, lastCommit time.Time) error {
	g := map[string]float64{GaugeWritten: float64(t.returned), GaugeConfirmed: float64(t.confirmed), GaugeLag: 0}
	if !lastCommit.IsZero() {
		g[GaugeLag] = max(0, time.Since(lastCommit).Seconds())
	}
	t.rep.mu.Lock()
	due := time.Now().After(t.rep.next)
	for _, k := range []string{GaugeRetainedWAL, GaugeUnconfirmedWAL} {
		if v, ok := t.rep.gauges[k]; ok {
			g[k] = v
		}
	}
	t.rep.mu.Unlock()
	if due {
		var retained, unconfirmed *int64
		if err := t.conn.QueryRow(ctx, `SELECT (pg_current_wal_lsn() - restart_lsn)::int8, (pg_current_wal_lsn() - confirmed_flush_lsn)::int8
			FROM pg_replication_slots WHERE slot_name = $1`, t.s.slot).Scan(&retained, &unconfirmed); err != nil {
			return err
		}
		if retained != nil && unconfirmed != nil {
			g[GaugeRetainedWAL], g[GaugeUnconfirmedWAL] = float64(*retained), float64(*unconfirmed)
		}
	}
	t.rep.mu.Lock()
	defer t.rep.mu.Unlock()
	t.rep.gauges = g
	t.rep.written, t.rep.confirmed = t.returned, t.confirmed
	if due {
		t.rep.next = time.Now().Add(t.s.statusEvery)
	}
	return nil
}
