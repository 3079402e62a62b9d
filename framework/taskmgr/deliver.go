package taskmgr

import (
	"errors"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
)

// Deliver hands rec, the next record of r's channel, to every task of r
// that is to receive it (Route.Wants), and moves r's position to it. A
// claim the task cannot show to exist is checked first (claims.go). A
// task that refuses the record fails on its own. Deliver reports whether the open
// transaction must abort (see Fail).
func (m *Manager) Deliver(r *Route, rec framework.Record) (mustAbort bool) {
	for i, t := range r.readers {
		if !r.Wants(i, rec.Offset) {
			continue // failed, or received before a rebuild of another task rewound the channel
		}
		if err := t.task.Receive(rec); err != nil {
			if errors.Is(err, causal.ErrClaimBeyondEnd) {
				err = m.resolveClaims(t, rec, err)
			}
			if err != nil && m.Fail(t, err) {
				mustAbort = true
			}
		}
	}
	r.pos = rec.Offset
	return mustAbort
}

// Advance tells the running tasks of r that their channel has nothing
// before position left to read. It reports whether the open transaction
// must abort.
func (m *Manager) Advance(r *Route, position int64) (mustAbort bool) {
	for _, t := range r.readers {
		if t.state != Running {
			continue
		}
		if err := t.task.Advance(r.ch.Topic, position); err != nil && m.Fail(t, err) {
			mustAbort = true
		}
	}
	return mustAbort
}
