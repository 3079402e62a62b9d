package runtime

import "github.com/confluentinc/confluent-kafka-go/v2/kafka"

// StoreChangelogTopic exposes the name of a store's changelog topic to the
// external tests.
var StoreChangelogTopic = storeChangelogTopic

// ErrorCode exposes the librdkafka error code classifier to the external
// tests.
var ErrorCode = errorCode

// WrapPoll makes w, before it starts, poll its consumer through wrap. wrap
// gets the consumer's Poll and revoke, which runs the rebalance callback for
// a revocation of the whole assignment, as librdkafka does inside Poll.
func WrapPoll(w *Worker, wrap func(poll func(timeoutMs int) kafka.Event, revoke func()) func(timeoutMs int) kafka.Event) {
	w.wrapPoll = func(poll func(int) kafka.Event) func(int) kafka.Event {
		return wrap(poll, func() {
			_ = w.onRebalance(kafka.RevokedPartitions{Partitions: w.pump.assigned})
		})
	}
}

// RunWith exposes Run with its arguments, environment and outputs given.
var RunWith = run
