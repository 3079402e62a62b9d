package runtime

import (
	"fmt"
	"time"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/runtime/internal/transport"
)

// The claim check: a claim that can never be met is a producer's mistake
// that would otherwise hold its record at the gate forever, silently. It is
// caught in two places, both here:
//
//   - at the topology's edge, as a record arrives (taskmgr.Config.
//     CheckClaims): a claim beyond what the task knows of a channel's end
//     is checked against the end (claimEnd), and a claim beyond the end
//     fails the task;
//   - on any channel, once a head has waited a while (checkUnsatisfiable):
//     if the consumer has read the claimed channel to its end and the claim
//     lies beyond it, the task fails.
//
// An end is the partition's high watermark, which counts records of open
// transactions too. A producer that stamps a claim from a delivery report
// of a record written with acks=all (the default) therefore always claims
// below it.

// claimCheck keeps the ends of channels that claims named, as last
// learned: an end only grows, so one that covers a claim needs no broker
// request.
//
//causeway:owned
type claimCheck struct {
	ends map[causal.Channel]int64
}

// claimEnd returns the end of the claim's channel, or -1 when the channel
// does not exist: from what the thread learned before when that covers the
// claim, else from the consumer's own view of the partition, else from the
// broker.
func (w *StreamThread) claimEnd(claim causal.Entry) (int64, error) {
	ch, known := claim.Channel, w.claims.ends
	if end, ok := known[ch]; ok && end > claim.Offset {
		return end, nil
	}
	if _, high, ok := w.consumer.CachedWatermarks(ch); ok && high > claim.Offset {
		known[ch] = high
		return high, nil
	}
	_, high, err := w.consumer.Watermarks(ch)
	switch {
	case err == nil:
	case transport.KindOf(err) == transport.KindUnknownPartition:
		return -1, nil
	default:
		return 0, fmt.Errorf("end of %s: %w", ch, err)
	}
	known[ch] = high
	return high, nil
}

// unsatisfiableAfter is how long a head must have waited before the worker
// asks the broker whether its claim can be met at all. It only decides
// when to look; nothing is ever delivered or advanced on a timer.
const unsatisfiableAfter = 3 * time.Second

// checkUnsatisfiable fails a task whose blocked head claims an offset that
// does not exist: the consumer has read its channel to the end and the
// claim lies beyond it. A real cause was appended before the record that
// claims it, so such a claim is a producer's mistake, and waiting would be
// silent forever.
func (w *StreamThread) checkUnsatisfiable(position map[causal.Channel]int64) {
	now := w.now()
	for _, rt := range w.tasks.Tasks() {
		if rt.State() != StateRunning || rt.Task() == nil {
			continue
		}
		for ch, b := range rt.BlockedChannels() {
			pos, ok := position[b.On]
			// At most one broker query per claim per unsatisfiableAfter.
			if !ok || now.Sub(b.Since) < unsatisfiableAfter || now.Sub(b.Checked) < unsatisfiableAfter {
				continue
			}
			b.Checked = now
			rt.SetBlocked(ch, b)
			_, high, err := w.consumer.Watermarks(b.On)
			if err != nil || pos < high || b.Off < high {
				continue
			}
			w.failTask(rt, &UnsatisfiableClaimError{Record: causal.Entry{Channel: ch, Offset: b.Head},
				Claim: causal.Entry{Channel: b.On, Offset: b.Off}, End: high})
		}
	}
}
