package sinkworker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/causeway-stream/causeway/connect"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/runtime/internal/transport"
)

// flight is a commit written in the background while the worker reads
// and gates what comes next: the sink's system and Kafka work at once.
type flight struct {
	moves []connect.Move
	recs  []held
	done  chan error
	// written and rejected count the records the commit wrote and sent to
	// the dead-letter topic; they count in the status once it landed.
	written, rejected int
	// deadSent is set once the commit's dead letters are committed to
	// Kafka: a retry of the commit does not send them again.
	deadSent bool
	// stop is closed when the worker stops: a retry waits no longer.
	stop <-chan struct{}
}

// launch hands what was delivered, and the positions of the worker's
// channels as far as they were delivered, to a commit in the background:
// it puts the records, sends the refused to the dead-letter topic, and
// commits the sink's transaction with the positions. Dead letters are
// committed to Kafka first: a crash before the sink's commit sends them
// again (at least once), one after loses none. Only one commit is in
// flight at a time; the positions it moves from are those the one before
// it committed.
func (w *Worker) launch(ctx context.Context) {
	a := w.assignment
	if a == nil || w.flight != nil {
		return
	}
	w.publish(a)
	recs, moves := a.pending, a.moves()
	if a.txns.open() {
		// Only the whole transactions before the last moment none was
		// open, and the positions after them; the rest waits.
		recs, moves = a.txns.whole(a.pending), a.movesAfter(a.txns.whole(a.pending))
	}
	if len(moves) == 0 && len(recs) == 0 {
		return
	}
	// The records go to the flight; the slice of the one before comes
	// back for the next (two slices, taken in turns).
	a.pending, w.spare = append(w.spare[:0], a.pending[len(recs):]...), nil
	a.txns.handedOn()
	f := &flight{moves: moves, recs: recs, done: make(chan error, 1), stop: w.stopping}
	w.flight = f
	go func() { f.done <- w.write(ctx, f) }()
}

// write is the background part of a commit. A commit that failed on a
// transient error of the sink's system is aborted and made again, up to
// Config.MaxRetries times; stop (Run's end) cuts the waits short.
func (w *Worker) write(ctx context.Context, f *flight) error {
	for attempt := 1; ; attempt++ {
		err := w.writeOnce(ctx, f)
		if err == nil || !connect.IsRetriable(err) || attempt > w.cfg.MaxRetries {
			if err != nil && attempt > 1 {
				err = fmt.Errorf("after %d attempts: %w", attempt, err)
			}
			return err
		}
		w.log.Warn("commit failed on a transient error of the sink's system; trying again",
			zap.Int("attempt", attempt), zap.Int("max_retries", w.cfg.MaxRetries), zap.Duration("backoff", w.cfg.RetryBackoff), zap.Error(err))
		if aerr := w.cfg.Task.Abort(ctx); aerr != nil {
			w.log.Warn("abort before trying again", zap.Error(aerr))
		}
		f.written, f.rejected = 0, 0
		select {
		case <-time.After(w.cfg.RetryBackoff):
		case <-f.stop:
			return err
		}
	}
}

// writeOnce puts a commit's records, sends its dead letters (once, even
// when the commit is tried again) and commits.
func (w *Worker) writeOnce(ctx context.Context, f *flight) error {
	if err := w.put(ctx, f); err != nil {
		return err
	}
	if !f.deadSent {
		if err := w.sendDead(); err != nil {
			return err
		}
		f.deadSent = true
	}
	if err := w.cfg.Task.Commit(ctx, f.moves); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// await waits for the commit in flight, if one is.
func (w *Worker) await() error {
	if w.flight == nil {
		return nil
	}
	return w.landed(<-w.flight.done)
}

// landed takes the outcome of the commit in flight. On an error the gate
// is ahead of what the sink holds: the assignment is dropped, so that
// nothing commits past the records that were not written.
func (w *Worker) landed(err error) error {
	f := w.flight
	w.flight = nil
	clear(f.recs) // let go of the records' bytes
	w.spare = f.recs[:0]
	if err != nil {
		w.setAssignment(nil)
		return errors.Join(err, w.cfg.Task.Abort(context.Background()))
	}
	if a := w.assignment; a != nil {
		for _, m := range f.moves {
			a.own[m.Channel] = m.To
		}
	}
	w.mu.Lock()
	w.status.Commits++
	w.status.Written += f.written
	w.status.Rejected += f.rejected
	w.mu.Unlock()
	return nil
}

// commit writes what was delivered and commits it, and waits for it.
func (w *Worker) commit(ctx context.Context) error {
	if err := w.await(); err != nil {
		return err
	}
	w.launch(ctx)
	return w.await()
}

// put hands the records of f to the task, and keeps the refused.
func (w *Worker) put(ctx context.Context, f *flight) error {
	pending := f.recs
	if len(pending) == 0 {
		return nil
	}
	recs, dead, unconverted, renamed := w.convert(pending)
	if w.cfg.TopicUsed != nil {
		told := ""
		for _, h := range pending {
			if !h.meta && h.rec.Topic != told {
				w.cfg.TopicUsed(h.rec.Topic)
				told = h.rec.Topic
			}
		}
	}
	rejected, err := w.cfg.Task.Put(ctx, recs)
	if err != nil {
		return fmt.Errorf("put: %w", err)
	}
	for i := range rejected {
		// Named where it was read, not where a transform sent it.
		r := &rejected[i].Record
		if topic, ok := renamed[placeOf(*r)]; ok {
			r.Topic = topic
		}
	}
	rejected = append(unconverted, rejected...)
	if len(rejected) > 0 && !w.cfg.ToleranceAll {
		first := slices.MinFunc(rejected, func(a, b connect.Rejected) int { return cmp.Compare(a.Record.Offset, b.Record.Offset) })
		return &RefusedError{Record: first.Record, Err: first.Err, BySink: true}
	}
	f.written = len(recs) - (len(rejected) - len(unconverted))
	f.rejected = len(dead) + len(rejected)
	if !f.deadSent {
		for i, r := range rejected {
			stage := StageTaskPut
			if i < len(unconverted) {
				stage = StageValueConverter
			}
			dead = append(dead, deadLetter{Rejected: r, stage: stage})
		}
		w.dead = append(w.dead, dead...)
	}
	return nil
}

// place is where a converted record says it lies.
type place struct {
	topic     string
	partition int32
	offset    int64
}

func placeOf(r connect.Record) place { return place{r.Topic, r.Partition, r.Offset} }

// convert takes the pending records apart: the records to write,
// converted; the dead letters of records held as bad (skipped, or with a
// corrupt clock under ToleranceAll); the records the converter refused;
// and the topics records were read from whose topic a transform changed
// (RegexRouter), by where the converted record says it lies.
func (w *Worker) convert(pending []held) (recs []connect.Record, dead []deadLetter, unconverted []connect.Rejected, renamed map[place]string) {
	recs = make([]connect.Record, 0, len(pending))
	for _, h := range pending {
		if h.meta {
			continue
		}
		if h.bad != nil {
			stage := StageHeaderConverter // a corrupt clock header
			if errors.Is(h.bad, ErrSkipped) {
				stage = StageTaskPut
			}
			dead = append(dead, deadLetter{Rejected: connect.Rejected{Record: h.rec, Err: h.bad}, stage: stage})
			continue
		}
		rec := h.rec
		if w.cfg.Convert != nil {
			var err error
			if rec, err = w.cfg.Convert(rec); errors.Is(err, connect.ErrFiltered) {
				continue // dropped by a transform: its position moves past it all the same
			} else if err != nil {
				unconverted = append(unconverted, connect.Rejected{Record: h.rec, Err: err})
				continue
			}
			if rec.Topic != h.rec.Topic {
				if renamed == nil {
					renamed = map[place]string{}
				}
				renamed[placeOf(rec)] = h.rec.Topic
			}
		}
		recs = append(recs, rec)
	}
	return recs, dead, unconverted, renamed
}

// RefusedError stops a worker without ToleranceAll: a record the sink's
// system (or the converter) refused, or whose clock header is corrupt. It
// names the record, which Config.Skip can then send to the dead-letter
// topic.
type RefusedError struct {
	Record connect.Record
	Err    error
	// BySink: the sink's system or the converter refused it; otherwise
	// its clock header is corrupt.
	BySink bool
}

func (e *RefusedError) Error() string {
	r := e.Record
	if e.BySink {
		return fmt.Sprintf("%s/%d@%d refused by the sink (set errors.tolerance=all to send such records to a dead-letter topic): %v",
			r.Topic, r.Partition, r.Offset, e.Err)
	}
	return fmt.Sprintf("%s/%d@%d: %v", r.Topic, r.Partition, r.Offset, e.Err)
}

func (e *RefusedError) Unwrap() error { return e.Err }

// ErrSkipped is the reason a record Config.Skip names carries to the
// dead-letter topic.
var ErrSkipped = errors.New("skipped by an operator after it stopped the sink")

// Headers a dead letter carries, as Kafka Connect names them; the others
// of KIP-298's set are framework's ConnectHeader constants.
const (
	HeaderTopic     = framework.ConnectHeaderTopic
	HeaderPartition = framework.ConnectHeaderPartition
	HeaderOffset    = framework.ConnectHeaderOffset
	HeaderMessage   = framework.ConnectHeaderExceptionMessage
)

// Kafka Connect's stages (KIP-298) a sink's dead letter names in
// framework.ConnectHeaderStage.
const (
	// StageTaskPut: the sink's system refused the record, or an operator
	// skipped it after it stopped the sink.
	StageTaskPut = "TASK_PUT"
	// StageValueConverter: the converter or a transform refused it.
	StageValueConverter = "VALUE_CONVERTER"
	// StageHeaderConverter: its clock header is corrupt.
	StageHeaderConverter = "HEADER_CONVERTER"
)

// deadLetter is a record refused, and at which stage.
type deadLetter struct {
	connect.Rejected
	stage string
}

// sendDead writes the refused records to the dead-letter topic in one
// Kafka transaction.
func (w *Worker) sendDead() error {
	if len(w.dead) == 0 {
		return nil
	}
	err := w.producer.Do(func(send func(*transport.Message) error) error {
		for _, d := range w.dead {
			r := d.Record
			dl := framework.FitDeadLetter(framework.Record{Key: r.Key, Value: r.Value, Timestamp: r.Timestamp, Headers: r.Headers}, w.cfg.MaxRecordBytes)
			if !w.cfg.NoContextHeaders {
				dl = framework.NewDeadLetter(framework.Record{Key: r.Key, Value: r.Value, Timestamp: r.Timestamp, Headers: r.Headers},
					framework.Failure{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Stage: d.stage, Err: d.Err,
						Connector: w.cfg.Connector, Task: w.cfg.TaskID, Class: w.cfg.Class},
					framework.ConnectHeaders, w.cfg.MaxRecordBytes)
			}
			m := transport.Message{Topic: w.cfg.DeadLetterTopic, Partition: framework.PartitionFor(r.Key, w.deadPartitions), Key: dl.Key, Value: dl.Value,
				Timestamp: dl.Timestamp, Headers: dl.Headers}
			if err := send(&m); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("dead letters: %w", err)
	}
	w.log.Warn("records refused by the sink sent to the dead-letter topic", zap.Int("records", len(w.dead)), zap.String("topic", w.cfg.DeadLetterTopic))
	clear(w.dead)
	w.dead = w.dead[:0]
	return nil
}
