//go:build cgo

package transport

import (
	"context"
	"fmt"

	"github.com/causeway-stream/causeway/causal"
	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"go.uber.org/zap"
)

// rdkAdmin is the admin client on librdkafka.
type rdkAdmin struct {
	admin *kafka.AdminClient
	group string
}

func (a *rdkAdmin) PartitionCounts(ctx context.Context) (map[string]int32, error) {
	md, err := a.admin.GetMetadata(nil, true, timeoutMs(ctx))
	if err != nil {
		return nil, rdkError(err)
	}
	counts := map[string]int32{}
	for name, t := range md.Topics {
		if t.Error.Code() == kafka.ErrNoError {
			counts[name] = int32(len(t.Partitions))
		}
	}
	return counts, nil
}

func (a *rdkAdmin) ClusterID(ctx context.Context) (string, error) {
	id, err := a.admin.ClusterID(ctx)
	if err != nil {
		return "", rdkError(err)
	}
	return id, nil
}

func (a *rdkAdmin) CreateTopics(ctx context.Context, specs []TopicSpec) error {
	create := make([]kafka.TopicSpecification, len(specs))
	for i, s := range specs {
		create[i] = kafka.TopicSpecification{Topic: s.Name, NumPartitions: int(s.Partitions), ReplicationFactor: -1, Config: s.Configs}
	}
	res, err := a.admin.CreateTopics(ctx, create)
	if err != nil {
		return rdkError(err)
	}
	for _, r := range res {
		if c := r.Error.Code(); c != kafka.ErrNoError && c != kafka.ErrTopicAlreadyExists {
			return fmt.Errorf("create topic %q: %w", r.Topic, rdkError(r.Error))
		}
	}
	return nil
}

func (a *rdkAdmin) GroupCommitted(ctx context.Context, chs []causal.Channel) (map[causal.Channel]int64, error) {
	res, err := a.admin.ListConsumerGroupOffsets(ctx, []kafka.ConsumerGroupTopicPartitions{{Group: a.group, Partitions: rdkPartitions(chs)}})
	if code := errorCode(err); code == kafka.ErrGroupIDNotFound {
		return map[causal.Channel]int64{}, nil // nothing committed yet
	}
	if err != nil {
		return nil, fmt.Errorf("committed offsets of group %s: %w", a.group, rdkError(err))
	}
	out := make(map[causal.Channel]int64, len(chs))
	for _, g := range res.ConsumerGroupsTopicPartitions {
		for _, tp := range g.Partitions {
			if tp.Error != nil {
				return nil, fmt.Errorf("committed offset of %s/%d in group %s: %w", *tp.Topic, tp.Partition, a.group, rdkError(tp.Error))
			}
			if tp.Offset >= 0 {
				out[causal.Channel{Topic: *tp.Topic, Partition: tp.Partition}] = int64(tp.Offset)
			}
		}
	}
	return out, nil
}

func (a *rdkAdmin) Ends(ctx context.Context, chs []causal.Channel) (map[causal.Channel]int64, error) {
	out, err := rdkListOffsets(ctx, a.admin, chs, kafka.LatestOffsetSpec)
	if err != nil {
		return nil, fmt.Errorf("end offsets: %w", err)
	}
	return out, nil
}

// rdkListOffsets asks the broker, read-uncommitted, for the offsets spec
// names of chs: with kafka.LatestOffsetSpec, the high watermark, which
// counts the records of transactions still open. (A consumer's
// QueryWatermarkOffsets asks at its own isolation level; under
// read_committed that is the last stable offset, which stops at the first
// open transaction.)
func rdkListOffsets(ctx context.Context, admin *kafka.AdminClient, chs []causal.Channel, spec kafka.OffsetSpec) (map[causal.Channel]int64, error) {
	ask := make(map[kafka.TopicPartition]kafka.OffsetSpec, len(chs))
	for _, tp := range rdkPartitions(chs) {
		ask[tp] = spec
	}
	res, err := admin.ListOffsets(ctx, ask, kafka.SetAdminIsolationLevel(kafka.IsolationLevelReadUncommitted))
	if err != nil {
		return nil, rdkError(err)
	}
	out := make(map[causal.Channel]int64, len(chs))
	for tp, info := range res.ResultInfos {
		if info.Error.Code() != kafka.ErrNoError {
			return nil, fmt.Errorf("offset of %s/%d: %w", *tp.Topic, tp.Partition, rdkError(info.Error))
		}
		out[causal.Channel{Topic: *tp.Topic, Partition: tp.Partition}] = int64(info.Offset)
	}
	return out, nil
}

func (a *rdkAdmin) Close() { a.admin.Close() }

// kafkaChangelog reads changelog partitions with a librdkafka consumer of
// its own, outside the group, under read_committed.
type kafkaChangelog struct {
	Watermarks
	config kafka.ConfigMap
	log    *zap.Logger
}

func (k *kafkaChangelog) Read(stop <-chan struct{}, from map[causal.Channel]int64, apply func(ch causal.Channel, key, value []byte) error,
	done func(ch causal.Channel, end int64) error) error {
	ends := map[causal.Channel]int64{}
	pending := map[causal.Channel]bool{}
	var tps []kafka.TopicPartition
	for ch, off := range from {
		_, high, err := k.Bounds(ch)
		if err != nil {
			return fmt.Errorf("bounds of %s: %w", ch, err)
		}
		if off >= high {
			if err := done(ch, off); err != nil {
				return err
			}
			continue
		}
		ends[ch] = off
		topic := ch.Topic
		tps = append(tps, kafka.TopicPartition{Topic: &topic, Partition: ch.Partition, Offset: kafka.Offset(off)})
		pending[ch] = true
	}
	if len(tps) == 0 {
		return nil
	}
	rc, err := kafka.NewConsumer(&k.config)
	if err != nil {
		return fmt.Errorf("restore consumer: %w", err)
	}
	defer func() {
		if err := rc.Close(); err != nil {
			k.log.Warn("close restore consumer", zap.Error(err))
		}
	}()
	if err := rc.Assign(tps); err != nil {
		return fmt.Errorf("assign changelog partitions: %w", rdkError(err))
	}
	for len(pending) > 0 {
		select {
		case <-stop:
			return ErrStopped
		default:
		}
		switch e := rc.Poll(100).(type) {
		case *kafka.Message:
			tp := e.TopicPartition
			if tp.Error != nil {
				return fmt.Errorf("read changelog %s: %w", PartitionString(*tp.Topic, tp.Partition), rdkError(tp.Error))
			}
			ch := causal.Channel{Topic: *tp.Topic, Partition: tp.Partition}
			if err := apply(ch, e.Key, e.Value); err != nil {
				return err
			}
			ends[ch] = int64(tp.Offset) + 1
		case kafka.PartitionEOF:
			if e.Topic == nil {
				continue
			}
			ch := causal.Channel{Topic: *e.Topic, Partition: e.Partition}
			if !pending[ch] {
				continue
			}
			delete(pending, ch)
			if err := done(ch, max(ends[ch], int64(e.Offset))); err != nil {
				return err
			}
		case kafka.Error:
			if e.IsFatal() {
				return fmt.Errorf("read changelog: %w", rdkError(e))
			}
		}
	}
	return nil
}
