package runtime

import (
	"fmt"

	"github.com/causeway-stream/causeway/causal"
)

// The end of a channel that a claim entering the topology names, for the
// task manager's claim check (taskmgr.Config.CheckClaims). The end is the
// partition's high watermark, which counts records of open transactions
// too. A producer that stamps a claim from a delivery report of a record
// written with acks=all (the default) therefore always claims below it.

// claimEnd returns the end of the claim's channel, or -1 when the channel
// does not exist: from what the worker learned before when that covers the
// claim, else from the consumer's own view of the partition, else from the
// broker.
func (w *StreamThread) claimEnd(claim causal.Entry) (int64, error) {
	ch := claim.Channel
	if end, ok := w.claimEnds[ch]; ok && end > claim.Offset {
		return end, nil
	}
	if _, high, ok := w.consumer.CachedWatermarks(ch); ok && high > claim.Offset {
		w.claimEnds[ch] = high
		return high, nil
	}
	_, high, err := w.consumer.Watermarks(ch)
	switch {
	case err == nil:
	case kindOf(err) == kindUnknownPartition:
		return -1, nil
	default:
		return 0, fmt.Errorf("end of %s: %w", ch, err)
	}
	w.claimEnds[ch] = high
	return high, nil
}
