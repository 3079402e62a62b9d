package runtime

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/taskmgr"
	"github.com/causeway-stream/causeway/runtime/internal/transport"
)

// globalReader follows the topology's global tables for the worker. It
// reads every partition of their topics, committed records only, to the
// ends they have when the worker starts, straight into the worker's copy
// (nothing runs yet), and then hands what arrives to the pump, which
// applies it: the copy is only ever touched by one goroutine at a time.
//
//causeway:owned
type globalReader struct {
	f       *transport.Follower
	batches chan []transport.FollowedRecord
	cancel  context.CancelFunc
	done    chan struct{}
	err     error // set before done closes
}

// startGlobalReader reads the global tables of globals to their ends with
// a follower helpers make, and starts following them.
func startGlobalReader(ctx context.Context, helpers *transport.Helpers, globals *taskmgr.Globals, log *zap.Logger) (*globalReader, error) {
	var topics []string
	chs := slices.Collect(maps.Keys(globals.Channels()))
	for _, ch := range chs {
		if !slices.Contains(topics, ch.Topic) {
			topics = append(topics, ch.Topic)
		}
	}
	// Transaction markers come too: they move a partition's position past
	// what a transaction wrote, or aborted.
	f, err := helpers.FollowPartitions(chs)
	if err != nil {
		return nil, fmt.Errorf("global tables: %w", err)
	}
	ends, err := f.CommittedEnds(ctx, topics)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("global tables %v: end offsets: %w", topics, err)
	}
	if err := readGlobalsToEnds(ctx, f, globals, ends, topics, log); err != nil {
		f.Close()
		return nil, err
	}
	rctx, cancel := context.WithCancel(context.Background())
	g := &globalReader{f: f, batches: make(chan []transport.FollowedRecord, 4), cancel: cancel, done: make(chan struct{})}
	go g.follow(rctx)
	return g, nil
}

// readGlobalsToEnds applies what f reads until every partition of globals
// is at its end in ends: the worker's tasks start from a copy at least as
// new as the tables were when it started.
func readGlobalsToEnds(ctx context.Context, f *transport.Follower, globals *taskmgr.Globals, ends map[causal.Channel]int64,
	topics []string, log *zap.Logger) error {
	began, applied := time.Now(), 0
	left := map[causal.Channel]int64{}
	for ch := range globals.Channels() {
		if end := ends[ch]; end > 0 {
			left[ch] = end
		}
	}
	for len(left) > 0 {
		recs, err := f.Poll(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("global tables: read to their ends: %w", err)
		}
		if err != nil {
			return fmt.Errorf("global table %w", err)
		}
		for _, r := range recs {
			n, err := applyGlobal(globals, r)
			if err != nil {
				return err
			}
			applied += n
		}
		for ch, end := range left {
			if globals.Next(ch) >= end {
				delete(left, ch)
			}
		}
	}
	log.Info("global tables read to their ends", zap.Strings("topics", topics), zap.Int("records", applied),
		zap.Duration("took", time.Since(began)))
	return nil
}

// follow hands what arrives on the global tables to the pump, batch by
// batch, until stopped or the client fails for good.
func (g *globalReader) follow(ctx context.Context) {
	defer close(g.done)
	for {
		recs, err := g.f.Poll(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			g.err = fmt.Errorf("global table %w", err)
			return
		}
		if len(recs) > 0 {
			select {
			case g.batches <- recs:
			case <-ctx.Done():
				return
			}
		}
	}
}

// ready is where the reader hands over what it read; nil (never ready)
// without global tables.
func (g *globalReader) ready() <-chan []transport.FollowedRecord {
	if g == nil {
		return nil
	}
	return g.batches
}

// stopped is closed when the reader stops following; Err then says why.
func (g *globalReader) stopped() <-chan struct{} {
	if g == nil {
		return nil
	}
	return g.done
}

// failure is why the reader stopped following on its own.
func (g *globalReader) failure() error {
	if g.err != nil {
		return g.err
	}
	return errors.New("global tables: the reader stopped")
}

// stop stops following and closes the client.
func (g *globalReader) stop() {
	g.cancel()
	<-g.done
	g.f.Close()
}

// applyGlobal applies one record read from a global table's topic, or
// moves past a transaction marker, and reports how many records it
// applied.
func applyGlobal(globals *taskmgr.Globals, r transport.FollowedRecord) (int, error) {
	if r.Marker {
		globals.SetNext(r.Channel(), r.Offset+1)
		return 0, nil
	}
	return 1, globals.Apply(framework.Record(r.Message))
}

// applyGlobals applies records of the global tables to the worker's copy
// and tells the tasks that read them.
func (p *pump) applyGlobals(globals *taskmgr.Globals, recs []transport.FollowedRecord) {
	moved := map[causal.Channel]bool{}
	for _, r := range recs {
		if _, err := applyGlobal(globals, r); err != nil {
			p.fate.Stop(err)
			return
		}
		moved[causal.Channel{Topic: r.Topic, Partition: r.Partition}] = true
	}
	for ch := range moved {
		for _, rt := range p.tasks.Tasks() {
			if rt.ReadsGlobal(ch.Topic) {
				p.touch([]*taskmgr.Task{rt})
			}
		}
		if p.tasks.AdvanceGlobal(ch) {
			p.fate.MustAbort()
		}
	}
	p.stream()
}
