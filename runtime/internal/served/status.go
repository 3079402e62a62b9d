// Package served holds what a worker serves to its operators and its
// clients: its status, and store queries with their answers and errors.
// The stream threads make them, the HTTP server (runtime/internal/server)
// writes them out, and package runtime gives them their public names.
package served

import (
	"time"

	"github.com/causeway-stream/causeway/framework/taskmgr"
	"github.com/causeway-stream/causeway/runtime/internal/restore"
)

// Status is what /status reports: the worker and each of its tasks.
type Status struct {
	ApplicationID string `json:"application_id"`
	InstanceID    string `json:"instance_id"`
	// Ready is what /readyz answers: every assigned task restored and
	// running (or FAILED, with runtime.Config.ReadyWithFailedTasks), commits
	// going through, no fatal error.
	Ready bool `json:"ready"`
	// Degraded is set while some tasks are FAILED (the others run).
	Degraded bool `json:"degraded,omitempty"`
	// Reason says why the worker is not ready or is degraded.
	Reason string `json:"reason,omitempty"`
	// Error is the fatal error the worker stops on.
	Error string `json:"error,omitempty"`
	// Starting says what a worker that has not joined its group yet is
	// doing: reaching Kafka, or waiting for topics that do not exist.
	Starting string `json:"starting,omitempty"`
	// FailedCommits counts the transactions that failed in a row, and
	// LastCommitError says why the last one did; a worker whose commits
	// keep failing is not ready.
	FailedCommits   int          `json:"failed_commits,omitempty"`
	LastCommitError string       `json:"last_commit_error,omitempty"`
	Tasks           []TaskStatus `json:"tasks"`
	// Standbys are the copies of other workers' tasks' state this worker
	// keeps up to date.
	Standbys []StandbyStatus `json:"standbys,omitempty"`
}

// StandbyStatus describes one copy of another worker's task's state.
type StandbyStatus struct {
	ID     string `json:"id"`
	Thread int    `json:"thread"`
	// Role is STANDBY (kept for a failover) or WARMING_UP (to take the
	// task over once it has caught up).
	Role string `json:"role"`
	// Lag is how many changelog records the copy lacked when its last
	// catch-up round began; absent before the first.
	Lag *int64 `json:"lag,omitempty"`
}

// TaskStatus describes one task.
type TaskStatus struct {
	ID string `json:"id"`
	// Thread is the stream thread that runs the task (see Instance).
	Thread    int             `json:"thread"`
	State     taskmgr.State   `json:"state"`
	Held      int             `json:"held"`
	LastError string          `json:"last_error,omitempty"`
	Channels  []ChannelStatus `json:"channels"`
	// Restore is how far the restore of a RESTORING task has come.
	Restore *RestoreStatus `json:"restore,omitempty"`
	// Restarts is what the restart policy (runtime.Config.TaskRestartBackoff)
	// did for the task, and when it tries next; absent when nothing.
	Restarts *RestartStatus `json:"restarts,omitempty"`
}

// RestartStatus is a task's restarts by the restart policy.
type RestartStatus struct {
	// Attempts is how many restarts were made in a row.
	Attempts int `json:"attempts"`
	// NextAttempt is when the task, failed, is restarted next.
	NextAttempt *time.Time `json:"next_attempt,omitempty"`
}

// RestoreStatus is the progress of one task's restore.
type RestoreStatus = restore.Progress

// ChannelStatus describes one input channel of a task.
type ChannelStatus struct {
	Channel  string `json:"channel"`
	Frontier int64  `json:"frontier"`
	Held     int    `json:"held"`
	// Committed is the next offset the task resumes from after a restart.
	Committed int64 `json:"committed"`
	// Lag is how many offsets of the channel are not committed yet: its
	// end, as the consumer last saw it, less Committed; absent while the
	// end is not known, and for a global table's channel.
	Lag *int64 `json:"lag,omitempty"`
	// Blocked is set when the head of the channel's queue waits for a
	// cause: the frontier of WaitingFor must reach WaitingOffset.
	Blocked       bool       `json:"blocked"`
	WaitingFor    string     `json:"waiting_for,omitempty"`
	WaitingOffset int64      `json:"waiting_offset,omitempty"`
	BlockedSince  *time.Time `json:"blocked_since,omitempty"`
}
