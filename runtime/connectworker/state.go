package connectworker

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The cluster's state is a compacted topic of records keyed by what they
// are about, each a JSON value:
//
//	config/<connector>          {"config": {...}}            tombstone: deleted
//	target/<connector>          {"state": "RUNNING"|"PAUSED"|"STOPPED"}
//	restart/<connector>         {"count": n, "only_failed": b}
//	restart/<connector>/<task>  {"count": n}
//	skip/<connector>/<task>     {"count": n, "topic": ..., "partition": n, "offset": n}
//	worker/<worker>             {"url": "..."}               tombstone: left
//	status/<connector>/<worker> {"state": "...", "task": n, "trace": "..."}
//
// Every worker reads the whole topic, so every worker knows every
// connector, and the workers that are alive: those whose worker record
// was written (its Kafka timestamp) within the liveness bound.

// Target states of a connector, and task states, as Kafka Connect names
// them.
const (
	StateRunning    = "RUNNING"
	StatePaused     = "PAUSED"
	StateStopped    = "STOPPED"
	StateFailed     = "FAILED"
	StateUnassigned = "UNASSIGNED"
	StateRestarting = "RESTARTING"
)

// clusterState is what the records of the state topic say. It is a plain
// value: apply folds records in, the rest reads.
type clusterState struct {
	configs  map[string]map[string]string
	targets  map[string]string
	restarts map[string]restartRequest
	skips    map[string]skipRequest // by connector/task
	workers  map[string]workerRecord
	statuses map[string]map[string]taskStatus // connector, then worker
	// topics are the topics each connector has used since it was made
	// or its topics were reset (KIP-558).
	topics map[string]map[string]bool
}

// topicRecord is a topic a connector used, as Kafka Connect's status
// topic keeps it.
type topicRecord struct {
	Topic struct {
		Name      string `json:"name"`
		Connector string `json:"connector"`
		Task      int    `json:"task"`
		Discover  int64  `json:"discoverTimestamp"`
	} `json:"topic"`
}

type configRecord struct {
	Config map[string]string `json:"config"`
}

type targetRecord struct {
	State string `json:"state"`
}

type restartRequest struct {
	Count      int64 `json:"count"`
	OnlyFailed bool  `json:"only_failed,omitempty"`
}

// skipRequest asks a failed task to go past the record it failed on,
// sending it to the dead-letter topic.
type skipRequest struct {
	Count int64 `json:"count"`
	recordRef
}

// recordRef names a record.
type recordRef struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
}

type workerRecord struct {
	URL string    `json:"url"`
	At  time.Time `json:"-"`
}

type taskStatus struct {
	State string `json:"state"`
	Task  int    `json:"task"`
	Trace string `json:"trace,omitempty"`
	// FailedAt is the record a failed sink task stopped on, when one did
	// (zero otherwise).
	FailedAt recordRef `json:"failed_at,omitzero"`
	// Facts are what a running task says of where it stands, as of the
	// worker's last heartbeat (connect.Describer).
	Facts map[string]string `json:"facts,omitempty"`
}

func newClusterState() clusterState {
	return clusterState{configs: map[string]map[string]string{}, targets: map[string]string{},
		restarts: map[string]restartRequest{}, skips: map[string]skipRequest{}, workers: map[string]workerRecord{}, statuses: map[string]map[string]taskStatus{},
		topics: map[string]map[string]bool{}}
}

// apply folds one record of the state topic in. A record it cannot read
// is an error naming its key; the state is left as it was.
func (s *clusterState) apply(key string, value []byte, at time.Time) error {
	kind, rest, _ := strings.Cut(key, "/")
	bad := func(err error) error { return fmt.Errorf("state record %q: %w", key, err) }
	switch kind {
	case "config":
		if value == nil {
			delete(s.configs, rest)
			delete(s.targets, rest)
			delete(s.statuses, rest)
			return nil
		}
		var r configRecord
		if err := json.Unmarshal(value, &r); err != nil {
			return bad(err)
		}
		s.configs[rest] = r.Config
	case "target":
		var r targetRecord
		if value == nil {
			delete(s.targets, rest)
			return nil
		}
		if err := json.Unmarshal(value, &r); err != nil {
			return bad(err)
		}
		s.targets[rest] = r.State
	case "restart":
		var r restartRequest
		if value != nil {
			if err := json.Unmarshal(value, &r); err != nil {
				return bad(err)
			}
		}
		s.restarts[rest] = r
	case "skip":
		var r skipRequest
		if value != nil {
			if err := json.Unmarshal(value, &r); err != nil {
				return bad(err)
			}
		}
		s.skips[rest] = r
	case "worker":
		if value == nil {
			delete(s.workers, rest)
			return nil
		}
		var r workerRecord
		if err := json.Unmarshal(value, &r); err != nil {
			return bad(err)
		}
		r.At = at
		s.workers[rest] = r
	case "topic":
		connector, topic, ok := strings.Cut(rest, "/")
		if !ok {
			return bad(fmt.Errorf("no topic in the key"))
		}
		if value == nil {
			delete(s.topics[connector], topic)
			return nil
		}
		if s.topics[connector] == nil {
			s.topics[connector] = map[string]bool{}
		}
		s.topics[connector][topic] = true
	case "status":
		connector, worker, ok := strings.Cut(rest, "/")
		if !ok {
			return bad(fmt.Errorf("no worker in the key"))
		}
		if value == nil {
			delete(s.statuses[connector], worker)
			return nil
		}
		var r taskStatus
		if err := json.Unmarshal(value, &r); err != nil {
			return bad(err)
		}
		if s.statuses[connector] == nil {
			s.statuses[connector] = map[string]taskStatus{}
		}
		s.statuses[connector][worker] = r
	default:
		return bad(fmt.Errorf("unknown kind %q", kind))
	}
	return nil
}

// target is a connector's target state; RUNNING when none was set.
func (s *clusterState) target(connector string) string {
	if t, ok := s.targets[connector]; ok {
		return t
	}
	return StateRunning
}

// live lists the workers whose last record is younger than bound at now,
// sorted.
func (s *clusterState) live(now time.Time, bound time.Duration) []string {
	var out []string
	for id, w := range s.workers {
		if now.Sub(w.At) < bound {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// tasksOf assigns the tasks of a connector to live workers: tasks.max of
// them (at most one per worker), starting at a place the connector's name
// picks so that connectors spread, and returns worker by task id.
func tasksOf(connector string, tasksMax int, live []string) []string {
	n := min(tasksMax, len(live))
	if n <= 0 {
		return nil
	}
	h := fnv.New32a()
	h.Write([]byte(connector)) //nolint:errcheck // a hash does not fail
	start := int(h.Sum32() % uint32(len(live)))
	out := make([]string, n)
	for i := range n {
		out[i] = live[(start+i)%len(live)]
	}
	return out
}

// tasksMax reads a config's tasks.max; 1 when unset or wrong (validation
// refuses wrong ones before they are stored).
func tasksMax(cfg map[string]string) int { return atLeast(cfg[keyTasksMax], 1, 1) }

// atLeast reads an integer setting: def when unset or below min (the
// settings' checks refuse wrong ones before they are stored).
func atLeast(v string, min, def int) int {
	n, err := strconv.Atoi(v)
	if err != nil || n < min {
		return def
	}
	return n
}
