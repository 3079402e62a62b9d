package runtime

import (
	"fmt"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/runtime/internal/transport"
)

// The claim check lives in the task manager (framework/taskmgr/claims.go);
// the thread answers it with the ends of claimed channels, here, and runs
// its timed half (taskmgr.Manager.CheckBlocked) from the liveness pass.

// claimCheck keeps the ends of channels that claims named, as last
// learned: an end only grows, so one that covers a claim needs no broker
// request.
//
//causeway:owned
type claimCheck struct {
	ends map[causal.Channel]int64
}

// cachedWatermarks is the consumer's own view of partitions' bounds.
type cachedWatermarks interface {
	CachedWatermarks(ch causal.Channel) (low, high int64, ok bool)
}

// clusterOffsets is what the task manager asks of the cluster: offsets
// from the consumer, and claimed channels' ends through the claim check.
type clusterOffsets struct {
	transport.OffsetSource
	check *claimCheck
}

// over returns the task manager's view of the cluster through offsets.
func (c *claimCheck) over(offsets transport.OffsetSource) clusterOffsets {
	return clusterOffsets{OffsetSource: offsets, check: c}
}

// ClaimEnd returns the end of the claim's channel, or -1 when the channel
// does not exist: from what the thread learned before when that covers the
// claim, else from the consumer's own view of the partition, else from the
// broker.
func (o clusterOffsets) ClaimEnd(claim causal.Entry) (int64, error) {
	ch, known := claim.Channel, o.check.ends
	if end, ok := known[ch]; ok && end > claim.Offset {
		return end, nil
	}
	if cached, ok := o.OffsetSource.(cachedWatermarks); ok {
		if _, high, ok := cached.CachedWatermarks(ch); ok && high > claim.Offset {
			known[ch] = high
			return high, nil
		}
	}
	_, high, err := o.Watermarks(ch)
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
