package connectworker

import (
	"fmt"
	"maps"
	"time"
)

// refreshFacts asks each running task that describes itself where it
// stands (connect.Describer). It runs at each heartbeat, so that a task
// whose position moves all the time writes its status at most that often.
func (h *herder) refreshFacts() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.runners {
		d := r.counters.describer.Load()
		if d == nil {
			r.facts = nil
			continue
		}
		r.facts = (*d).Describe()
	}
}

// sameStatus reports whether a and b say the same.
func sameStatus(a, b taskStatus) bool {
	return a.State == b.State && a.Task == b.Task && a.Trace == b.Trace && a.FailedAt == b.FailedAt && maps.Equal(a.Facts, b.Facts)
}

// withRestarts adds to a failed task's status when the restart policy
// tries it next.
func (h *herder) withRestarts(key string, st taskStatus) taskStatus {
	if rs, ok := h.restarts.Status(key); ok && !rs.Next.IsZero() && st.State == StateFailed {
		st.Trace += fmt.Sprintf("\n(restart policy: attempt %d at %s)", rs.Attempts+1, rs.Next.UTC().Format(time.RFC3339))
	}
	return st
}
