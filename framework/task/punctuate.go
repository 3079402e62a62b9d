package task

// Punctuation: the callbacks a processor schedules, on stream time or
// on the wall clock.

import (
	"fmt"
	"slices"
	"time"

	"github.com/causeway-stream/causeway/framework"
)

type schedule struct {
	id       int
	interval time.Duration
	typ      framework.PunctuationType
	next     time.Time
	fn       framework.Punctuator
	anchored bool
}

// Punctuate runs the wall-clock punctuations that are due at now.
func (t *Task) Punctuate(now time.Time) error {
	if t.err != nil {
		return t.err
	}
	if err := t.punctuate(framework.WallClockTime, now); err != nil {
		return t.fail(err)
	}
	return nil
}

func (t *Task) punctuate(typ framework.PunctuationType, now time.Time) error {
	if now.IsZero() {
		return nil
	}
	var due []*schedule
	for _, s := range t.schedules {
		switch {
		case s.typ != typ:
		case !s.anchored:
			s.next, s.anchored = now.Add(s.interval), true
		case !now.Before(s.next):
			for !now.Before(s.next) {
				s.next = s.next.Add(s.interval)
			}
			due = append(due, s) // allocates only when something fires
		}
	}
	for _, s := range due {
		// A callback may have cancelled a later one.
		if !slices.Contains(t.schedules, s) {
			continue
		}
		if err := s.fn(t.ctx, now); err != nil {
			return fmt.Errorf("punctuate (%s): %w", typ, err)
		}
	}
	return nil
}
