package connectworker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/runtime/internal/member"
	"github.com/causeway-stream/causeway/runtime/internal/transport"
	"github.com/causeway-stream/causeway/runtime/internal/txn"
)

// store keeps the cluster's state: it reads the state topic from its
// start, and writes to it in Kafka transactions. Every worker has one.
//
//causeway:owned
type store struct {
	ch       causal.Channel
	consumer transport.Consumer
	producer *txn.Producer
	admin    transport.Admin
	log      *zap.Logger

	// writeMu makes writes take turns: the producer has one transaction
	// open at a time.
	writeMu sync.Mutex

	mu    sync.Mutex
	state clusterState
	// pos is the next offset of the state topic to read.
	pos int64
	// moved is closed, and replaced, each time pos moves.
	moved chan struct{}
}

// newStore makes the state topic when it is missing and readies the
// clients; run reads it.
func newStore(ctx context.Context, topic string, consumer transport.Consumer, producer *txn.Producer, admin transport.Admin, log *zap.Logger) (*store, error) {
	err := admin.CreateTopics(ctx, []transport.TopicSpec{{Name: topic, Partitions: 1, Configs: map[string]string{"cleanup.policy": "compact"}}})
	if err != nil {
		return nil, fmt.Errorf("state topic: %w", err)
	}
	s := &store{ch: causal.Channel{Topic: topic}, consumer: consumer, producer: producer, admin: admin, log: log,
		state: newClusterState(), moved: make(chan struct{})}
	if err := producer.Init(ctx); err != nil {
		return nil, fmt.Errorf("state topic producer: %w", err)
	}
	low, _, err := consumer.Watermarks(s.ch)
	if err != nil {
		return nil, fmt.Errorf("state topic %s: %w", topic, err)
	}
	s.pos = low
	if err := consumer.Assign(map[causal.Channel]int64{s.ch: low}); err != nil {
		return nil, fmt.Errorf("state topic %s: %w", topic, err)
	}
	return s, nil
}

// run reads the state topic until ctx is done, on a member loop of its
// own (the store is its engine).
func (s *store) run(ctx context.Context) error {
	l, err := member.New(s.consumer.Poll, member.Options{Batch: 256, Wait: 50 * time.Millisecond,
		CommitInterval: time.Hour, Log: s.log})
	if err != nil {
		return err
	}
	if err := l.Run(storeEngine{s}, ctx.Done()); err != nil {
		return fmt.Errorf("state topic: %w", err)
	}
	return nil
}

// storeEngine is the store's engine on its member loop (member.Engine):
// it applies each record of the state topic to the state, and follows
// the topic's position. It commits nothing.
type storeEngine struct{ s *store }

func (storeEngine) Between()         {}
func (storeEngine) Clock(time.Time)  {}
func (storeEngine) Handled()         {}
func (storeEngine) Commit(time.Time) {}

// Record applies one record of the state topic. A record of another
// version or a bad hand is logged and passed over, so one bad record
// does not stop every worker.
func (e storeEngine) Record(m *transport.Message) {
	s := e.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.state.apply(string(m.Key), m.Value, m.Timestamp); err != nil {
		s.log.Error("state topic record skipped", zap.String("topic", m.Topic), zap.Int64("offset", m.Offset), zap.Error(err))
	}
	s.advance(m.Offset + 1)
}

// Position follows the state topic's position past what holds no record.
func (e storeEngine) Position(_ causal.Channel, next int64) {
	e.s.mu.Lock()
	defer e.s.mu.Unlock()
	e.s.advance(next)
}

// PartitionError logs an error of the state topic's.
func (e storeEngine) PartitionError(ch causal.Channel, err error) {
	e.s.log.Warn("state topic", zap.Stringer("channel", ch), zap.Error(err))
}

// advance moves pos forward to next, waking whoever waits on it.
func (s *store) advance(next int64) {
	if next > s.pos {
		s.pos = next
		close(s.moved)
		s.moved = make(chan struct{})
	}
}

// view calls f with the state, locked.
func (s *store) view(f func(st *clusterState)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.state)
}

// write writes key's value (nil: a tombstone) in a transaction of its
// own, and returns once this worker's view holds it.
func (s *store) write(ctx context.Context, key string, value []byte) error {
	if err := s.send(key, value); err != nil {
		return err
	}
	return s.sync(ctx)
}

// send writes key's value without waiting to read it back, in a
// transaction of its own, ended whatever happens: one left open would
// refuse every later write.
func (s *store) send(key string, value []byte) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	err := s.producer.Do(func(send func(*transport.Message) error) error {
		return send(&transport.Message{Topic: s.ch.Topic, Partition: 0, Key: []byte(key), Value: value, Timestamp: time.Now()})
	})
	if err != nil {
		return fmt.Errorf("write %s: %w", key, err)
	}
	return nil
}

// sync returns once this worker has read the state topic to the end it
// has now, so that its view holds every write done before the call.
func (s *store) sync(ctx context.Context) error {
	ends, err := s.admin.Ends(ctx, []causal.Channel{s.ch})
	if err != nil {
		return fmt.Errorf("end of the state topic: %w", err)
	}
	end := ends[s.ch]
	for {
		s.mu.Lock()
		pos, moved := s.pos, s.moved
		s.mu.Unlock()
		if pos >= end {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("read the state topic to offset %d (at %d): %w", end, pos, ctx.Err())
		case <-moved:
		}
	}
}

// close closes the clients.
func (s *store) close() error {
	err := s.consumer.Close()
	s.admin.Close()
	return errors.Join(err, s.producer.Close())
}
