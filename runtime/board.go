package runtime

import (
	"slices"
	"sync"

	"github.com/causeway-stream/causeway/runtime/internal/transport"
)

// board is what a stream thread shows the other goroutines: its status as
// of the last snapshot, what it tells the group of its state, what it does
// while it starts, its restores' progress, the fatal error that stopped it,
// and whom it tells which tasks it runs. The pump writes it; the HTTP
// server, the group's balancer and the restores read it or write their
// part. Its methods are safe for concurrent use.
//
//causeway:owned
type board struct {
	mu     sync.Mutex
	status Status
	// report is what the thread tells the group of its state when it
	// joins.
	report transport.StateReport
	// starting says what the thread does while it starts.
	starting string
	// restoring is the progress of the restores under way, by task.
	restoring map[string]RestoreStatus
	err       error
	// members follows which worker runs which task, for forwarding
	// queries; nil when franz-go cannot connect with the given settings.
	// advertised is this worker's HTTP address as it tells the others.
	members    *membership
	advertised string
}

// snapshot is the status as of the last publish, with the progress of the
// restores under way as of now; before the first publish, it says what the
// thread of application appID does while it starts.
func (b *board) snapshot(appID string) Status {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := b.status
	if st.ApplicationID == "" {
		st.ApplicationID, st.Starting = appID, b.starting
		st.Reason = "starting: " + b.starting
	}
	if st.Tasks == nil {
		// Before the first refresh, and with no task: a list, in JSON too.
		st.Tasks = []TaskStatus{}
	}
	if len(b.restoring) > 0 {
		st.Tasks = slices.Clone(st.Tasks)
		for i, ts := range st.Tasks {
			if p, ok := b.restoring[ts.ID]; ok && ts.State == StateRestoring {
				st.Tasks[i].Restore = &p
			}
		}
	}
	return st
}

// publish replaces the status and the report to the group.
func (b *board) publish(st Status, report transport.StateReport) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.status, b.report = st, report
}

// stateReport is what the thread tells the group of its state when it
// joins.
func (b *board) stateReport() transport.StateReport {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.report
}

// setStarting says what the thread is doing while it starts (Status.Starting).
func (b *board) setStarting(what string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.starting = what
}

// restoreProgress records how far a task's restore has come, or with done
// that it is over.
func (b *board) restoreProgress(id string, p RestoreStatus, done bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if done {
		delete(b.restoring, id)
		return
	}
	if b.restoring == nil {
		b.restoring = map[string]RestoreStatus{}
	}
	b.restoring[id] = p
}

// stopped records the fatal error that stopped the thread.
func (b *board) stopped(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.err = err
}

// fatal is the error that stopped the thread, if any.
func (b *board) fatal() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// follow starts telling the others through m which tasks the thread runs.
func (b *board) follow(m *membership) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.members = m
}

// unfollow forgets the membership and returns it, to stop it.
func (b *board) unfollow() *membership {
	b.mu.Lock()
	defer b.mu.Unlock()
	m := b.members
	b.members = nil
	return m
}

// advertise sets the HTTP address the thread tells the others: configured,
// when not empty, or else addr.
func (b *board) advertise(addr, configured string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.advertised = addr
	if configured != "" {
		b.advertised = configured
	}
}

// peers is the membership (nil before the thread connects or without one)
// and the address the thread tells the others.
func (b *board) peers() (*membership, string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.members, b.advertised
}
