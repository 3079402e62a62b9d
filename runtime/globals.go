package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
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
	cl      *kgo.Client
	batches chan []*kgo.Record
	cancel  context.CancelFunc
	done    chan struct{}
	err     error // set before done closes
}

// startGlobalReader reads the global tables of globals to their ends and
// starts following them.
func startGlobalReader(ctx context.Context, connect []kgo.Opt, globals *taskmgr.Globals, log *zap.Logger) (*globalReader, error) {
	parts := map[string]map[int32]kgo.Offset{}
	var topics []string
	for ch := range globals.Channels() {
		if parts[ch.Topic] == nil {
			parts[ch.Topic] = map[int32]kgo.Offset{}
			topics = append(topics, ch.Topic)
		}
		parts[ch.Topic][ch.Partition] = kgo.NewOffset().AtStart()
	}
	// Control records (transaction markers) come too: they move a
	// partition's position past what a transaction wrote, or aborted.
	cl, err := kgo.NewClient(append(slices.Clip(connect), kgo.ConsumePartitions(parts), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords())...)
	if err != nil {
		return nil, fmt.Errorf("global tables: client: %w", err)
	}
	ends, err := kadm.NewClient(cl).ListCommittedOffsets(ctx, topics...)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		cl.Close()
		return nil, fmt.Errorf("global tables %v: end offsets: %w", topics, err)
	}
	// Read to the ends: the worker's tasks start from a copy at least as
	// new as the tables were when it started.
	began, applied := time.Now(), 0
	left := map[causal.Channel]int64{}
	for ch := range globals.Channels() {
		if end, ok := ends.Lookup(ch.Topic, ch.Partition); ok && end.Offset > 0 {
			left[ch] = end.Offset
		}
	}
	for len(left) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			cl.Close()
			return nil, fmt.Errorf("global tables: read to their ends: %w", err)
		}
		var ferr error
		fs.EachError(func(topic string, p int32, err error) {
			ferr = errors.Join(ferr, fmt.Errorf("global table %s: %w", transport.PartitionString(topic, p), err))
		})
		if ferr != nil {
			cl.Close()
			return nil, ferr
		}
		for _, r := range fs.Records() {
			n, err := applyGlobal(globals, r)
			if err != nil {
				cl.Close()
				return nil, err
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
	rctx, cancel := context.WithCancel(context.Background())
	g := &globalReader{cl: cl, batches: make(chan []*kgo.Record, 4), cancel: cancel, done: make(chan struct{})}
	go g.follow(rctx)
	return g, nil
}

// follow hands what arrives on the global tables to the pump, batch by
// batch, until stopped or the client fails for good.
func (g *globalReader) follow(ctx context.Context) {
	defer close(g.done)
	for {
		fs := g.cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return
		}
		var ferr error
		fs.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.Canceled) {
				ferr = errors.Join(ferr, fmt.Errorf("global table %s: %w", transport.PartitionString(topic, p), err))
			}
		})
		if ferr != nil {
			g.err = ferr
			return
		}
		if recs := fs.Records(); len(recs) > 0 {
			select {
			case g.batches <- recs:
			case <-ctx.Done():
				return
			}
		}
	}
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
	g.cl.Close()
}

// applyGlobal applies one record read from a global table's topic, or
// moves past a transaction marker, and reports how many records it
// applied.
func applyGlobal(globals *taskmgr.Globals, r *kgo.Record) (int, error) {
	if r.Attrs.IsControl() {
		globals.SetNext(causal.Channel{Topic: r.Topic, Partition: r.Partition}, r.Offset+1)
		return 0, nil
	}
	rec := framework.Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value, Timestamp: r.Timestamp}
	return 1, globals.Apply(rec)
}

// applyGlobals applies records of the global tables to the worker's copy
// and tells the tasks that read them.
func (w *StreamThread) applyGlobals(recs []*kgo.Record) {
	moved := map[causal.Channel]bool{}
	for _, r := range recs {
		if _, err := applyGlobal(w.globals, r); err != nil {
			w.fate.stop(err)
			return
		}
		moved[causal.Channel{Topic: r.Topic, Partition: r.Partition}] = true
	}
	for ch := range moved {
		for _, rt := range w.tasks.Tasks() {
			if rt.ReadsGlobal(ch.Topic) {
				w.pump.touch([]*taskmgr.Task{rt})
			}
		}
		if w.tasks.AdvanceGlobal(ch) {
			w.fate.mustAbort()
		}
	}
	w.stream()
}
