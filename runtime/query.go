package runtime

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/taskmgr"
	"github.com/causeway-stream/causeway/runtime/internal/served"
	"github.com/causeway-stream/causeway/runtime/internal/upstream"
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

// queryDesk takes the store queries asked of a stream thread to its pump,
// and answers them there: at once, or after the commit that catches the
// store up with the query's clock. Before a query with a clock reaches
// the pump, its claims are checked against the ends of their channels,
// and claims on records that reach the store through other processors
// are followed there (upstream.go).
//
//causeway:owned
type queryDesk struct {
	topo *framework.Topology
	// done is the thread's: closed once it stopped.
	done <-chan struct{}
	// arrived are the queries on their way to the pump, and pending those
	// that wait there for a commit.
	arrived chan queryRequest
	pending []queryRequest
	// tasks are the thread's, read on the pump only; nil until the thread
	// is connected.
	tasks *taskmgr.Manager
	// upstream is what clocks are followed through the processors before
	// a store with; nil until the thread is connected, or without an
	// admin client (under mu).
	mu       sync.Mutex
	upstream *upstream.View
}

func newQueryDesk(topo *framework.Topology, done <-chan struct{}) *queryDesk {
	return &queryDesk{topo: topo, done: done, arrived: make(chan queryRequest, 64)}
}

// connect gives the desk the thread's tasks, to read their stores.
func (d *queryDesk) connect(tasks *taskmgr.Manager) { d.tasks = tasks }

// follow gives the desk the view that follows clocks upstream.
func (d *queryDesk) follow(v *upstream.View) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.upstream = v
}

func (d *queryDesk) view() *upstream.View {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.upstream
}

// Query answers q from this worker's stores as committed: the pump reads
// the stores' committed views (store.Logged.Committed), so an answer never
// shows a write an open transaction may still take back. A query with a
// clock waits, at the pump, for the commit that catches the store up. It
// returns ErrUnknownStore, ErrNotLocal, ErrNotAvailable, ErrNotCaughtUp,
// ErrClockNotCheckable, ErrClockBeyondEnd, ErrStopped, or ctx's error.
func (w *StreamThread) Query(ctx context.Context, q Query) (Answer, error) { return w.desk.ask(ctx, q) }

// ask takes q to the pump and waits for its answer (StreamThread.Query).
func (d *queryDesk) ask(ctx context.Context, q Query) (Answer, error) {
	req := queryRequest{q: q, reply: make(chan queryReply, 1)}
	if !q.After.IsEmpty() {
		wait := q.Wait
		if wait <= 0 {
			wait = DefaultQueryWait
		}
		req.until = time.Now().Add(wait)
		if err := d.claimsExist(ctx, q.After); err != nil {
			return Answer{}, err
		}
		// Claims on records that reach the store through other processors
		// become claims on its own inputs (upstream.go).
		after, err := d.throughUpstream(ctx, q, req.until)
		if err != nil {
			return Answer{}, err
		}
		req.q.After = after
	}
	select {
	case d.arrived <- req:
	case <-ctx.Done():
		return Answer{}, ctx.Err()
	case <-d.done:
		return Answer{}, ErrStopped
	}
	select {
	case r := <-req.reply:
		return r.a, r.err
	case <-ctx.Done():
		return Answer{}, ctx.Err()
	case <-d.done:
		return Answer{}, ErrStopped
	}
}

// takeArrived answers the queries that arrived, and keeps those that wait
// for a commit.
func (d *queryDesk) takeArrived() {
	for {
		select {
		case req := <-d.arrived:
			d.take(req)
		default:
			return
		}
	}
}

// take answers req now, unless its clock makes it wait for a commit.
func (d *queryDesk) take(req queryRequest) {
	if d.settle(req) {
		d.pending = append(d.pending, req)
	}
}

// answer answers the queries waiting for a commit that caught their store
// up with their clock, or fails those whose wait is over: the pump calls
// it after every commit and abort.
func (d *queryDesk) answer() {
	d.takeArrived()
	waiting := d.pending[:0]
	for _, req := range d.pending {
		if d.settle(req) {
			waiting = append(waiting, req)
		}
	}
	clear(d.pending[len(waiting):])
	d.pending = waiting
}

// settle answers req, or reports that it waits for a commit: its clock
// names records the store has not taken in yet, or its task restores, and
// its wait is not over.
func (d *queryDesk) settle(req queryRequest) (waits bool) {
	if !req.q.After.IsEmpty() {
		caught, err := d.reader().CaughtUp(req.q)
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
	a, err := d.reader().Answer(req.q)
	req.reply <- queryReply{a: a, err: err}
	return false
}

// refuse answers every query that arrived or waits with err.
func (d *queryDesk) refuse(err error) {
	for {
		select {
		case req := <-d.arrived:
			req.reply <- queryReply{err: err}
			continue
		default:
		}
		break
	}
	for _, req := range d.pending {
		req.reply <- queryReply{err: err}
	}
	d.pending = nil
}

// reader reads the stores of the tasks the thread runs, for queries: on
// the pump goroutine only.
func (d *queryDesk) reader() served.Reader { return served.Reader{Topology: d.topo, Tasks: d.tasks} }

// partitions is the partition count of a store's task, or 0 while it is
// not known.
func (d *queryDesk) partitions(store string) int32 {
	pi, _, ok := served.StoreOwner(d.topo, store)
	v := d.view()
	if !ok || v == nil {
		return 0
	}
	return v.Partitions(pi.Inputs[0])
}

// claimsExist refuses a query clock that claims an offset its channel has
// not reached, as claims entering the topology are refused: no such
// record exists (a client's claim from a delivery report lies below its
// partition's high watermark), and the query would wait its whole wait
// for nothing. When the ends cannot be read, the query waits as before.
func (d *queryDesk) claimsExist(ctx context.Context, c causal.Clock) error {
	view := d.view()
	if view == nil {
		return nil
	}
	if claim, end, beyond := view.Beyond(ctx, c); beyond {
		return fmt.Errorf("%w: it claims %s up to offset %d, and %s ends at offset %d", ErrClockBeyondEnd, claim.Channel, claim.Offset, claim.Channel, end-1)
	}
	return nil
}
