package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/runtime/internal/served"
	"github.com/causeway-stream/causeway/runtime/internal/upstream"
)

// Causal queries whose clocks name records further up than the store's
// own inputs are followed there by the upstream package; what follows
// turns its answers into the worker's query errors.

// throughUpstream turns q's clock into one that names only records of the
// store's own inputs: claims on topics that cannot reach the store are
// dropped, and claims on topics that reach it through other processors are
// followed through them (see the top of this file), waiting until until
// for the application to commit what they name. It returns ErrNotCaughtUp
// when the wait is over, and ErrClockNotCheckable when a claim cannot be
// followed (the processors on the way form a cycle).
func (d *queryDesk) throughUpstream(ctx context.Context, q Query, until time.Time) (causal.Clock, error) {
	pi, _, ok := served.StoreOwner(d.topo, q.Store)
	if !ok {
		return causal.Clock{}, fmt.Errorf("%w: %q", ErrUnknownStore, q.Store)
	}
	plan := upstream.NewPlan(d.topo, pi.Name)
	direct, further, err := plan.Direct(q.After)
	if err != nil || !further {
		return direct, err
	}
	if plan.Cyclic() {
		return causal.Clock{}, fmt.Errorf("%w: the processors before %s form a cycle", ErrClockNotCheckable, pi.Name)
	}
	view := d.view()
	if view == nil {
		return causal.Clock{}, fmt.Errorf("%w: this worker cannot read the group's offsets", ErrClockNotCheckable)
	}
	c, err := view.Follow(ctx, plan, q.After, until)
	switch {
	case errors.Is(err, upstream.ErrNotCommitted):
		return causal.Clock{}, fmt.Errorf("%w: records before %s not committed by %s", ErrNotCaughtUp, pi.Name, until.Format(time.RFC3339Nano))
	case errors.Is(err, upstream.ErrUnavailable):
		return causal.Clock{}, fmt.Errorf("%w: %w", ErrNotAvailable, err)
	}
	return c, err
}

// sleep waits wait, or less if ctx ends or the thread stops.
func (d *queryDesk) sleep(ctx context.Context, wait time.Duration) error {
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-d.done:
		return ErrStopped
	}
}
