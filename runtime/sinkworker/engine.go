package sinkworker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/connect"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/runtime/internal/transport"
)

// engine is the sink task's engine on its member loop (member.Engine):
// each record goes into the gate, what the gate delivers waits in the
// assignment's pending records, and a commit hands them to the sink's
// system in the background (launch). Between polls it takes the outcome
// of the commit in flight and reads the other tasks' positions again.
type engine struct {
	w   *Worker
	ctx context.Context
	// launched is when the last commit was launched: a commit is due
	// again Config.CommitInterval later, or once a batch is pending.
	launched time.Time
}

// Between takes the outcome of the commit in flight, if it landed, and
// reads the other tasks' positions when a head waits on them.
func (e *engine) Between() { e.look() }

// Clock is not needed: the sink's parts read the clock themselves.
func (e *engine) Clock(time.Time) {}

// Record puts one record into the gate: a record to skip goes in without
// a clock, marked for the dead-letter topic, and so does a record with a
// corrupt clock when errors are tolerated; otherwise a corrupt clock stops
// the worker with a RefusedError naming the record.
func (e *engine) Record(m *transport.Message) {
	w := e.w
	a := w.assignment
	if a == nil {
		return
	}
	ch := m.Channel()
	rec := connect.Record{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset, Key: m.Key, Value: m.Value,
		Timestamp: m.Timestamp, Headers: m.Headers}
	if off, ok := w.cfg.Skip[ch]; ok && off == m.Offset {
		if _, err := a.node.ReceiveOrReject(ch, m.Offset, nil, false, held{rec: rec, bad: ErrSkipped}); err != nil {
			w.fail(fmt.Errorf("%s/%d@%d: %w", m.Topic, m.Partition, m.Offset, err))
		}
		return
	}
	header, present := framework.Record(*m).Header(causal.HeaderKey)
	_, err := a.node.ReceiveOrReject(ch, m.Offset, header, present, held{rec: rec})
	if errors.Is(err, causal.ErrCorruptClock) {
		if !w.cfg.ToleranceAll {
			w.fail(&RefusedError{Record: rec, Err: err})
			return
		}
		_, err = a.node.ReceiveOrReject(ch, m.Offset, nil, false, held{rec: rec, bad: err})
	}
	if err != nil {
		w.fail(fmt.Errorf("%s/%d@%d: %w", m.Topic, m.Partition, m.Offset, err))
	}
}

// Position advances ch in the gate.
func (e *engine) Position(ch causal.Channel, next int64) {
	if a := e.w.assignment; a != nil {
		if err := a.node.Advance(ch, next); err != nil && !errors.Is(err, causal.ErrNotInScope) {
			e.w.fail(err)
		}
	}
}

// PartitionError logs an error of ch's; the consumer goes on.
func (e *engine) PartitionError(ch causal.Channel, err error) {
	e.w.log.Warn("kafka", zap.Stringer("channel", ch), zap.Error(err))
}

// Handled takes what the gate delivers into the pending records, and
// launches a commit when one is due, after every poll as the backlog
// bound needs.
func (e *engine) Handled() {
	a := e.w.assignment
	if a == nil {
		return
	}
	a.drain()
	e.look()
	if e.due() {
		// With a commit in flight and a backlog of four batches, this
		// waits for it: the sink's system is slower than Kafka.
		e.Commit(time.Time{})
	}
}

// Commit launches a commit of what is pending, unless one is in flight.
// When the sink's system is slower than Kafka it waits for the one in
// flight first, rather than holding ever more records.
func (e *engine) Commit(time.Time) {
	w := e.w
	a := w.assignment
	if a == nil {
		return
	}
	if w.flight != nil && len(a.pending) >= 4*w.cfg.BatchSize {
		if err := w.await(); err != nil {
			w.fail(err)
			return
		}
	}
	if w.flight == nil {
		w.launch(context.WithoutCancel(e.ctx))
		e.launched = time.Now()
	}
}

// due reports whether a commit is due on the sink's own rule: a batch is
// pending, or the interval since the last launch is up. The loop's beat
// (Commit) is the backstop; this rule launches the next commit as soon as
// the one in flight lands, so that a slow sink's commits follow each
// other back to back instead of waiting for the loop's next beat.
func (e *engine) due() bool {
	a := e.w.assignment
	return a != nil && e.w.loop.Fate.Fatal() == nil && (len(a.pending) >= e.w.cfg.BatchSize || time.Since(e.launched) >= e.w.cfg.CommitInterval)
}

// look takes the outcome of the commit in flight, if it landed, reads
// the other tasks' positions again when a head waits on them, and
// launches the next commit when none is in flight and one is due.
func (e *engine) look() {
	w := e.w
	if w.flight != nil {
		select {
		case res := <-w.flight.done:
			if err := w.landed(res); err != nil {
				w.fail(err)
				return
			}
		default:
		}
	}
	a := w.assignment
	if a == nil {
		return
	}
	if err := w.refresh(e.ctx, a); err != nil && e.ctx.Err() == nil {
		w.fail(err) // an error of a stop while reading the positions is none
		return
	}
	if w.flight == nil && e.due() {
		e.Commit(time.Time{})
	}
}
