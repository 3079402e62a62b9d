package transport

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/causeway-stream/causeway/causal"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (p *franzProducer) SendOffsetsToTransaction(ctx context.Context, offsets map[causal.Channel]int64, md GroupMetadata) error {
	g, _ := md.(franzGroup)
	id, epoch, err := p.cl.ProducerID(ctx)
	if err != nil {
		return franzError(err)
	}
	if !p.offsetsAdded {
		req := kmsg.NewPtrAddOffsetsToTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = p.txnID, id, epoch, p.group
		if err := p.retryConcurrent(ctx, func() error {
			resp, err := req.RequestWith(ctx, p.cl)
			if err != nil {
				return err
			}
			return kerr.ErrorForCode(resp.ErrorCode)
		}); err != nil {
			return franzError(fmt.Errorf("add offsets to transaction: %w", err))
		}
		p.offsetsAdded = true
	}
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = p.txnID, p.group, id, epoch
	req.Generation, req.MemberID = g.generation, g.memberID
	if g.instanceID != "" {
		req.InstanceID = &g.instanceID
	}
	for topic, ps := range franzOffsets(offsets) {
		t := kmsg.NewTxnOffsetCommitRequestTopic()
		t.Topic = topic
		for part, eo := range ps {
			pt := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			pt.Partition, pt.Offset, pt.LeaderEpoch = part, eo.Offset, -1
			t.Partitions = append(t.Partitions, pt)
		}
		req.Topics = append(req.Topics, t)
	}
	err = p.retryConcurrent(ctx, func() error {
		resp, err := req.RequestWith(ctx, p.cl)
		if err != nil {
			return err
		}
		for _, t := range resp.Topics {
			for _, pt := range t.Partitions {
				if err := kerr.ErrorForCode(pt.ErrorCode); err != nil {
					return fmt.Errorf("%s: %w", PartitionString(t.Topic, pt.Partition), err)
				}
			}
		}
		return nil
	})
	if err != nil {
		return franzError(fmt.Errorf("commit offsets in transaction: %w", err))
	}
	return nil
}

// retryConcurrent runs f again, until ctx is done, while the broker says
// another transaction of this producer is still ending (as it does for a
// while after a commit) or its coordinator is not there yet, as
// librdkafka's transactional calls do inside.
func (p *franzProducer) retryConcurrent(ctx context.Context, f func() error) error {
	return retryWhile(ctx, 10*time.Millisecond, 500*time.Millisecond, f, kerr.ConcurrentTransactions,
		kerr.CoordinatorNotAvailable, kerr.NotCoordinator, kerr.CoordinatorLoadInProgress)
}

// retryWhile runs f again while it fails with one of the errors in
// retry, until ctx is done, waiting first and then twice as long each
// time up to most; it returns f's last error.
func retryWhile(ctx context.Context, first, most time.Duration, f func() error, retry ...error) error {
	for wait := first; ; wait = min(2*wait, most) {
		err := f()
		if !slices.ContainsFunc(retry, func(r error) bool { return errors.Is(err, r) }) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
	}
}

// endTxn ends the open transaction with an EndTxn of the transport's own,
// for a transaction kgo holds nothing of: offsets and no record.
func (p *franzProducer) endTxn(ctx context.Context, commit bool) error {
	id, epoch, err := p.cl.ProducerID(ctx)
	if err != nil {
		return franzError(err)
	}
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = p.txnID, id, epoch, commit
	err = p.retryConcurrent(ctx, func() error {
		resp, err := req.RequestWith(ctx, p.cl)
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(resp.ErrorCode)
	})
	return franzError(err)
}

func (p *franzProducer) Flush(ctx context.Context) error {
	if err := p.cl.Flush(ctx); err != nil {
		return franzError(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failed
}

func (p *franzProducer) CommitTransaction(ctx context.Context) error {
	if err := p.Flush(ctx); err != nil {
		return err
	}
	if err := p.cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return franzError(err)
	}
	if p.offsetsAdded && p.sent == 0 {
		if err := p.endTxn(ctx, true); err != nil {
			return err
		}
	}
	p.sent, p.offsetsAdded = 0, false
	p.recycle()
	return nil
}

func (p *franzProducer) AbortTransaction(ctx context.Context) error {
	if err := p.cl.AbortBufferedRecords(ctx); err != nil {
		return franzError(err)
	}
	if err := p.cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
		return franzError(err)
	}
	if p.offsetsAdded {
		// kgo ends only a transaction it added a partition to. Ending
		// one already ended again is no error worth reporting.
		if err := p.endTxn(ctx, false); err != nil && Classify(err) == ClassFatal {
			return err
		}
	}
	p.sent, p.offsetsAdded = 0, false
	p.recycle()
	return nil
}
