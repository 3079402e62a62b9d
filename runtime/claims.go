package runtime

import (
	"fmt"
	"time"

	"go.uber.org/zap"

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
// from the consumer, read again while they cannot be read for now, and
// claimed channels' ends through the claim check.
type clusterOffsets struct {
	transport.OffsetSource
	check *claimCheck
	// stop is the thread's: closed when it stops.
	stop <-chan struct{}
	log  *zap.Logger
}

// over returns the task manager's view of the cluster through offsets,
// for a thread that stops when stop closes.
func (c *claimCheck) over(offsets transport.OffsetSource, stop <-chan struct{}, log *zap.Logger) clusterOffsets {
	return clusterOffsets{OffsetSource: offsets, check: c, stop: stop, log: log}
}

// committedBackoff is the first and the longest wait between two reads of
// the group's committed offsets.
const (
	committedBackoff    = 200 * time.Millisecond
	committedBackoffMax = 5 * time.Second
)

// Committed reads the group's committed offsets of chs, again after a
// retriable error until the thread stops. A read can time out while a
// member that died left a transaction open that holds offsets, until the
// broker aborts it (the transaction timeout), or while the group's
// coordinator moves: the tasks being built wait for the offsets instead
// of stopping the thread. Once it stops, the error is ErrStopped.
func (o clusterOffsets) Committed(chs []causal.Channel) (map[causal.Channel]int64, error) {
	backoff := committedBackoff
	for attempt := 1; ; attempt++ {
		got, err := o.OffsetSource.Committed(chs)
		if err == nil || transport.Classify(err) != transport.ClassRetriable {
			return got, err
		}
		o.log.Warn("the group's committed offsets cannot be read for now; reading them again", zap.Int("attempt", attempt),
			zap.Duration("backoff", backoff), zap.Error(err))
		t := time.NewTimer(backoff)
		select {
		case <-o.stop:
			t.Stop()
			return nil, fmt.Errorf("%w while reading the group's committed offsets: %w", ErrStopped, err)
		case <-t.C:
		}
		backoff = min(2*backoff, committedBackoffMax)
	}
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
