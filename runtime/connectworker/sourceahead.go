package connectworker

import (
	"context"
	"fmt"
	"sync"

	"github.com/causeway-stream/causeway/connect"
)

// polled is what one poll of a streaming source gave, transformed: the
// records left and the offset of those left out at the end
// (sourceRunner.transformAll), or the error it failed with.
type polled struct {
	out     []routedRecord
	skipped []byte
	err     error
}

// runAhead is run's loop for a streaming source (connect.Streaming): one
// goroutine polls the task, runs the transforms and converters over what
// it read, and tells the task what was committed between two polls,
// while this one writes the batch before, so that reading and converting
// overlap the Kafka transactions. At most one batch waits between the
// two. What was read ahead and not yet written is not committed, so a
// task that stops or dies reads it again from the committed offset, as
// it would have read it had it not been read ahead. The transforms, the
// converters and the task are used by the polling goroutine alone while
// it runs.
func (s *sourceRunner) runAhead(ctx context.Context, t connect.SourceTask) error {
	batches := make(chan polled, 1)
	commits := make(chan []byte, 1) // the latest offset committed, not yet told
	r := reader{task: t, listener: s.listener, offset: s.offset, transform: s.transformAll, batches: batches, commits: commits}
	s.listener = nil // told by the reader instead
	pctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(batches)
		r.run(pctx)
	}()
	defer func() {
		stop()
		for range batches { // let the reader finish its send
		}
		wg.Wait()
	}()
	for p := range batches {
		switch {
		case p.err != nil:
			return p.err
		case ctx.Err() != nil:
			return nil
		}
		if err := s.writeTransformed(context.WithoutCancel(ctx), p.out, p.skipped); err != nil {
			return err
		}
		if s.offset != nil {
			select { // replace what the reader has not taken yet
			case <-commits:
			default:
			}
			commits <- s.offset
		}
	}
	return nil
}

// reader is runAhead's polling goroutine.
type reader struct {
	task      connect.SourceTask
	listener  connect.CommitListener
	transform func([]connect.SourceRecord) ([]routedRecord, []byte, error)
	// offset is the latest offset committed, which the task's polls are
	// given.
	offset []byte
	// commits brings each offset committed; batches takes each batch.
	commits <-chan []byte
	batches chan<- polled
}

// run polls the task until ctx is done or a call fails, sending each
// batch that has records, transformed, to batches, and telling the
// listener, before each poll, of the latest offset committed.
func (r *reader) run(ctx context.Context) {
	for ctx.Err() == nil {
		if err := r.tell(ctx); err != nil {
			r.batches <- polled{err: err}
			return
		}
		recs, err := r.task.Poll(ctx, r.offset)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			r.batches <- polled{err: fmt.Errorf("poll: %w", err)}
			return
		case len(recs) == 0:
			continue
		}
		p := polled{}
		p.out, p.skipped, p.err = r.transform(recs)
		select {
		case r.batches <- p:
		case <-ctx.Done():
			return
		}
		if p.err != nil {
			return
		}
	}
}

// tell tells the listener of the latest offset committed, if one came
// since the last poll.
func (r *reader) tell(ctx context.Context) error {
	select {
	case off := <-r.commits:
		r.offset = off
		if r.listener != nil {
			if err := r.listener.Committed(ctx, off); err != nil {
				return fmt.Errorf("the source's commit callback: %w", err)
			}
		}
	default:
	}
	return nil
}
