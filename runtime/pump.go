package runtime

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/taskmgr"
	"github.com/causeway-stream/causeway/runtime/internal/member"
	"github.com/causeway-stream/causeway/runtime/internal/transport"
	"github.com/causeway-stream/causeway/runtime/internal/txn"
)

// pump is the stream thread's engine on its member loop
// (member.Engine): it hands each polled record to the tasks that read its
// channel, and streams what they emit into the open transaction. Only the
// pump goroutine touches it.
//
//causeway:owned
type pump struct {
	// poll is the consumer's Poll (wrapped by tests, through wrapPoll).
	poll transport.PollFunc
	// tasks, producer and fate are the thread's, shared with it; latency
	// is its processing-latency histogram.
	tasks    *taskmgr.Manager
	producer *txn.Producer
	fate     *member.Fate
	// consumer is the thread's, which the pump seeks, pauses and resumes
	// (liveness.go); maxHeld is Config.MaxHeldPerChannel.
	consumer transport.Consumer
	maxHeld  int
	latency  *prometheus.HistogramVec
	log      *zap.Logger
	// env is what the pump asks of the thread that runs it.
	env pumpEnv
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
	// paused holds the partitions backpressure paused.
	paused map[causal.Channel]bool
}

// pumpEnv is what the pump asks of the stream thread: the thread's own
// rounds (between polls, and a commit when one is due), and what it does
// with a transaction that failed.
type pumpEnv struct {
	between     func()
	tick        func()
	commitError func(err error)
}

// wire gives the pump the loop's fate, the latency histogram, the log,
// and what it asks of the thread.
func (p *pump) wire(fate *member.Fate, latency *prometheus.HistogramVec, log *zap.Logger, env pumpEnv) {
	p.fate, p.latency, p.log, p.env = fate, latency, log, env
}

// attach gives the pump the thread's task manager, producer and consumer,
// once the thread made them, and the most records a channel may hold in a
// task before it is paused (Config.MaxHeldPerChannel).
func (p *pump) attach(tasks *taskmgr.Manager, producer *txn.Producer, consumer transport.Consumer, maxHeld int) {
	p.tasks, p.producer, p.consumer, p.maxHeld = tasks, producer, consumer, maxHeld
}

// Between takes what the thread's other goroutines sent it.
func (p *pump) Between() { p.env.between() }

// Clock sets the pump's time and the tasks' clock to now, read where the
// loop polls: the tasks' clock trails the wall clock by at most the
// handling of one poll batch.
func (p *pump) Clock(now time.Time) {
	p.time = now
	if p.tasks != nil {
		p.tasks.SetNow(now)
	}
}

// Commit runs the thread's commit round.
func (p *pump) Commit(time.Time) { p.env.tick() }

// Handled streams what a batch made the tasks emit.
func (p *pump) Handled() {
	p.countRecordsIn()
	p.stream()
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

// setPoll makes the pump poll with poll.
func (p *pump) setPoll(poll transport.PollFunc) { p.poll = poll }

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

// Record hands one polled record to the tasks that read its channel.
func (p *pump) Record(m *transport.Message) {
	r := p.routeOf(m.Channel(), p.tasks)
	if r == nil {
		return // no task reads it (any more)
	}
	p.count(r)
	p.touch(r.Readers())
	if p.tasks.Deliver(r, framework.Record(*m)) {
		p.fate.MustAbort()
	}
}

// Position tells the tasks that read ch that it was read up to next.
func (p *pump) Position(ch causal.Channel, next int64) {
	if r := p.tasks.Route(ch); r != nil {
		p.touch(r.Readers())
	}
	p.advance(ch, next)
}

// advance moves ch's position in the tasks that read it to position.
func (p *pump) advance(ch causal.Channel, position int64) {
	if r := p.tasks.Route(ch); r != nil && p.tasks.Advance(r, position) {
		p.fate.MustAbort()
	}
}

// PartitionError fails the tasks that read ch when its offset is out of
// range, and logs any other error of ch's.
func (p *pump) PartitionError(ch causal.Channel, err error) {
	if transport.KindOf(err) == transport.KindOffsetOutOfRange {
		if r := p.tasks.Route(ch); r != nil {
			for _, rt := range r.Readers() {
				p.failTask(rt, fmt.Errorf("offset of %s out of range: records were lost before they were processed "+
					"(retention or truncation); restart with --allow-offset-reset to skip them: %w", ch, err))
			}
		}
		return
	}
	p.log.Warn("partition error", zap.Stringer("channel", ch), zap.Error(err))
}

// stream produces what the tasks the last poll batch went to have emitted
// into the open transaction, so that sending overlaps processing and a
// commit only waits for the tail. (Outputs of punctuations and idle
// advances wait for the commit.)
func (p *pump) stream() {
	touched := p.takeTouched()
	p.streamFrom(touched)
	p.releaseTouched(touched)
}

// streamFrom produces the outputs of the running tasks among touched. Once
// the producer holds on to none of a task's header memory (Released), the
// task carves its next stamps and header lists over the same memory
// (task.Task.ReuseCarved).
func (p *pump) streamFrom(touched []*taskmgr.Task) {
	for _, rt := range touched {
		if rt.State() != StateRunning || rt.Task() == nil {
			continue
		}
		sound, err := p.sendOutputs(rt)
		if err != nil {
			p.env.commitError(err)
			return
		}
		if sound && p.producer.Released() {
			rt.Task().ReuseCarved()
		}
	}
}

// sendOutputs produces everything rt's task has emitted into the open
// transaction. An output Kafka refuses for good goes to the processor's
// production error policy, which may fail the task or put a dead letter
// in its place (sent here too, in the same transaction). It reports
// whether the task is still sound; the error is the transaction's.
func (p *pump) sendOutputs(rt *taskmgr.Task) (bool, error) {
	for {
		outs := rt.Task().TakeOutputs()
		if len(outs) == 0 {
			return true, nil
		}
		rt.Sending()
		latency := p.latency.WithLabelValues(rt.Processor())
		now := p.time.UnixMilli()
		for i := range outs {
			o := &outs[i]
			latency.Observe(float64(max(0, now-o.Record.Timestamp.UnixMilli())) / 1000)
			err := p.producer.Send((*transport.Message)(&o.Record))
			if err == nil {
				rt.CountStreamed()
				continue
			}
			if transport.Classify(err) != transport.ClassRecord {
				return false, err
			}
			if err := rt.Task().ProductionError(*o, err, !transport.TooLarge(err)); err != nil {
				p.failTask(rt, err)
				return false, nil
			}
		}
	}
}

// failTask fails one task; see taskmgr.Manager.Fail. A restoring task,
// whose stores its restore owns, is left to it: it reads nothing until it
// is built, and meets the error again then.
func (p *pump) failTask(rt *taskmgr.Task, err error) {
	if rt.State() == StateRestoring {
		p.log.Warn("error for a restoring task; it meets it again once restored", zap.String("task", rt.ID()), zap.Error(err))
		return
	}
	if p.tasks.Fail(rt, err) {
		p.fate.MustAbort()
	}
}
