package runtime

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/causeway-stream/causeway/runtime/internal/transport"
)

// membersTopic is the compacted topic in which an application's workers
// say which tasks they run and where their HTTP servers are.
func membersTopic(app string) string { return app + "-members" }

// memberRepublish is how often a worker says again what it runs, though
// nothing changed: how stale, at most, another worker's picture is after
// a record of it was compacted away or missed.
const memberRepublish = 10 * time.Second

// memberRecord is one worker's record in the members topic.
type memberRecord struct {
	Instance string    `json:"instance"`
	HTTP     string    `json:"http"`
	Tasks    []string  `json:"tasks"`
	At       time.Time `json:"at"`
}

// membership publishes this worker's member record and follows the
// others', so that a query for a key this worker does not hold can go to
// the worker that does. It reads and writes with a helper client, outside the
// worker's transactions: a member record is a hint, checked by the worker
// it names, which answers 421 when it no longer holds the task.
//
//causeway:owned
type membership struct {
	f        *transport.Follower
	topic    string
	instance string
	log      *zap.Logger

	mu      sync.Mutex
	members map[string]memberRecord // by instance
	// last is what this worker last published, and when.
	last     memberRecord
	lastSent time.Time

	cancel context.CancelFunc
	done   chan struct{}
}

// startMembership starts following the members topic with a follower
// helpers make.
func startMembership(helpers *transport.Helpers, topic, instance string, log *zap.Logger) (*membership, error) {
	f, err := helpers.FollowTopic(topic)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &membership{f: f, topic: topic, instance: instance, log: log, members: map[string]memberRecord{}, cancel: cancel,
		done: make(chan struct{})}
	go m.follow(ctx)
	return m, nil
}

func (m *membership) follow(ctx context.Context) {
	defer close(m.done)
	for {
		recs, err := m.f.Poll(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			m.log.Warn("read members", zap.Error(err))
		}
		for _, r := range recs {
			m.take(r)
		}
	}
}

// take keeps what a record of the members topic says.
func (m *membership) take(r transport.FollowedRecord) {
	if r.Marker {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if r.Value == nil {
		delete(m.members, string(r.Key))
		return
	}
	var mb memberRecord
	if err := json.Unmarshal(r.Value, &mb); err != nil {
		m.log.Warn("a member record that does not parse", zap.ByteString("key", r.Key), zap.Error(err))
		return
	}
	if old, ok := m.members[mb.Instance]; !ok || !mb.At.Before(old.At) {
		m.members[mb.Instance] = mb
	}
}

// publish says which tasks this worker runs and where its HTTP server is,
// when that changed or every memberRepublish. It does not wait for the
// record to be written.
func (m *membership) publish(http string, tasks []string, now time.Time) {
	if http == "" {
		return
	}
	mb := memberRecord{Instance: m.instance, HTTP: http, Tasks: tasks, At: now}
	m.mu.Lock()
	same := m.last.HTTP == http && slices.Equal(m.last.Tasks, tasks) && now.Sub(m.lastSent) < memberRepublish
	if !same {
		m.last, m.lastSent = mb, now
	}
	m.mu.Unlock()
	if same {
		return
	}
	b, err := json.Marshal(mb)
	if err != nil {
		return
	}
	m.f.Produce(m.topic, []byte(m.instance), b, func(err error) {
		if err != nil {
			m.log.Warn("publish member record", zap.Error(err))
		}
	})
}

// owner returns the HTTP address of another worker whose latest record
// says it runs task.
func (m *membership) owner(task string) (string, bool) {
	if m == nil {
		return "", false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var best memberRecord
	for _, mb := range m.members {
		if mb.Instance != m.instance && slices.Contains(mb.Tasks, task) && mb.At.After(best.At) {
			best = mb
		}
	}
	return best.HTTP, best.HTTP != ""
}

// stop says this worker runs nothing any more, and stops following.
func (m *membership) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := m.f.ProduceSync(ctx, m.topic, []byte(m.instance), nil); err != nil {
		m.log.Warn("withdraw member record", zap.Error(err))
	}
	m.cancel()
	<-m.done
	m.f.Close()
}
