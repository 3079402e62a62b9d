package runtime

import (
	"fmt"
	"slices"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"go.uber.org/zap"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/internal/taskmgr"
)

// rebalance is librdkafka's rebalance callback; it runs inside Poll, on
// the pump goroutine.
func (w *Worker) rebalance(c *kafka.Consumer, ev kafka.Event) error {
	return w.onRebalance(ev)
}

func (w *Worker) onRebalance(ev kafka.Event) error {
	w.handlePolled()
	switch e := ev.(type) {
	case kafka.AssignedPartitions:
		w.log.Info("partitions assigned", zap.Int("partitions", len(e.Partitions)))
		if err := w.assign(e.Partitions); err != nil {
			w.fatalErr = err
			return err
		}
	case kafka.RevokedPartitions:
		w.cancelRestores()
		lost := w.consumer.AssignmentLost()
		w.log.Info("partitions revoked", zap.Int("partitions", len(e.Partitions)), zap.Bool("lost", lost))
		if !lost && !w.mustAbort {
			if err := w.commit(); err != nil {
				w.log.Warn("commit on revocation failed; the next owner redoes the work", zap.Error(err))
				w.abort()
			} else {
				w.answerQueries() // those this last commit caught up
			}
		} else {
			w.abort()
		}
		if !lost {
			w.savePositions()
		}
		w.closeTasks()
		// The queries still waiting learn at once that their task moved
		// (ErrNotLocal: retryable, and forwarded over HTTP).
		w.answerQueries()
		w.pump.last = nil
		w.pump.assigned = nil
		if err := w.consumer.Unassign(); err != nil {
			w.log.Warn("unassign", zap.Error(err))
		}
	}
	return nil
}

// assign builds the tasks of the assigned partitions from committed state
// and starts fetching where they resume. Tasks whose stores must be read
// back first restore off the pump; their partitions that no running task
// reads stay paused until they are built.
func (w *Worker) assign(parts []kafka.TopicPartition) error {
	created := w.tasks.Create(channelsOf(parts))
	w.publishStatus()
	cold, err := w.tasks.Prepare(created)
	if err != nil {
		return err
	}
	w.pump.last = nil
	start := w.tasks.Starts(w.tasks.Tasks())
	w.tasks.Started(start)
	assigned := make([]kafka.TopicPartition, 0, len(parts))
	for _, tp := range parts {
		ch := causal.Channel{Topic: *tp.Topic, Partition: tp.Partition}
		off, ok := start[ch]
		if !ok {
			w.log.Warn("partition assigned without a complete task; inputs may not be co-partitioned", zap.Stringer("channel", ch))
			continue
		}
		topic := ch.Topic
		assigned = append(assigned, kafka.TopicPartition{Topic: &topic, Partition: ch.Partition, Offset: kafka.Offset(off)})
	}
	w.pump.assigned = assigned
	// librdkafka keeps a partition's pause across Assign. Partitions that
	// only restoring tasks read are paused before it, so that not one
	// fetch of them competes with the restore; what else this worker had
	// paused is resumed, and backpressure decides again.
	idle := map[causal.Channel]bool{}
	for ch, r := range w.tasks.Routes() {
		idle[ch] = !slices.ContainsFunc(r.Tasks, func(t *taskmgr.Task) bool { return t.State == StateRunning })
	}
	var pause, resume []kafka.TopicPartition
	for _, tp := range assigned {
		ch := causal.Channel{Topic: *tp.Topic, Partition: tp.Partition}
		if idle[ch] {
			pause = append(pause, kafka.TopicPartition{Topic: tp.Topic, Partition: tp.Partition})
		}
	}
	for ch := range w.pump.paused {
		if !idle[ch] {
			topic := ch.Topic
			resume = append(resume, kafka.TopicPartition{Topic: &topic, Partition: ch.Partition})
		}
	}
	if len(pause) > 0 {
		// Before Assign a partition may not be known yet: paused again
		// below.
		_ = w.consumer.Pause(pause)
	}
	if err := w.consumer.Assign(assigned); err != nil {
		return fmt.Errorf("assign: %w", err)
	}
	if len(resume) > 0 {
		if err := w.consumer.Resume(resume); err != nil {
			w.log.Warn("resume after assign", zap.Error(err))
		}
	}
	w.pump.paused = map[causal.Channel]bool{}
	w.backpressure() // pause what only restoring or failed tasks read
	w.restoreLater(cold)
	w.publishStatus()
	return nil
}
