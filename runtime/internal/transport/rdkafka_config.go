//go:build cgo

package transport

import (
	"maps"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// The worker's librdkafka settings. Each can be overridden with --kafka,
// except those Validate refuses (the ones exactly-once depends on).
//
// Consumer: partitions are fetched with little waiting (fetch.wait.max.ms)
// so the gate sees causes soon, and the local queue is deep enough that a
// commit pause does not starve the fetcher. The range assignor gives every
// member the same partition indices of co-partitioned topics (eager
// rebalancing); cooperative rebalancing uses librdkafka's cooperative-sticky
// assignor on one topic of each co-partitioned group (see rdkConsumer).
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

// consumerOnly and producerOnly are librdkafka's settings that only its
// consumers or only its producers read (CONFIGURATION.md, "C" and "P"). A
// --kafka setting of one kind is not handed to the other client, which
// would warn that it ignores it.
var (
	consumerOnly = setOf("group.id", "group.instance.id", "group.protocol", "group.protocol.type", "group.remote.assignor",
		"partition.assignment.strategy", "session.timeout.ms", "heartbeat.interval.ms", "coordinator.query.interval.ms",
		"max.poll.interval.ms", "enable.auto.commit", "auto.commit.interval.ms", "enable.auto.offset.store",
		"queued.min.messages", "queued.max.messages.kbytes", "fetch.wait.max.ms", "fetch.queue.backoff.ms",
		"fetch.message.max.bytes", "max.partition.fetch.bytes", "fetch.max.bytes", "fetch.min.bytes", "fetch.error.backoff.ms",
		"isolation.level", "enable.partition.eof", "check.crcs", "auto.offset.reset", "consume.callback.max.messages")
	producerOnly = setOf("transactional.id", "transaction.timeout.ms", "enable.idempotence", "enable.gapless.guarantee",
		"queue.buffering.max.messages", "queue.buffering.max.kbytes", "queue.buffering.max.ms", "linger.ms",
		"message.send.max.retries", "retries", "queue.buffering.backpressure.threshold", "compression.codec",
		"compression.type", "compression.level", "batch.num.messages", "batch.size", "delivery.report.only.error",
		"sticky.partitioning.linger.ms", "request.required.acks", "acks", "request.timeout.ms", "message.timeout.ms",
		"delivery.timeout.ms", "partitioner")
)

func setOf(keys ...string) map[string]bool {
	m := make(map[string]bool, len(keys))
	for _, k := range keys {
		m[k] = true
	}
	return m
}

// clientConfig is the configuration of one of the worker's clients: its
// defaults, then the --kafka settings that apply to its kind of client.
func (s Settings) clientConfig(defaults kafka.ConfigMap, role clientRole) kafka.ConfigMap {
	cm := kafka.ConfigMap{"bootstrap.servers": s.Bootstrap, "client.id": s.ApplicationID + "-" + s.InstanceID}
	maps.Copy(cm, defaults)
	for k, v := range s.Kafka {
		if (role == consumerRole && producerOnly[k]) || (role == producerRole && consumerOnly[k]) {
			continue
		}
		cm[k] = v
	}
	return cm
}

func (s Settings) consumerConfig() kafka.ConfigMap {
	cm := s.clientConfig(consumerDefaults, consumerRole)
	cm["group.id"] = s.ApplicationID
	if s.Rebalance == RebalanceCooperative {
		cm["partition.assignment.strategy"] = "cooperative-sticky"
	}
	if s.StaticMembership {
		cm["group.instance.id"] = s.ApplicationID + "-" + s.InstanceID
	}
	cm["isolation.level"] = "read_committed"
	cm["enable.auto.commit"] = false
	cm["enable.partition.eof"] = true
	// Every assigned partition starts at an explicit offset; a fetch that
	// falls out of range is an error on that partition unless the
	// application opted into resets.
	cm["auto.offset.reset"] = "error"
	if s.AllowOffsetReset {
		cm["auto.offset.reset"] = s.AutoOffsetReset
	}
	return cm
}

func (s Settings) producerConfig() kafka.ConfigMap {
	cm := s.clientConfig(producerDefaults, producerRole)
	cm["transactional.id"] = s.ApplicationID + "-" + s.InstanceID
	return cm
}

// restoreConsumerConfig reads changelog partitions by assignment, outside the
// group.
func (s Settings) restoreConsumerConfig() kafka.ConfigMap {
	cm := s.clientConfig(consumerDefaults, consumerRole)
	delete(cm, "partition.assignment.strategy")
	cm["group.id"] = s.ApplicationID + "-restore"
	cm["isolation.level"] = "read_committed"
	cm["enable.auto.commit"] = false
	cm["enable.partition.eof"] = true
	cm["auto.offset.reset"] = "earliest"
	return cm
}
