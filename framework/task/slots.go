package task

// The gate's slots: every record a task receives takes a slot in its
// table until delivered or dropped, and the gate holds the slot's index.

import (
	"time"

	"github.com/causeway-stream/causeway/framework"
)

// nextSlot is the index of the slot reserve would take next, left free
// until it does.
func (t *Task) nextSlot() int32 {
	if n := len(t.free); n > 0 {
		return t.free[n-1]
	}
	return int32(len(t.held))
}

// reserve takes a free slot of held, growing held when none is, and
// returns its index; the slot is empty.
func (t *Task) reserve() int32 {
	if n := len(t.free); n > 0 {
		i := t.free[n-1]
		t.free = t.free[:n-1]
		return i
	}
	t.held = append(t.held, received{})
	return int32(len(t.held) - 1)
}

// slot puts rec, received at now, in a free slot of held and returns its
// index, the payload the gate carries for it.
func (t *Task) slot(rec framework.Record, now time.Time) int32 {
	i := t.reserve()
	t.held[i] = received{rec: rec, at: now}
	return i
}

// release frees slot i unless the gate took its record in (taken).
func (t *Task) release(i int32, taken bool) {
	if !taken {
		t.freeSlot(i)
	}
}

// freeSlot empties slot i, so that it holds on to no record, and lists it
// as free.
func (t *Task) freeSlot(i int32) {
	t.held[i] = received{}
	t.free = append(t.free, i)
}
