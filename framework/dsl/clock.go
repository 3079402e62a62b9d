package dsl

import (
	"encoding/binary"
	"errors"
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
// to the changelog and restored with the windows it closes. Beside it
// the clock counts the records the step kept, for a step that needs
// their order of arrival.
type stepClock struct {
	ws  store.Window
	now time.Time
	// seq numbers the records the step kept, in order of arrival.
	seq uint64
	// buf is reused for what save writes: the store copies it.
	buf []byte
}

// errBadClock is returned for a stored step clock that does not parse.
var errBadClock = errors.New("stored stream time of a step does not parse")

// openClock reads the stream time ws keeps, or starts at the epoch.
func openClock(ws store.Window) (*stepClock, error) {
	c := &stepClock{ws: ws, now: epoch}
	b, err := ws.Meta()
	if err != nil || b == nil {
		return c, err
	}
	if len(b) < 8 {
		return nil, errBadClock
	}
	if now := time.Unix(0, int64(binary.BigEndian.Uint64(b))).UTC(); now.After(c.now) {
		c.now = now
	}
	if len(b) > 8 {
		seq, n := binary.Uvarint(b[8:])
		if n <= 0 {
			return nil, errBadClock
		}
		c.seq = seq
	}
	return c, nil
}

func (c *stepClock) save() error {
	c.buf = binary.BigEndian.AppendUint64(c.buf[:0], uint64(c.now.UnixNano()))
	if c.seq > 0 {
		c.buf = binary.AppendUvarint(c.buf, c.seq)
	}
	return c.ws.SetMeta(c.buf)
}

// observe moves the clock on to ts when ts is later, and returns the
// stream time.
func (c *stepClock) observe(ts time.Time) (time.Time, error) {
	if ts.After(c.now) {
		c.now = ts
		if err := c.save(); err != nil {
			return c.now, err
		}
	}
	return c.now, nil
}

// next returns the number of the next record the step keeps.
func (c *stepClock) next() (uint64, error) {
	c.seq++
	return c.seq, c.save()
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
