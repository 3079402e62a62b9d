package dsl

import (
	"time"

	"github.com/causeway-stream/causeway/framework/store"
)

// epoch is where a step's stream time starts: Kafka timestamps are never
// before it, so no window of a record can have closed before the step
// has seen a record.
var epoch = time.Unix(0, 0).UTC()

// stepClock is the stream time of one windowed step or join in one task:
// the largest timestamp among the records that reached that step, as each
// windowed processor of Kafka Streams tracks its own. Records that never
// reach the step (a table's updates, records of other branches, records
// sent to the dead-letter topic) do not move it, so they close none of
// its windows. It is kept in the step's window store: committed, written
// to the changelog and restored with the windows it closes.
type stepClock struct {
	ws  store.Window
	now time.Time
}

// openClock reads the stream time ws keeps, or starts at the epoch.
func openClock(ws store.Window) (*stepClock, error) {
	now, err := ws.StreamTime()
	if err != nil {
		return nil, err
	}
	if now.Before(epoch) {
		now = epoch
	}
	return &stepClock{ws: ws, now: now}, nil
}

// observe moves the clock on to ts when ts is later, and returns the
// stream time.
func (c *stepClock) observe(ts time.Time) (time.Time, error) {
	if ts.After(c.now) {
		c.now = ts
		if err := c.ws.SetStreamTime(ts); err != nil {
			return c.now, err
		}
	}
	return c.now, nil
}

// restamp makes *scratch a copy of m whose record carries timestamp ts,
// and returns it: what a step emits is stamped with the time Kafka Streams
// gives it (a window's latest record, a session's end), not always the
// time of the record that set it off. A step keeps one scratch meta, so
// that restamping allocates nothing.
func restamp(scratch, m *meta, ts time.Time) *meta {
	*scratch = *m
	scratch.rec.Timestamp = ts
	return scratch
}
