package runtime

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/causeway-stream/causeway/framework"
)

// The worker's librdkafka settings. Each can be overridden with --kafka,
// except those Validate refuses (the ones exactly-once depends on).
//
// Consumer: partitions are fetched with little waiting (fetch.wait.max.ms)
// so the gate sees causes soon, and the local queue is deep enough that a
// commit pause does not starve the fetcher. The range assignor gives every
// member the same partition indices of co-partitioned topics.
//
// Producer: a short linger batches the records of one commit interval
// without adding noticeably to latency; the transaction timeout is short
// enough that a producer dying inside a transaction blocks read_committed
// readers for seconds, not a minute.
var (
	consumerDefaults = kafka.ConfigMap{
		"partition.assignment.strategy": "range",
		"session.timeout.ms":            10000,
		"heartbeat.interval.ms":         1000,
		"fetch.wait.max.ms":             10,
		"fetch.min.bytes":               1,
		"queued.min.messages":           100000,
		"queued.max.messages.kbytes":    262144,
		"max.partition.fetch.bytes":     4 << 20,
		"fetch.max.bytes":               64 << 20,
		"enable.auto.offset.store":      false,
		"log.connection.close":          false,
		"enable.metrics.push":           false,
	}
	producerDefaults = kafka.ConfigMap{
		"linger.ms":                    5,
		"batch.size":                   1 << 20,
		"queue.buffering.max.messages": 1000000,
		"queue.buffering.max.kbytes":   1 << 20,
		"transaction.timeout.ms":       10000,
		"message.timeout.ms":           10000,
		"log.connection.close":         false,
		"enable.metrics.push":          false,
	}
)

func (w *Worker) clientConfig(defaults kafka.ConfigMap) kafka.ConfigMap {
	cm := kafka.ConfigMap{"bootstrap.servers": w.bootstrap, "client.id": w.cfg.ApplicationID + "-" + w.instanceID}
	maps.Copy(cm, defaults)
	for k, v := range w.cfg.Kafka {
		cm[k] = v
	}
	return cm
}

func (w *Worker) consumerConfig() kafka.ConfigMap {
	cm := w.clientConfig(consumerDefaults)
	cm["group.id"] = w.cfg.ApplicationID
	if w.cfg.StaticMembership {
		cm["group.instance.id"] = w.cfg.ApplicationID + "-" + w.instanceID
	}
	cm["isolation.level"] = "read_committed"
	cm["enable.auto.commit"] = false
	cm["enable.partition.eof"] = true
	// Every assigned partition starts at an explicit offset; a fetch that
	// falls out of range is an error on that partition unless the
	// application opted into resets.
	cm["auto.offset.reset"] = "error"
	if w.cfg.AllowOffsetReset {
		cm["auto.offset.reset"] = w.cfg.AutoOffsetReset
	}
	return cm
}

func (w *Worker) producerConfig() kafka.ConfigMap {
	cm := w.clientConfig(producerDefaults)
	cm["transactional.id"] = w.cfg.ApplicationID + "-" + w.instanceID
	return cm
}

// restoreConsumerConfig reads changelog partitions by assignment, outside the
// group.
func (w *Worker) restoreConsumerConfig() kafka.ConfigMap {
	cm := w.clientConfig(consumerDefaults)
	delete(cm, "partition.assignment.strategy")
	cm["group.id"] = w.cfg.ApplicationID + "-restore"
	cm["isolation.level"] = "read_committed"
	cm["enable.auto.commit"] = false
	cm["enable.partition.eof"] = true
	cm["auto.offset.reset"] = "earliest"
	return cm
}

// ensureTopics reads the partition counts of every topic the topology uses,
// creating what is missing and allowed, and checks co-partitioning.
func (w *Worker) ensureTopics(ctx context.Context, admin *kafka.AdminClient) (map[string]int32, error) {
	md, err := admin.GetMetadata(nil, true, 10000)
	if err != nil {
		return nil, fmt.Errorf("read cluster metadata: %w", err)
	}
	counts := map[string]int32{}
	for name, t := range md.Topics {
		if t.Error.Code() == kafka.ErrNoError {
			counts[name] = int32(len(t.Partitions))
		}
	}
	var create []kafka.TopicSpecification
	want := func(name string, partitions int32, configs map[string]string) {
		if _, ok := counts[name]; ok {
			return
		}
		create = append(create, kafka.TopicSpecification{Topic: name, NumPartitions: int(partitions), ReplicationFactor: -1, Config: configs})
		counts[name] = partitions
	}
	topics := w.topo.Topics()
	if policy, dlq := w.topo.BadInput(); policy == framework.DeadLetter {
		topics = append(topics, framework.TopicInfo{Name: dlq})
	}
	var missing []string
	for _, ti := range topics {
		switch {
		case ti.Internal:
			n := ti.Partitions
			if n == 0 {
				n = int32(w.cfg.DefaultPartitions)
			}
			want(ti.Name, n, nil)
		case w.cfg.CreateTopics:
			n := ti.Partitions
			if n == 0 {
				n = int32(w.cfg.DefaultPartitions)
			}
			want(ti.Name, n, nil)
		default:
			if _, ok := counts[ti.Name]; !ok {
				missing = append(missing, ti.Name)
			}
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("topics %v do not exist: create them, or run with --create-topics", missing)
	}
	tasks := int32(0)
	for _, p := range w.topo.Processors() {
		tasks = max(tasks, counts[p.Inputs[0]])
	}
	cl := changelogTopic(w.cfg.ApplicationID)
	want(cl, tasks, map[string]string{"cleanup.policy": "compact"})
	if counts[cl] < tasks {
		return nil, fmt.Errorf("changelog topic %q has %d partitions, the topology needs %d", cl, counts[cl], tasks)
	}
	if len(create) > 0 {
		res, err := admin.CreateTopics(ctx, create)
		if err != nil {
			return nil, fmt.Errorf("create topics: %w", err)
		}
		for _, r := range res {
			if c := r.Error.Code(); c != kafka.ErrNoError && c != kafka.ErrTopicAlreadyExists {
				return nil, fmt.Errorf("create topic %q: %w", r.Topic, r.Error)
			}
			w.log.Info("created topic", fieldTopic(r.Topic), fieldPartitions(counts[r.Topic]))
		}
		if err := waitForTopics(ctx, admin, create); err != nil {
			return nil, err
		}
	}
	if err := w.topo.CheckPartitions(counts); err != nil {
		return nil, err
	}
	return counts, nil
}

func waitForTopics(ctx context.Context, admin *kafka.AdminClient, specs []kafka.TopicSpecification) error {
	for {
		md, err := admin.GetMetadata(nil, true, 5000)
		if err == nil {
			ready := true
			for _, s := range specs {
				t, ok := md.Topics[s.Topic]
				if !ok || t.Error.Code() != kafka.ErrNoError || len(t.Partitions) < s.NumPartitions {
					ready = false
				}
			}
			if ready {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for created topics: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// kafkaErr classifies a librdkafka error for the log and for what to do.
func kafkaErr(err error) (fatal, retriable, abortable bool) {
	var ke kafka.Error
	if !errors.As(err, &ke) {
		return false, false, false
	}
	return ke.IsFatal(), ke.IsRetriable(), ke.TxnRequiresAbort()
}

// errorCode is the librdkafka error code err carries, possibly wrapped, or
// ErrNoError if it carries none (nil included). Its kafka.Error escapes to
// the heap, so hot paths call it only once they have an error: the produce
// path cannot afford an allocation per record.
func errorCode(err error) kafka.ErrorCode {
	var ke kafka.Error
	if !errors.As(err, &ke) {
		return kafka.ErrNoError
	}
	return ke.Code()
}

func partitionString(topic string, p int32) string {
	return topic + "/" + strconv.FormatInt(int64(p), 10)
}
