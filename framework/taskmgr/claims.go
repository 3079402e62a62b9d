package taskmgr

import (
	"errors"
	"fmt"
	"time"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
)

// The claim check: a claim that can never be met is a producer's mistake
// that would otherwise hold its record at the gate forever, silently. It is
// caught in two places, both here:
//
//   - at the topology's edge, as a record arrives (Config.CheckClaims): a
//     task hands back every claim of the record beyond what it knows of
//     its channel's end (causal.ClaimError.Claims); the manager learns
//     those ends at once (Offsets.ClaimEnd) and lets the task try again.
//     A claim still beyond its end is bad input of the record that carries
//     it, so it never reaches a stamp, and the error names that record;
//   - on any channel, once a head has waited a while (CheckBlocked): if
//     the owner has read the claimed channel to its end and the claim lies
//     beyond it, the task fails.
//
// An end is the partition's high watermark, which counts records of open
// transactions too. A producer that stamps a claim from a delivery report
// of a record written with acks=all (the default) therefore always claims
// below it.

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
	return fmt.Sprintf("%s@%d claims %s up to offset %d, which can never be met: %s ends at offset %d (its high watermark, which counts the records of open transactions too); "+
		"the producer of that record stamped an offset that does not exist", e.Record.Channel, e.Record.Offset, e.Claim.Channel, e.Claim.Offset, e.Claim.Channel, e.End-1)
}

// FailedRecord is the record that carries the claim: the one to skip.
func (e *UnsatisfiableClaimError) FailedRecord() causal.Entry { return e.Record }

// resolveClaims settles the claim error err that t's task returned for
// rec, in one round: it learns the end of every claimed channel the error
// names, and either hands the record back to the task or, for a claim
// beyond its end, has the task take it in as bad input. It returns the
// task's final error.
func (m *Manager) resolveClaims(t *Task, rec framework.Record, err error) error {
	var ce *causal.ClaimError
	if !errors.As(err, &ce) {
		return err
	}
	for _, claim := range ce.Claims {
		end, lerr := m.cfg.Offsets.ClaimEnd(claim)
		if lerr != nil {
			return fmt.Errorf("check the claims of %s/%d@%d: %w", rec.Topic, rec.Partition, rec.Offset, lerr)
		}
		if end <= claim.Offset {
			return t.task.ReceiveBad(rec, &UnsatisfiableClaimError{Record: causal.Entry{Channel: ce.Channel, Offset: ce.Offset}, Claim: claim, End: end})
		}
		t.task.SetEnd(claim.Channel, end)
	}
	err = t.task.Receive(rec)
	if errors.Is(err, causal.ErrClaimBeyondEnd) {
		// Ends only grow, and each claim named is now below its end.
		return fmt.Errorf("check the claims of %s/%d@%d: a claim the ends just learned cover is still refused: %w", rec.Topic, rec.Partition, rec.Offset, err)
	}
	return err
}

// UnsatisfiableAfter is how long a head must have waited before
// CheckBlocked asks the log whether its claim can be met at all. It only
// decides when to look; nothing is ever delivered or advanced on a timer.
const UnsatisfiableAfter = 3 * time.Second

// CheckBlocked fails a running task whose head has waited at the gate for
// UnsatisfiableAfter (by the manager's clock, SetNow) on a claim that does
// not exist: the owner has read the claimed channel up to position (the
// next offset it reads of each channel) and that is its end
// (Offsets.Watermarks), and the claim lies beyond it. A real cause was
// appended before the record that claims it, so such a claim is a
// producer's mistake, and waiting would be silent forever. The log is
// asked at most once per claim per UnsatisfiableAfter. CheckBlocked
// reports whether the open transaction must abort (see Fail).
func (m *Manager) CheckBlocked(position map[causal.Channel]int64) (mustAbort bool) {
	now := m.now
	for _, t := range m.tasks {
		if t.state != Running || t.task == nil {
			continue
		}
		for ch, b := range t.blocked {
			pos, ok := position[b.On]
			if !ok || now.Sub(b.Since) < UnsatisfiableAfter || now.Sub(b.Checked) < UnsatisfiableAfter {
				continue
			}
			b.Checked = now
			t.SetBlocked(ch, b)
			_, high, err := m.cfg.Offsets.Watermarks(b.On)
			if err != nil || pos < high || b.Off < high {
				continue
			}
			if m.Fail(t, &UnsatisfiableClaimError{Record: causal.Entry{Channel: ch, Offset: b.Head},
				Claim: causal.Entry{Channel: b.On, Offset: b.Off}, End: high}) {
				mustAbort = true
			}
		}
	}
	return mustAbort
}
