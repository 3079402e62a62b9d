// Package member is the poll loop of one consumer-group member, the one
// skeleton under every worker that reads Kafka in a loop: the stream
// thread, the sink task and the connect worker's state reader. A Loop
// polls its consumer in batches, sorts each event (a record, a position, a
// partition's error, the client's error or its end), hands what is the
// engine's to its Engine, and tells the engine when a commit is due. What
// the member must do beyond its next step (stop for good, abort the open
// transaction) is its Fate, which the engine and the loop share.
//
// The loop owns no goroutine and no client: it runs on its caller's
// goroutine, over the poll function it is given, until the stop channel
// closes or the fate says stop. The engine owns everything else: what a
// record means, what a commit writes (through its txn.Producer), and what
// is left to do when the loop ends.
package member

import (
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/runtime/internal/transport"
)

// Engine is the work a Loop runs. The loop calls it on its own goroutine
// only, in this order for each round: Between (now and then), Clock, the
// batch's Record, Position and PartitionError calls in the order the
// consumer reported them, Handled, and Commit when one is due. An engine
// that cannot go on says so on the loop's Fate (Stop); the loop then hands
// it nothing more and returns.
type Engine interface {
	// Between is called before a poll when the loop looks around: when
	// the last poll brought nothing, and once every Options.CheckEvery
	// events otherwise. The engine takes what its other goroutines sent
	// it (requests, results of background work) here.
	Between()
	// Clock gives the time of the poll whose events follow, read once a
	// poll so that no record costs a clock read.
	Clock(now time.Time)
	// Record takes one record.
	Record(m *transport.Message)
	// Position says ch was read up to next (the next offset to read) past
	// the records handed out: transaction markers, the partition's end.
	Position(ch causal.Channel, next int64)
	// PartitionError is an error of ch's that does not stop the member.
	PartitionError(ch causal.Channel, err error)
	// Handled is called once a batch's events are handled, unless the
	// fate says stop.
	Handled()
	// Commit is called when a commit is due (Options.CommitInterval).
	Commit(now time.Time)
}

// Options are a Loop's settings. The zero value of each is its default.
type Options struct {
	// Batch is the most events one poll takes. Default: 512.
	Batch int
	// Wait is how long a poll waits for its first event. Default: 10 ms.
	Wait time.Duration
	// CommitInterval is how often the engine commits. Default: 100 ms.
	CommitInterval time.Duration
	// CheckEvery is how many events may go by between two looks around
	// (Engine.Between) while records flow: a look costs more than a
	// record's own bookkeeping. Default: 64.
	CheckEvery int
	// Now reads the clock. Default: time.Now.
	Now func() time.Time
	// Log hears of the client's errors that it goes on from. Default: a
	// no-op logger.
	Log *zap.Logger
}

// Loop is one member's poll loop. Build it with New; Run runs it.
//
//causeway:owned
type Loop struct {
	opts Options
	poll transport.PollFunc
	// Fate is what the member must do beyond its next step; the engine
	// sets it, the loop acts on it.
	Fate Fate
	// polled holds the events of one poll until they are handled.
	// Handled events stay in its array until a later poll writes over
	// them, up to stale of them, or the consumer has none to give.
	polled []transport.Event
	stale  int
	// time is when the loop last polled.
	time time.Time
}

// New returns a loop over poll with opts' settings.
func New(poll transport.PollFunc, opts Options) (*Loop, error) {
	if poll == nil {
		return nil, errors.New("member: no poll function")
	}
	if opts.Batch < 0 || opts.Wait < 0 || opts.CommitInterval < 0 || opts.CheckEvery < 0 {
		return nil, fmt.Errorf("member: negative setting in %+v", opts)
	}
	if opts.Batch == 0 {
		opts.Batch = 512
	}
	if opts.Wait == 0 {
		opts.Wait = 10 * time.Millisecond
	}
	if opts.CommitInterval == 0 {
		opts.CommitInterval = 100 * time.Millisecond
	}
	if opts.CheckEvery == 0 {
		opts.CheckEvery = 64
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Log == nil {
		opts.Log = zap.NewNop()
	}
	return &Loop{opts: opts, poll: poll}, nil
}

// Time is when the loop last polled: the engine's clock while it handles
// what that poll returned.
func (l *Loop) Time() time.Time { return l.time }

// Batch is the most events one poll takes.
func (l *Loop) Batch() int { return l.opts.Batch }

// ErrStoppedWaiting ends Run when stop closed while the engine waited on
// the cluster and said so on the fate (with an error wrapping
// transport.ErrStopped): the member stops as after a last commit that
// failed, its open work left to the next owner.
var ErrStoppedWaiting = errors.New("stopped while waiting on the cluster")

// Run runs the loop until stop closes or the fate says stop. It returns
// nil when stop closed between two rounds, without a last commit: the
// engine's caller ends the work (commits or aborts, and closes) once Run
// returns. It returns an error wrapping ErrStoppedWaiting when stop closed
// while the engine waited, and the fate's error otherwise.
func (l *Loop) Run(e Engine, stop <-chan struct{}) error {
	l.time = l.opts.Now()
	e.Clock(l.time)
	next := l.time.Add(l.opts.CommitInterval)
	sinceCheck := 0
	for {
		if sinceCheck == 0 {
			select {
			case <-stop:
				return nil
			default:
			}
			e.Between()
		}
		n := l.Poll()
		e.Clock(l.time)
		l.Handle(e)
		if sinceCheck += n; n == 0 || sinceCheck >= l.opts.CheckEvery {
			sinceCheck = 0
		}
		if l.Fate.fatal == nil && l.commitDue(next, n) {
			e.Commit(l.time)
			next = l.opts.Now().Add(l.opts.CommitInterval)
		}
		if l.Fate.fatal != nil {
			if l.Fate.OnlyStopped(stop) {
				return fmt.Errorf("%w: %w", ErrStoppedWaiting, l.Fate.fatal)
			}
			return l.Fate.fatal
		}
	}
}

// Poll collects the events the consumer has ready, up to the batch,
// waiting up to Options.Wait for the first, notes the time, and returns
// how many it collected. Handling them apart from polling (Handle) keeps
// the code and data of each step in the processor's caches across a batch
// instead of swapping them out at every record: the gain is greater the
// larger the records. A rebalance handler running inside the poll calls
// Handle first, as the events collected before it belong to the
// assignment it ends.
func (l *Loop) Poll() int {
	n := l.poll(l.opts.Wait, l.opts.Batch, &l.polled)
	l.time = l.opts.Now()
	return n
}

// Handle hands the collected events to e in order, then tells it the
// batch is handled (Engine.Handled). It hands nothing more once the fate
// says stop: what is left is read again by the next owner.
func (l *Loop) Handle(e Engine) {
	if len(l.polled) == 0 {
		// Nothing came: the member is idle, and lets go of the events of
		// the last batches, which point into fetched records.
		clear(l.polled[:l.stale])
		l.stale = 0
		return
	}
	for i := range l.polled {
		if l.Fate.fatal != nil {
			break
		}
		l.dispatch(e, &l.polled[i])
	}
	// The handled events are not cleared now: the next batch writes over
	// them, and clearing each batch would cost a second pass of write
	// barriers a record while the collector marks.
	l.stale = max(l.stale, len(l.polled))
	l.polled = l.polled[:0]
	if l.Fate.fatal == nil {
		e.Handled()
	}
}

// dispatch sorts one event.
func (l *Loop) dispatch(e Engine, ev *transport.Event) {
	m := &ev.Msg
	switch ev.Kind {
	case transport.EventRecord:
		e.Record(m)
	case transport.EventPosition:
		e.Position(m.Channel(), m.Offset)
	case transport.EventPartitionError:
		if transport.Classify(ev.Err) == transport.ClassFatal {
			// franz-go hands a group's fatal error (fenced by a newer
			// instance) over as a partition's.
			l.Fate.Stop(fmt.Errorf("consumer: %w", ev.Err))
			return
		}
		e.PartitionError(m.Channel(), ev.Err)
	case transport.EventFatal:
		l.Fate.Stop(fmt.Errorf("consumer: %w", ev.Err))
	case transport.EventError:
		l.opts.Log.Warn("consumer error", zap.Error(ev.Err), zap.Stringer("class", transport.Classify(ev.Err)))
	}
}

// commitDue reports whether the engine commits now, the last poll having
// taken polled events: once the commit interval is up (next), unless that
// poll filled the batch and the commit is less than a tenth of the
// interval overdue. A full batch says the consumer has more records ready,
// already fetched; handling them first puts them in the transaction about
// to close, where committing in the middle of them would leave them to
// wait a whole interval for the next. Past the tenth, the commit goes
// ahead however much is ready, so that a backlog delays no commit by more
// than that.
func (l *Loop) commitDue(next time.Time, polled int) bool {
	over := l.time.Sub(next)
	if over < 0 {
		return false
	}
	return polled < l.opts.Batch || over >= l.opts.CommitInterval/10
}

// Fate is what a member has learned it must do beyond its next step. Only
// the loop's goroutine touches it.
//
//causeway:owned
type Fate struct {
	// fatal, once set, stops the member: the loop hands over nothing
	// more and returns it.
	fatal error
	// abort is set when the open transaction holds what must not be
	// committed (a task failed after streaming outputs into it): the
	// engine aborts it instead of committing.
	abort bool
}

// Stop records a fatal error; the member stops.
func (f *Fate) Stop(err error) { f.fatal = err }

// Fatal is the error the member stops on, or nil.
func (f *Fate) Fatal() error { return f.fatal }

// OnlyStopped reports whether the fatal error is only that the member was
// stopped (stop is closed) while its engine waited (transport.ErrStopped).
func (f *Fate) OnlyStopped(stop <-chan struct{}) bool {
	if f.fatal == nil || !errors.Is(f.fatal, transport.ErrStopped) {
		return false
	}
	select {
	case <-stop:
		return true
	default:
		return false
	}
}

// MustAbort records that the open transaction must abort.
func (f *Fate) MustAbort() { f.abort = true }

// Aborting reports whether the open transaction must abort.
func (f *Fate) Aborting() bool { return f.abort }

// Aborted records that the transaction was aborted.
func (f *Fate) Aborted() { f.abort = false }
