// Package restarts decides when a failed task is restarted without an
// operator: an opt-in policy beyond Kafka Streams and Kafka Connect, which
// never restart a failed task by themselves. The n-th attempt in a row
// comes Initial·2ⁿ after the failure, at most Max after it; a task that
// then runs for Max without failing starts from the first attempt again.
//
// A Tracker is a pure state machine, as causal's Node is: its callers
// give it the time and carry out the restarts; it holds no goroutine and
// reads no clock.
package restarts

import "time"

// Policy is when failed tasks restart. The zero Policy restarts nothing.
type Policy struct {
	// Initial is how long after its failure a task's first attempt in a
	// row comes; each further attempt waits twice as long as the one
	// before. Zero turns the policy off.
	Initial time.Duration
	// Max caps the wait before an attempt, and is how long a restarted
	// task must run before its attempts count from zero again. Default
	// (zero): 5 minutes.
	Max time.Duration
}

// DefaultMax is Policy.Max when none is given.
const DefaultMax = 5 * time.Minute

// Tracker follows the failures and restarts of tasks under a Policy.
type Tracker struct {
	p     Policy
	tasks map[string]*state
}

// state is one task's restarts: attempts made in a row, when the next is
// due (while it is failed) and when the last was made.
type state struct {
	attempts  int
	failed    bool
	next      time.Time
	restarted time.Time
}

// Status is what a Tracker says of one task.
type Status struct {
	// Attempts is how many restarts were made in a row.
	Attempts int
	// Next is when the next attempt is due; zero while the task is not
	// failed.
	Next time.Time
}

// New returns a tracker of p.
func New(p Policy) *Tracker {
	if p.Max <= 0 {
		p.Max = DefaultMax
	}
	return &Tracker{p: p, tasks: map[string]*state{}}
}

// Enabled reports whether the policy restarts anything.
func (t *Tracker) Enabled() bool { return t.p.Initial > 0 }

// Due notes that task id is failed at now, and reports whether its next
// attempt is due. The first call after a failure sets when.
func (t *Tracker) Due(id string, now time.Time) bool {
	if !t.Enabled() {
		return false
	}
	s := t.tasks[id]
	if s == nil {
		s = &state{}
		t.tasks[id] = s
	}
	if !s.failed {
		s.failed, s.next = true, now.Add(t.backoff(s.attempts))
	}
	return !now.Before(s.next)
}

// Restarted notes that task id was restarted at now.
func (t *Tracker) Restarted(id string, now time.Time) {
	s := t.tasks[id]
	if s == nil {
		s = &state{}
		t.tasks[id] = s
	}
	s.attempts++
	s.failed, s.next, s.restarted = false, time.Time{}, now
}

// Running notes that task id runs at now: once it has run Max since its
// last restart, its attempts count from zero again.
func (t *Tracker) Running(id string, now time.Time) {
	if s := t.tasks[id]; s != nil && !s.failed && now.Sub(s.restarted) >= t.p.Max {
		delete(t.tasks, id)
	}
}

// Forget drops what the tracker knows of task id (it left this worker).
func (t *Tracker) Forget(id string) { delete(t.tasks, id) }

// Status returns what the tracker knows of task id; ok is false when
// nothing (no attempt made, none due).
func (t *Tracker) Status(id string) (st Status, ok bool) {
	s := t.tasks[id]
	if s == nil {
		return Status{}, false
	}
	return Status{Attempts: s.attempts, Next: s.next}, true
}

// backoff is the wait before attempt n+1 in a row.
func (t *Tracker) backoff(n int) time.Duration {
	d := t.p.Initial
	for range n {
		if d >= t.p.Max/2 {
			return t.p.Max
		}
		d *= 2
	}
	return min(d, t.p.Max)
}
