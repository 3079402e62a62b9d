package runtime

import (
	"context"
	"fmt"
	"time"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/runtime/internal/served"
)

// queryRequest is a query on its way to the pump.
type queryRequest struct {
	q     Query
	reply chan queryReply
	// until is when a query with a clock stops waiting.
	until time.Time
}

type queryReply struct {
	a   Answer
	err error
}

// Query answers q from this worker's stores as committed: the pump reads
// the stores' committed views (store.Logged.Committed), so an answer never
// shows a write an open transaction may still take back. A query with a
// clock waits, at the pump, for the commit that catches the store up. It
// returns ErrUnknownStore, ErrNotLocal, ErrNotAvailable, ErrNotCaughtUp,
// ErrClockNotCheckable, ErrClockBeyondEnd, ErrStopped, or ctx's error.
func (w *StreamThread) Query(ctx context.Context, q Query) (Answer, error) {
	req := queryRequest{q: q, reply: make(chan queryReply, 1)}
	if !q.After.IsEmpty() {
		wait := q.Wait
		if wait <= 0 {
			wait = DefaultQueryWait
		}
		req.until = time.Now().Add(wait)
		if err := w.claimsExist(ctx, q.After); err != nil {
			return Answer{}, err
		}
		// Claims on records that reach the store through other processors
		// become claims on its own inputs (upstream.go).
		after, err := w.throughUpstream(ctx, q, req.until)
		if err != nil {
			return Answer{}, err
		}
		req.q.After = after
	}
	select {
	case w.queries <- req:
	case <-ctx.Done():
		return Answer{}, ctx.Err()
	case <-w.done:
		return Answer{}, ErrStopped
	}
	select {
	case r := <-req.reply:
		return r.a, r.err
	case <-ctx.Done():
		return Answer{}, ctx.Err()
	case <-w.done:
		return Answer{}, ErrStopped
	}
}

// takeQueries answers the queries that arrived, and keeps those that
// wait for a commit.
func (w *StreamThread) takeQueries() {
	for {
		select {
		case req := <-w.queries:
			w.takeQuery(req)
		default:
			return
		}
	}
}

// takeQuery answers req now, unless its clock makes it wait for a commit.
func (w *StreamThread) takeQuery(req queryRequest) {
	if w.settle(req) {
		w.pendingQueries = append(w.pendingQueries, req)
	}
}

// answerQueries answers the queries waiting for a commit that caught
// their store up with their clock, or fails those whose wait is over: the
// pump calls it after every commit and abort.
func (w *StreamThread) answerQueries() {
	w.takeQueries()
	waiting := w.pendingQueries[:0]
	for _, req := range w.pendingQueries {
		if w.settle(req) {
			waiting = append(waiting, req)
		}
	}
	clear(w.pendingQueries[len(waiting):])
	w.pendingQueries = waiting
}

// settle answers req, or reports that it waits for a commit: its clock
// names records the store has not taken in yet, or its task restores, and
// its wait is not over.
func (w *StreamThread) settle(req queryRequest) (waits bool) {
	if !req.q.After.IsEmpty() {
		caught, err := w.reader().CaughtUp(req.q)
		behind := (err == nil && !caught) || served.Restoring(err)
		switch {
		case behind && time.Now().Before(req.until):
			return true // asked again at the next commit
		case err != nil:
			req.reply <- queryReply{err: err}
			return false
		case !caught:
			req.reply <- queryReply{err: fmt.Errorf("%w: waited until %s", ErrNotCaughtUp, req.until.Format(time.RFC3339Nano))}
			return false
		}
	}
	a, err := w.reader().Answer(req.q)
	req.reply <- queryReply{a: a, err: err}
	return false
}

// refuseQueries answers every query that arrived or waits with err.
func (w *StreamThread) refuseQueries(err error) {
	for {
		select {
		case req := <-w.queries:
			req.reply <- queryReply{err: err}
			continue
		default:
		}
		break
	}
	for _, req := range w.pendingQueries {
		req.reply <- queryReply{err: err}
	}
	w.pendingQueries = nil
}

// reader reads the stores of the tasks this stream thread runs, for
// queries: on the pump goroutine only.
func (w *StreamThread) reader() served.Reader { return served.Reader{Topology: w.topo, Tasks: w.tasks} }

// storeOwner finds the processor that declares a store.
func (w *StreamThread) storeOwner(name string) (framework.ProcessorInfo, framework.StoreSpec, bool) {
	return served.StoreOwner(w.topo, name)
}

// claimsExist refuses a query clock that claims an offset its channel has
// not reached, as claims entering the topology are refused: no such
// record exists (a client's claim from a delivery report lies below its
// partition's high watermark), and the query would wait its whole wait
// for nothing. When the ends cannot be read, the query waits as before.
func (w *StreamThread) claimsExist(ctx context.Context, c causal.Clock) error {
	w.mu.Lock()
	view := w.upstream
	w.mu.Unlock()
	if view == nil {
		return nil
	}
	if claim, end, beyond := view.Beyond(ctx, c); beyond {
		return fmt.Errorf("%w: it claims %s up to offset %d, and %s ends at offset %d", ErrClockBeyondEnd, claim.Channel, claim.Offset, claim.Channel, end-1)
	}
	return nil
}
