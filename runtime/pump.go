package runtime

import (
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/taskmgr"
	"github.com/causeway-stream/causeway/runtime/internal/transport"
)

// pump is the state of the worker's poll loop: what the consumer returned
// and where it goes. Only the pump goroutine touches it.
//
//causeway:owned
type pump struct {
	// poll is the consumer's Poll (wrapped by tests, through wrapPoll).
	poll transport.PollFunc
	// polled holds the events of one poll batch until they are handled.
	// Handled events stay in its array until a later batch writes over
	// them, up to stale of them, or the consumer has none to give.
	polled []transport.Event
	stale  int
	// touched is the tasks the events handled since the last stream went
	// to: the only ones with outputs to stream.
	touched []*taskmgr.Task
	// last is the route of the last message: consecutive messages mostly
	// come from the same partition, and comparing the channel costs less
	// than a map lookup. Reindexing the tasks clears it.
	last *taskmgr.Route
	// counted is the route whose records the pump is counting, and
	// uncounted how many it took from there since it last added them to
	// the route's records-in counter: one add a run of records from a
	// channel, and at the end of each batch, instead of one a record. The
	// counter is an atomic that every thread reading the topic shares.
	counted   *taskmgr.Route
	uncounted int
	// time is when the pump last polled: the tasks' clock while they
	// handle what that poll returned, so that a record costs no clock read
	// of its own.
	time time.Time
	// assigned is the consumer's assignment.
	assigned []causal.Channel
	// batch is the most events the pump takes from the consumer before it
	// handles them: its transport's pollBatch.
	batch int
	// paused holds the partitions backpressure paused.
	paused map[causal.Channel]bool
}

// poll collects into the pump the events the consumer has ready, up to
// the pump's batch, waiting up to 10 ms for the first, and returns how many it
// collected. Handling them apart from polling keeps the code and data of
// each step in the processor's caches across a batch instead of swapping
// them out at every record: the gain is greater the larger the records.
// A rebalance callback running inside Poll handles the events collected
// before it first (handlePolled), as they belong to the assignment it ends.
func (w *StreamThread) poll() int {
	return w.pump.poll(10*time.Millisecond, w.pump.batch, &w.pump.polled)
}

// handlePolled handles the collected events in order, then streams what
// they made the tasks emit.
func (w *StreamThread) handlePolled() {
	p := &w.pump
	if len(p.polled) == 0 {
		p.letGoStale()
		return
	}
	for i := range p.polled {
		if w.fate.fatal != nil {
			break // the worker stops: what is left is read again by the next owner
		}
		w.handle(&p.polled[i])
	}
	p.countRecordsIn()
	p.handled()
	if w.fate.fatal == nil {
		w.stream()
	}
}

// letGoStale lets go of the events of the last batches, which point into
// fetched records: nothing came, so the worker is idle.
func (p *pump) letGoStale() {
	clear(p.polled[:p.stale])
	p.stale = 0
}

// handled empties the batch once its events are handled. They are not
// cleared now: the next batch writes over them, and clearing each batch
// would cost a second pass of write barriers a record while the
// collector marks.
func (p *pump) handled() {
	p.stale = max(p.stale, len(p.polled))
	p.polled = p.polled[:0]
}

// setPaused notes whether ch is paused, for backpressure.
func (p *pump) setPaused(ch causal.Channel, paused bool) {
	if !paused {
		delete(p.paused, ch)
		return
	}
	if p.paused == nil {
		p.paused = map[causal.Channel]bool{}
	}
	p.paused[ch] = true
}

// setAssigned records the consumer's assignment.
func (p *pump) setAssigned(chs []causal.Channel) { p.assigned = chs }

// setBatch sets the most events the pump takes at a time.
func (p *pump) setBatch(batch int) { p.batch = batch }

// setPoll makes the pump poll with poll.
func (p *pump) setPoll(poll transport.PollFunc) { p.poll = poll }

// tick sets the pump's time: when it last polled.
func (p *pump) tick(now time.Time) { p.time = now }

// touch puts the tasks rts on the list of tasks to stream outputs from.
func (p *pump) touch(rts []*taskmgr.Task) {
	for _, rt := range rts {
		if rt.Touch() {
			p.touched = append(p.touched, rt)
		}
	}
}

// takeTouched takes the list of tasks to stream outputs from; give its
// memory back with releaseTouched once they are streamed.
func (p *pump) takeTouched() []*taskmgr.Task {
	for _, rt := range p.touched {
		rt.Untouch()
	}
	return p.touched
}

// releaseTouched gives back the memory of a list takeTouched returned.
func (p *pump) releaseTouched(touched []*taskmgr.Task) {
	clear(touched)
	p.touched = touched[:0]
}

// count counts a record taken from r, adding what it counted of the
// previous route to that route's counter when r is another.
func (p *pump) count(r *taskmgr.Route) {
	if r != p.counted {
		p.countRecordsIn()
		p.counted = r
	}
	p.uncounted++
}

// countRecordsIn adds the records taken from the counted route since the
// last call to its counter.
func (p *pump) countRecordsIn() {
	if p.uncounted > 0 {
		p.counted.InputCounter().Add(float64(p.uncounted))
		p.uncounted = 0
	}
}

// routeOf returns the route of ch, the last message's when it came from
// the same channel, or nil when no task reads ch.
func (p *pump) routeOf(ch causal.Channel, tasks *taskmgr.Manager) *taskmgr.Route {
	if r := p.last; r != nil && r.Channel() == ch {
		return r
	}
	r := tasks.Route(ch)
	p.last = r
	return r
}

// forgetRoutes forgets the last route, whose tasks a reindex may have
// changed.
func (p *pump) forgetRoutes() { p.last = nil }

// handle takes one consumer event.
func (w *StreamThread) handle(ev *transport.Event) {
	m := &ev.Msg
	switch ev.Kind {
	case transport.EventRecord:
		r := w.pump.routeOf(m.Channel(), w.tasks)
		if r == nil {
			return // no task reads it (any more)
		}
		w.pump.count(r)
		w.pump.touch(r.Readers())
		if w.tasks.Deliver(r, framework.Record(*m)) {
			w.fate.mustAbort()
		}
	case transport.EventPosition:
		ch := m.Channel()
		if r := w.tasks.Route(ch); r != nil {
			w.pump.touch(r.Readers())
		}
		w.advance(ch, m.Offset)
	case transport.EventPartitionError:
		if transport.Classify(ev.Err) == transport.ClassFatal {
			// franz-go hands a group's fatal error (fenced by a newer
			// instance) over as a partition's.
			w.fate.stop(fmt.Errorf("consumer: %w", ev.Err))
			return
		}
		w.partitionError(m.Channel(), ev.Err)
	case transport.EventFatal:
		w.fate.stop(fmt.Errorf("consumer: %w", ev.Err))
	case transport.EventError:
		w.log.Warn("consumer error", zap.Error(ev.Err), zap.Stringer("class", transport.Classify(ev.Err)))
	}
}

func (w *StreamThread) advance(ch causal.Channel, position int64) {
	if r := w.tasks.Route(ch); r != nil && w.tasks.Advance(r, position) {
		w.fate.mustAbort()
	}
}

func (w *StreamThread) partitionError(ch causal.Channel, err error) {
	if transport.KindOf(err) == transport.KindOffsetOutOfRange {
		if r := w.tasks.Route(ch); r != nil {
			for _, rt := range r.Readers() {
				w.failTask(rt, fmt.Errorf("offset of %s out of range: records were lost before they were processed "+
					"(retention or truncation); restart with --allow-offset-reset to skip them: %w", ch, err))
			}
		}
		return
	}
	w.log.Warn("partition error", zap.Stringer("channel", ch), zap.Error(err))
}

// stream produces what the tasks the last poll batch went to have emitted
// into the open transaction, so that sending overlaps processing and a
// commit only waits for the tail. (Outputs of punctuations and idle
// advances wait for the commit.)
func (w *StreamThread) stream() {
	touched := w.pump.takeTouched()
	w.streamFrom(touched)
	w.pump.releaseTouched(touched)
}

// streamFrom produces the outputs of the running tasks among touched. Once
// the producer holds on to none of a task's header memory (Released), the
// task carves its next stamps and header lists over the same memory
// (task.Task.ReuseCarved).
func (w *StreamThread) streamFrom(touched []*taskmgr.Task) {
	for _, rt := range touched {
		if rt.State() != StateRunning || rt.Task() == nil {
			continue
		}
		sound, err := w.sendOutputs(rt)
		if err != nil {
			w.onCommitError(err)
			return
		}
		if sound && w.producer.Released() {
			rt.Task().ReuseCarved()
		}
	}
}

// sendOutputs produces everything rt's task has emitted into the open
// transaction. An output Kafka refuses for good goes to the processor's
// production error policy, which may fail the task or put a dead letter
// in its place (sent here too, in the same transaction). It reports
// whether the task is still sound; the error is the transaction's.
func (w *StreamThread) sendOutputs(rt *taskmgr.Task) (bool, error) {
	for {
		outs := rt.Task().TakeOutputs()
		if len(outs) == 0 {
			return true, nil
		}
		rt.Sending()
		latency := w.metrics.Latency.WithLabelValues(rt.Processor())
		now := w.pump.time.UnixMilli()
		for i := range outs {
			o := &outs[i]
			latency.Observe(float64(max(0, now-o.Record.Timestamp.UnixMilli())) / 1000)
			err := w.producer.Send((*transport.Message)(&o.Record))
			if err == nil {
				rt.CountStreamed()
				continue
			}
			if transport.Classify(err) != transport.ClassRecord {
				return false, err
			}
			if err := rt.Task().ProductionError(*o, err, !transport.TooLarge(err)); err != nil {
				w.failTask(rt, err)
				return false, nil
			}
		}
	}
}
