package runtime

import (
	"fmt"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"go.uber.org/zap"

	"github.com/causeway-stream/causeway/framework/store"
	"github.com/causeway-stream/causeway/framework/task"
	"github.com/causeway-stream/causeway/internal/taskmgr"
)

// changelogReader restores tasks from the application's changelog with a
// consumer of its own, outside the group.
type changelogReader struct {
	topic   string
	config  kafka.ConfigMap
	log     *zap.Logger
	metrics *Metrics
	now     func() time.Time
	// stop ends a restore early when the worker stops.
	stop <-chan struct{}
}

// read reads the changelog partitions of the given tasks to their end
// (under read_committed) and returns each task's last checkpoint and store
// changes. It logs progress on long restores.
func (c *changelogReader) read(rts []*taskmgr.Task) (map[string]*taskmgr.Restored, error) {
	out := map[string]*taskmgr.Restored{}
	if len(rts) == 0 {
		return out, nil
	}
	want := map[string]bool{}
	parts := map[int32]bool{}
	for _, rt := range rts {
		want[rt.ID] = true
		parts[rt.Partition] = true
	}
	rc, err := kafka.NewConsumer(&c.config)
	if err != nil {
		return nil, fmt.Errorf("restore consumer: %w", err)
	}
	defer func() {
		if err := rc.Close(); err != nil {
			c.log.Warn("close restore consumer", zap.Error(err))
		}
	}()
	cl := c.topic
	var tps []kafka.TopicPartition
	total := int64(0)
	pending := map[int32]bool{}
	for p := range parts {
		low, high, err := rc.QueryWatermarkOffsets(cl, p, 10000)
		if err != nil {
			return nil, fmt.Errorf("changelog watermarks of %s: %w", partitionString(cl, p), err)
		}
		if high <= low {
			continue
		}
		total += high - low
		pending[p] = true
		tps = append(tps, kafka.TopicPartition{Topic: &cl, Partition: p, Offset: kafka.OffsetBeginning})
	}
	if len(tps) == 0 {
		return out, nil
	}
	if err := rc.Assign(tps); err != nil {
		return nil, fmt.Errorf("assign changelog: %w", err)
	}
	started, lastLog := c.now(), c.now()
	read := int64(0)
	for len(pending) > 0 {
		select {
		case <-c.stop:
			return nil, ErrStopped
		default:
		}
		switch e := rc.Poll(100).(type) {
		case *kafka.Message:
			if e.TopicPartition.Error != nil {
				return nil, fmt.Errorf("read changelog: %w", e.TopicPartition.Error)
			}
			read++
			if err := c.apply(out, want, e); err != nil {
				return nil, err
			}
		case kafka.PartitionEOF:
			delete(pending, e.Partition)
		case kafka.Error:
			if e.IsFatal() {
				return nil, fmt.Errorf("read changelog: %w", e)
			}
		}
		if c.now().Sub(lastLog) > 2*time.Second {
			lastLog = c.now()
			c.log.Info("restoring from changelog", zap.Int64("read", read), zap.Int64("of", total), zap.Duration("elapsed", c.now().Sub(started)))
		}
		for _, rt := range rts {
			c.metrics.RestoreProgress.WithLabelValues(rt.ID).Set(float64(read) / float64(total))
		}
	}
	for _, rt := range rts {
		c.metrics.RestoreProgress.WithLabelValues(rt.ID).Set(1)
	}
	if read > 0 {
		c.log.Info("restored from changelog", zap.Int64("records", read), zap.Duration("took", c.now().Sub(started)))
	}
	return out, nil
}

// apply adds one changelog record to what out holds for its task, if that
// task is wanted.
func (c *changelogReader) apply(out map[string]*taskmgr.Restored, want map[string]bool, e *kafka.Message) error {
	k, err := parseChangelogKey(e.Key)
	if err != nil {
		return fmt.Errorf("changelog %s@%d: %w", partitionString(c.topic, e.TopicPartition.Partition), e.TopicPartition.Offset, err)
	}
	id := task.ID(k.processor, k.partition)
	if !want[id] {
		return nil
	}
	r := out[id]
	if r == nil {
		r = &taskmgr.Restored{Stores: map[string][]store.Change{}}
		out[id] = r
	}
	switch k.kind {
	case kindCheckpoint:
		cp, err := decodeTaskCheckpoint(e.Value)
		if err != nil {
			return fmt.Errorf("checkpoint of %s: %w", id, err)
		}
		r.Checkpointed, r.Next, r.Gate, r.StreamTime = true, cp.next, cp.gate, cp.stream
	case kindStore:
		r.Stores[k.store] = append(r.Stores[k.store], store.Change{Key: k.key, Value: e.Value})
	}
	c.metrics.RestoreRecords.WithLabelValues(id).Inc()
	return nil
}
