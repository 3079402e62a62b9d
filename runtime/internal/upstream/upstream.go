// Package upstream follows the claims of a causal query's clock through
// the processors before the store it asks, to claims on the store's own
// inputs. It does no I/O of its own: what it asks of the cluster goes
// through Cluster.
package upstream

import (
	"context"
	"errors"
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
// on the store's own inputs, where the worker checks it against the store's own position.

// Errors of Follow.
var (
	// ErrCycle: the processors before the store form a cycle, so a claim
	// can never be followed to its end.
	ErrCycle = errors.New("the processors before the store form a cycle")
	// ErrNotCommitted: what the clock names was not committed through the
	// processors before the store by the deadline.
	ErrNotCommitted = errors.New("not committed in time")
	// ErrUnavailable: the cluster did not answer, or the partition counts
	// are not known yet.
	ErrUnavailable = errors.New("cluster not available")
)

// Cluster is what following a clock upstream asks of the cluster.
type Cluster interface {
	// GroupCommitted returns the application's committed offsets (the
	// next offset to read) of chs; a channel with none is left out.
	GroupCommitted(ctx context.Context, chs []causal.Channel) (map[causal.Channel]int64, error)
	// Ends returns the end offsets of chs counting records of open
	// transactions (the high watermark): a committed transaction's records
	// are below it even before its markers are written.
	Ends(ctx context.Context, chs []causal.Channel) (map[causal.Channel]int64, error)
}

// View is what a worker follows clocks upstream with: the cluster, and the
// partition count of every topic of the topology.
//
//causeway:owned
type View struct {
	cluster    Cluster
	partitions map[string]int32
	now        func() time.Time
	sleep      func(ctx context.Context, d time.Duration) error
}

// NewView returns a view on cluster. now is the clock the deadline of
// Follow is read by (default time.Now); sleep waits between two looks at
// the group's offsets (default: a timer, or until ctx ends).
func NewView(cluster Cluster, partitions map[string]int32, now func() time.Time, sleep func(ctx context.Context, d time.Duration) error) *View {
	if now == nil {
		now = time.Now
	}
	if sleep == nil {
		sleep = sleepCtx
	}
	return &View{cluster: cluster, partitions: partitions, now: now, sleep: sleep}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Partitions is the partition count of topic, or 0 when it is not known.
func (v *View) Partitions(topic string) int32 { return v.partitions[topic] }

// Beyond returns the first entry of c that claims an offset its channel
// has not reached (at or past its high watermark), with that end: a
// record that does not exist. ok is false when every claim names a
// record, or the ends cannot be read (then nothing can be said).
func (v *View) Beyond(ctx context.Context, c causal.Clock) (claim causal.Entry, end int64, ok bool) {
	if c.IsEmpty() {
		return causal.Entry{}, 0, false
	}
	chs := make([]causal.Channel, 0, c.Len())
	for ch := range c.All() {
		chs = append(chs, ch)
	}
	ends, err := v.cluster.Ends(ctx, chs)
	if err != nil {
		return causal.Entry{}, 0, false
	}
	for ch, off := range c.All() {
		if e, known := ends[ch]; known && off >= e {
			return causal.Entry{Channel: ch, Offset: off}, e, true
		}
	}
	return causal.Entry{}, 0, false
}

// Cyclic reports whether the processors leading to the store form a cycle.
func (p Plan) Cyclic() bool { return p.cyclic }

// Direct returns the claims of after on the plan's own inputs, and
// whether after names records further up, which Follow must follow.
func (p Plan) Direct(after causal.Clock) (causal.Clock, bool, error) {
	w := p.walk(after)
	c, err := w.clock()
	return c, len(w.pending) > 0, err
}

// Follow turns after into a clock on the store's own inputs: claims on
// topics that cannot reach the store are dropped, and claims on topics that
// reach it through other processors are followed through them, waiting
// until until for the application to commit what they name. Its errors
// wrap ErrCycle, ErrNotCommitted, ErrUnavailable, or ctx's.
func (v *View) Follow(ctx context.Context, p Plan, after causal.Clock, until time.Time) (causal.Clock, error) {
	w := p.walk(after)
	if len(w.pending) > 0 && p.cyclic {
		return causal.Clock{}, ErrCycle
	}
	backoff := 5 * time.Millisecond
	for len(w.pending) > 0 {
		passed, err := w.passed(ctx, v)
		if err != nil {
			return causal.Clock{}, err
		}
		if len(passed) == 0 {
			if !v.now().Add(backoff).Before(until) {
				return causal.Clock{}, fmt.Errorf("%w: by %s", ErrNotCommitted, until.Format(time.RFC3339Nano))
			}
			if err := v.sleep(ctx, backoff); err != nil {
				return causal.Clock{}, err
			}
			backoff = min(2*backoff, 100*time.Millisecond)
			continue
		}
		if err := w.follow(ctx, v, passed); err != nil {
			return causal.Clock{}, err
		}
	}
	return w.clock()
}

// walk starts a walk of after's claims.
func (p Plan) walk(after causal.Clock) *walk {
	w := &walk{plan: p, direct: map[causal.Channel]int64{}, pending: map[causal.Channel]int64{}}
	for ch, off := range after.All() {
		w.claim(ch, off)
	}
	return w
}

// clock is the walk's claims on the store's own inputs.
func (u *walk) clock() (causal.Clock, error) {
	entries := make([]causal.Entry, 0, len(u.direct))
	for ch, off := range u.direct {
		entries = append(entries, causal.Entry{Channel: ch, Offset: off})
	}
	return causal.NewClock(entries...)
}

// Plan is how records of each topic reach one processor's store.
type Plan struct {
	// inputs are the processor's own inputs.
	inputs map[string]bool
	// via maps a topic whose records reach the processor through other
	// processors to the outputs of those processors that lead there.
	via map[string][]string
	// cyclic: the processors leading to the store form a cycle, so a
	// claim can never be followed to its end.
	cyclic bool
}

// NewPlan works out, from the topology alone, which topics reach the
// processor named, and through which outputs.
func NewPlan(topo *framework.Topology, processor string) Plan {
	plan := Plan{inputs: map[string]bool{}, via: map[string][]string{}}
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

// walk follows the claims of one query's clock through the
// processors before a store: direct holds the claims on the store's own
// inputs, pending those on topics further up whose records have yet to be
// committed through the processors in between.
//
//causeway:owned
type walk struct {
	plan            Plan
	direct, pending map[causal.Channel]int64
}

// claim takes in a claim on ch up to off: kept where ch is an input of the
// store's processor, pending where ch reaches it through others.
func (u *walk) claim(ch causal.Channel, off int64) {
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
func (u *walk) passed(ctx context.Context, v *View) ([]causal.Channel, error) {
	committed, err := v.cluster.GroupCommitted(ctx, slices.Collect(maps.Keys(u.pending)))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
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
func (u *walk) follow(ctx context.Context, v *View, passed []causal.Channel) error {
	outs := map[causal.Channel]bool{} // each once: the admin client refuses duplicates
	for _, ch := range passed {
		delete(u.pending, ch)
		for _, topic := range u.plan.via[ch.Topic] {
			n := v.partitions[topic]
			if n <= 0 {
				return fmt.Errorf("%w: the partitions of %s are not known yet", ErrUnavailable, topic)
			}
			for p := range n {
				outs[causal.Channel{Topic: topic, Partition: p}] = true
			}
		}
	}
	ends, err := v.cluster.Ends(ctx, slices.Collect(maps.Keys(outs)))
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	for ch, end := range ends {
		if end > 0 {
			u.claim(ch, end-1)
		}
	}
	return nil
}
