package taskmgr

import (
	"errors"
	"fmt"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
)

// Handing records to tasks, and checking the claims that enter the
// topology (Config.CheckClaims): a claim must name a record that exists.
// A gate hands back a claim beyond what it knows of the claimed channel's
// end; the manager learns that end through Config.ClaimEnd and lets the
// gate try again. A claim still beyond the end is bad input of the record
// that carries it, so it never reaches a stamp, and the error names that
// record.

// maxClaimRounds bounds how many claimed channels one record's check
// learns the end of; a clock with more unknown channels than this fails
// the task, naming it.
const maxClaimRounds = 64

// UnsatisfiableClaimError is the failure of a task that received a record
// claiming an offset that does not exist: beyond the end of a partition
// read to its end, or on a topic that does not exist. Record is the record
// that carries the claim.
type UnsatisfiableClaimError struct {
	Record causal.Entry
	Claim  causal.Entry
	// End is the claimed channel's end offset (-1 when its topic does not
	// exist).
	End int64
}

// Error implements error.
func (e *UnsatisfiableClaimError) Error() string {
	if e.End < 0 {
		return fmt.Sprintf("%s@%d claims %s up to offset %d, but topic %q does not exist: the producer of that record stamped a claim on nothing",
			e.Record.Channel, e.Record.Offset, e.Claim.Channel, e.Claim.Offset, e.Claim.Channel.Topic)
	}
	return fmt.Sprintf("%s@%d claims %s up to offset %d, which can never be met: %s ends at offset %d and the consumer has read it all; "+
		"the producer of that record stamped an offset that does not exist", e.Record.Channel, e.Record.Offset, e.Claim.Channel, e.Claim.Offset, e.Claim.Channel, e.End-1)
}

// FailedRecord is the record that carries the claim: the one to skip.
func (e *UnsatisfiableClaimError) FailedRecord() causal.Entry { return e.Record }

// Deliver hands rec, the next record of r's channel, to every task of r
// that is to receive it (Route.Wants), and moves r's position to it. A
// task that refuses it fails on its own. Deliver reports whether the open
// transaction must abort (see Fail).
func (m *Manager) Deliver(r *Route, rec framework.Record) (mustAbort bool) {
	for i, t := range r.Tasks {
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
	r.Pos = rec.Offset
	return mustAbort
}

// Advance tells the running tasks of r that their channel has nothing
// before position left to read. It reports whether the open transaction
// must abort.
func (m *Manager) Advance(r *Route, position int64) (mustAbort bool) {
	for _, t := range r.Tasks {
		if t.state != Running {
			continue
		}
		if err := t.task.Advance(r.Ch.Topic, position); err != nil && m.Fail(t, err) {
			mustAbort = true
		}
	}
	return mustAbort
}

// resolveClaims settles the claim error err that t's task returned for
// rec, and any that follow it, and returns the task's final error.
func (m *Manager) resolveClaims(t *Task, rec framework.Record, err error) error {
	if m.cfg.ClaimEnd == nil {
		return err
	}
	for range maxClaimRounds {
		var ce *causal.ClaimError
		if !errors.As(err, &ce) {
			return err
		}
		end, lerr := m.cfg.ClaimEnd(ce.Claim)
		if lerr != nil {
			return fmt.Errorf("check the claims of %s/%d@%d: %w", rec.Topic, rec.Partition, rec.Offset, lerr)
		}
		if end <= ce.Claim.Offset {
			return t.task.ReceiveBad(rec, &UnsatisfiableClaimError{Record: causal.Entry{Channel: ce.Channel, Offset: ce.Offset}, Claim: ce.Claim, End: end})
		}
		t.task.SetEnd(ce.Claim.Channel, end)
		err = t.task.Receive(rec)
	}
	return fmt.Errorf("check the claims of %s/%d@%d: more than %d channels to look up: %w", rec.Topic, rec.Partition, rec.Offset, maxClaimRounds, err)
}
