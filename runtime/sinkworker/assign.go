package sinkworker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/connect"
	"go.uber.org/zap"
)

// rebalance hears the group's rebalances.
type rebalance struct {
	w   *Worker
	ctx context.Context
}

func (r rebalance) Assigned(chs []causal.Channel) error {
	if err := r.w.assigned(r.ctx, chs); err != nil {
		r.w.fail(err)
		return err
	}
	return nil
}

func (r rebalance) Revoked(chs []causal.Channel, lost bool) {
	r.w.log.Info("channels revoked", zap.String("channels", fmt.Sprint(chs)), zap.Bool("lost", lost))
	ctx := context.WithoutCancel(r.ctx)
	if lost {
		if err := r.w.await(); err != nil {
			r.w.log.Warn("a commit in flight when the assignment was lost", zap.Error(err))
		}
		if err := r.w.cfg.Task.Abort(ctx); err != nil {
			r.w.log.Warn("abort after the assignment was lost", zap.Error(err))
		}
	} else if err := r.w.commit(ctx); err != nil {
		r.w.fail(err)
	}
	r.w.setAssignment(nil)
}

// setAssignment replaces the worker's assignment.
func (w *Worker) setAssignment(a *assignment) { w.assignment = a }

// assigned starts reading chs where the sink's positions say, and builds
// the gate over every channel of the connector's topics.
func (w *Worker) assigned(ctx context.Context, chs []causal.Channel) error {
	positions, err := w.cfg.Task.Positions(ctx)
	if err != nil {
		return err
	}
	a := &assignment{own: map[causal.Channel]int64{}, lastRefresh: time.Now(), txns: newTxnTracker(w.cfg.TransactionTopic)}
	starts := map[causal.Channel]int64{}
	for _, ch := range chs {
		pos, ok := positions[ch]
		a.own[ch] = -1
		if ok {
			a.own[ch] = pos
		} else if pos, _, err = w.consumer.Watermarks(ch); err != nil {
			return fmt.Errorf("start of %s: %w", ch, err)
		}
		starts[ch] = pos
	}
	opts := []causal.NodeOpt{causal.Inputs(w.cfg.Topics...)}
	if w.cfg.GateOff {
		opts = append(opts, causal.DeliverOnArrival())
	}
	if a.node, err = causal.NewNode[held](opts...); err != nil {
		return err
	}
	for _, t := range w.cfg.Topics {
		for p := range w.counts[t] {
			ch := causal.Channel{Topic: t, Partition: p}
			next, ok := starts[ch]
			if !ok {
				next = positions[ch] // another task's: as far as it committed
			}
			if err := a.node.Seed(ch, next); err != nil {
				return err
			}
		}
	}
	if err := w.consumer.Assign(starts); err != nil {
		return err
	}
	w.setAssignment(a)
	w.log.Info("channels assigned", zap.String("starts", fmt.Sprint(starts)))
	return nil
}

// refresh reads the positions of other tasks' channels again when a head
// waits on one of them, and advances the gate over what they committed.
func (w *Worker) refresh(ctx context.Context, a *assignment) error {
	if a.node.Held() == 0 || time.Since(a.lastRefresh) < w.cfg.RefreshInterval || len(w.waitingOnOthers(a)) == 0 {
		return nil
	}
	a.lastRefresh = time.Now()
	positions, err := w.cfg.Task.Positions(ctx)
	switch {
	case err == nil:
		a.refreshFailures = 0
	case connect.IsRetriable(err) && a.refreshFailures < w.cfg.MaxRetries:
		// Read again after the backoff; nothing waits on it but what the
		// gate holds.
		a.refreshFailures++
		a.lastRefresh = a.lastRefresh.Add(w.cfg.RetryBackoff)
		w.log.Warn("read the other tasks' positions: a transient error; trying again",
			zap.Int("attempt", a.refreshFailures), zap.Duration("backoff", w.cfg.RetryBackoff), zap.Error(err))
		return nil
	default:
		return err
	}
	for ch, pos := range positions {
		if _, mine := a.own[ch]; mine || w.counts[ch.Topic] <= ch.Partition {
			continue
		}
		if err := a.node.Advance(ch, pos); err != nil && !errors.Is(err, causal.ErrNotInScope) {
			return err
		}
	}
	a.drain()
	return nil
}

// drain takes what the gate delivers now into pending, in order.
func (a *assignment) drain() {
	for d, ok := a.node.Next(); ok; d, ok = a.node.Next() {
		h := d.Payload
		a.txns.take(&h)
		a.pending = append(a.pending, h)
		a.txns.taken(len(a.pending))
	}
}
