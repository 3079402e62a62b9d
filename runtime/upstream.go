package runtime

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
)

// A causal query's clock may name records that reach the store only
// through other processors: a line a client wrote, whose words a counter
// counts after a repartition. Such a claim is followed hop by hop, as a
// barrier: once the application has committed the record's channel past
// the record (every processor reading it delivered it, and committed its
// outputs in the same transaction), everything the record caused on the
// way lies below the current ends of those processors' outputs, so the
// claim becomes one on each of those ends. Repeated until every claim is
// on the store's own inputs, where the pump checks it (caughtUp).

// clusterOffsets is what following a clock upstream asks of the cluster.
type clusterOffsets interface {
	// GroupCommitted returns the application's committed offsets (the
	// next offset to read) of chs; a channel with none is left out.
	GroupCommitted(ctx context.Context, chs []causal.Channel) (map[causal.Channel]int64, error)
	// Ends returns the end offsets of chs counting records of open
	// transactions (the high watermark): a committed transaction's records
	// are below it even before its markers are written.
	Ends(ctx context.Context, chs []causal.Channel) (map[causal.Channel]int64, error)
}

// upstreamView is what a worker follows clocks upstream with.
type upstreamView struct {
	cluster clusterOffsets
	// partitions is the partition count of every topic of the topology.
	partitions map[string]int32
}

// upstreamPlan is how records of each topic reach one processor's store.
type upstreamPlan struct {
	// inputs are the processor's own inputs.
	inputs map[string]bool
	// via maps a topic whose records reach the processor through other
	// processors to the outputs of those processors that lead there.
	via map[string][]string
	// cyclic: the processors leading to the store form a cycle, so a
	// claim can never be followed to its end.
	cyclic bool
}

// planUpstream works out, from the topology alone, which topics reach the
// processor named, and through which outputs.
func planUpstream(topo *framework.Topology, processor string) upstreamPlan {
	plan := upstreamPlan{inputs: map[string]bool{}, via: map[string][]string{}}
	procs := topo.Processors()
	for _, pi := range procs {
		if pi.Name == processor {
			for _, in := range pi.Inputs {
				plan.inputs[in] = true
			}
		}
	}
	// reaches holds the topics whose records can reach the processor.
	reaches := maps.Clone(plan.inputs)
	for grown := true; grown; {
		grown = false
		for _, pi := range procs {
			for _, in := range pi.Inputs {
				for _, out := range pi.Outputs {
					if !reaches[out.Topic] || (out.FedBy != nil && !slices.Contains(out.FedBy, in)) {
						continue
					}
					if !slices.Contains(plan.via[in], out.Topic) {
						plan.via[in] = append(plan.via[in], out.Topic)
					}
					if !reaches[in] {
						reaches[in], grown = true, true
					}
				}
			}
		}
	}
	// A cycle among the topics that reach the store: depth-first search.
	const (
		unseen = iota
		open
		closed
	)
	mark := map[string]int{}
	var visit func(t string) bool
	visit = func(t string) bool {
		switch mark[t] {
		case open:
			return true
		case closed:
			return false
		}
		mark[t] = open
		for _, next := range plan.via[t] {
			if visit(next) {
				return true
			}
		}
		mark[t] = closed
		return false
	}
	for t := range plan.via {
		if visit(t) {
			plan.cyclic = true
			break
		}
	}
	return plan
}

// throughUpstream turns q's clock into one that names only records of the
// store's own inputs: claims on topics that cannot reach the store are
// dropped, and claims on topics that reach it through other processors are
// followed through them (see the top of this file), waiting until until
// for the application to commit what they name. It returns ErrNotCaughtUp
// when the wait is over, and ErrClockNotCheckable when a claim cannot be
// followed (the processors on the way form a cycle).
func (w *Worker) throughUpstream(ctx context.Context, q Query, until time.Time) (causal.Clock, error) {
	pi, _, ok := w.storeOwner(q.Store)
	if !ok {
		return causal.Clock{}, fmt.Errorf("%w: %q", ErrUnknownStore, q.Store)
	}
	walk := &upstreamWalk{plan: planUpstream(w.topo, pi.Name), direct: map[causal.Channel]int64{}, pending: map[causal.Channel]int64{}}
	for ch, off := range q.After.All() {
		walk.claim(ch, off)
	}
	if len(walk.pending) > 0 && walk.plan.cyclic {
		return causal.Clock{}, fmt.Errorf("%w: the processors before %s form a cycle", ErrClockNotCheckable, pi.Name)
	}
	w.mu.Lock()
	view := w.upstream
	w.mu.Unlock()
	if len(walk.pending) > 0 && view == nil {
		return causal.Clock{}, fmt.Errorf("%w: this worker cannot read the group's offsets", ErrClockNotCheckable)
	}
	backoff := 5 * time.Millisecond
	for len(walk.pending) > 0 {
		passed, err := walk.passed(ctx, view)
		if err != nil {
			return causal.Clock{}, err
		}
		if len(passed) == 0 {
			if !time.Now().Add(backoff).Before(until) {
				return causal.Clock{}, fmt.Errorf("%w: records before %s not committed by %s", ErrNotCaughtUp, pi.Name, until.Format(time.RFC3339Nano))
			}
			if err := w.sleep(ctx, backoff); err != nil {
				return causal.Clock{}, err
			}
			backoff = min(2*backoff, 100*time.Millisecond)
			continue
		}
		if err := walk.follow(ctx, view, passed); err != nil {
			return causal.Clock{}, err
		}
	}
	entries := make([]causal.Entry, 0, len(walk.direct))
	for ch, off := range walk.direct {
		entries = append(entries, causal.Entry{Channel: ch, Offset: off})
	}
	return causal.NewClock(entries...)
}

// upstreamWalk follows the claims of one query's clock through the
// processors before a store: direct holds the claims on the store's own
// inputs, pending those on topics further up whose records have yet to be
// committed through the processors in between.
type upstreamWalk struct {
	plan            upstreamPlan
	direct, pending map[causal.Channel]int64
}

// claim takes in a claim on ch up to off: kept where ch is an input of the
// store's processor, pending where ch reaches it through others.
func (u *upstreamWalk) claim(ch causal.Channel, off int64) {
	if u.plan.inputs[ch.Topic] {
		u.direct[ch] = max(u.direct[ch], off)
	}
	if _, through := u.plan.via[ch.Topic]; through {
		if cur, ok := u.pending[ch]; !ok || off > cur {
			u.pending[ch] = off
		}
	}
}

// passed returns the pending channels whose claims the group has committed
// past.
func (u *upstreamWalk) passed(ctx context.Context, view *upstreamView) ([]causal.Channel, error) {
	committed, err := view.cluster.GroupCommitted(ctx, slices.Collect(maps.Keys(u.pending)))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotAvailable, err)
	}
	var passed []causal.Channel
	for ch, off := range u.pending {
		if next, ok := committed[ch]; ok && next > off {
			passed = append(passed, ch)
		}
	}
	return passed, nil
}

// follow settles the claims on passed: each becomes a claim on the ends of
// the outputs it reaches the store through, as they are now.
func (u *upstreamWalk) follow(ctx context.Context, view *upstreamView, passed []causal.Channel) error {
	outs := map[causal.Channel]bool{} // each once: the admin client refuses duplicates
	for _, ch := range passed {
		delete(u.pending, ch)
		for _, topic := range u.plan.via[ch.Topic] {
			n := view.partitions[topic]
			if n <= 0 {
				return fmt.Errorf("%w: the partitions of %s are not known yet", ErrNotAvailable, topic)
			}
			for p := range n {
				outs[causal.Channel{Topic: topic, Partition: p}] = true
			}
		}
	}
	ends, err := view.cluster.Ends(ctx, slices.Collect(maps.Keys(outs)))
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNotAvailable, err)
	}
	for ch, end := range ends {
		if end > 0 {
			u.claim(ch, end-1)
		}
	}
	return nil
}

// sleep waits d, or less if ctx ends or the worker stops.
func (w *Worker) sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-w.done:
		return ErrStopped
	}
}
