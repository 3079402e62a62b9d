package transport

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/causeway-stream/causeway/causal"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

func franzOffsets(at map[causal.Channel]int64) map[string]map[int32]kgo.EpochOffset {
	out := map[string]map[int32]kgo.EpochOffset{}
	for ch, off := range at {
		if out[ch.Topic] == nil {
			out[ch.Topic] = map[int32]kgo.EpochOffset{}
		}
		out[ch.Topic][ch.Partition] = kgo.EpochOffset{Epoch: -1, Offset: off}
	}
	return out
}

func franzPartitions(chs []causal.Channel) map[string][]int32 {
	out := map[string][]int32{}
	for _, ch := range chs {
		out[ch.Topic] = append(out[ch.Topic], ch.Partition)
	}
	return out
}

func (c *franzConsumer) Position(chs []causal.Channel) (map[causal.Channel]int64, error) {
	out := make(map[causal.Channel]int64, len(chs))
	for _, ch := range chs {
		if off, ok := c.positions[ch]; ok {
			out[ch] = off
		}
	}
	return out, nil
}

func (c *franzConsumer) CachedWatermarks(ch causal.Channel) (low, high int64, ok bool) {
	high, ok = c.highs[ch]
	return 0, high, ok
}

func (c *franzConsumer) Committed(chs []causal.Channel) (map[causal.Channel]int64, error) {
	// Long enough for a transaction that a worker left open when it died
	// to time out (10 s, see the producer), which settles its offsets.
	ctx, cancel := context.WithTimeout(context.Background(), 3*franzRequestTimeout)
	defer cancel()
	return franzGroupOffsets(kadm.RequireStable(ctx), c.adm, c.group, chs)
}

// franzGroupOffsets returns group's committed offsets of chs. Offsets a
// transaction still holds open are waited for (UNSTABLE_OFFSET_COMMIT, the
// answer to a stable fetch while they are), as librdkafka does, within
// ctx.
func franzGroupOffsets(ctx context.Context, adm *kadm.Client, group string, chs []causal.Channel) (map[causal.Channel]int64, error) {
	var res kadm.OffsetResponses
	err := retryWhile(ctx, franzBackoff(1), time.Second, func() error {
		var err error
		if res, err = adm.FetchOffsets(ctx, group); err != nil {
			return err
		}
		return res.Error()
	}, kerr.UnstableOffsetCommit, kerr.CoordinatorLoadInProgress)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return map[causal.Channel]int64{}, nil // nothing committed yet
	}
	if err != nil {
		return nil, fmt.Errorf("committed offsets of group %s: %w", group, franzError(err))
	}
	out := make(map[causal.Channel]int64, len(chs))
	for _, ch := range chs {
		if o, ok := res.Lookup(ch.Topic, ch.Partition); ok && o.At >= 0 {
			out[ch] = o.At
		}
	}
	return out, nil
}

func (c *franzConsumer) Watermarks(ch causal.Channel) (low, high int64, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), franzRequestTimeout)
	defer cancel()
	starts, err := c.adm.ListStartOffsets(ctx, ch.Topic)
	if err != nil {
		return 0, 0, franzError(err)
	}
	ends, err := c.adm.ListEndOffsets(ctx, ch.Topic)
	if err != nil {
		return 0, 0, franzError(err)
	}
	if low, err = franzListed(starts, ch); err != nil {
		return 0, 0, fmt.Errorf("start offset of %s: %w", ch, err)
	}
	if high, err = franzListed(ends, ch); err != nil {
		return 0, 0, fmt.Errorf("end offset of %s: %w", ch, err)
	}
	return low, high, nil
}

// franzListed is ch's offset in a listing of start or end offsets.
func franzListed(l kadm.ListedOffsets, ch causal.Channel) (int64, error) {
	o, ok := l.Lookup(ch.Topic, ch.Partition)
	switch {
	case !ok:
		return 0, franzError(kerr.UnknownTopicOrPartition)
	case o.Err != nil:
		return 0, franzError(o.Err)
	}
	return o.Offset, nil
}
