package runtime_test

import (
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/runtime"
)

// With the real client: an output over librdkafka's message.max.bytes
// fails the task that emitted it, naming its input record, and only that
// task; the other partition's task goes on committing.
func TestMessageTooLargeFailsOnlyTheEmittingTask(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	createTopics(t, b.Addr(), 2, "in", "out")
	topo, err := framework.NewBuilder("echo").Processor("echo", func() framework.Processor {
		return framework.ProcessorFunc(func(ctx framework.Context, rec framework.Record) error {
			v := rec.Value
			if string(v) == "big" {
				v = []byte(strings.Repeat("x", 200_000))
			}
			return ctx.Forward(framework.Record{Key: rec.Key, Value: v})
		})
	}, framework.From("in"), framework.To("out", framework.KeepPartition())).Build()
	require.NoError(t, err)
	p, err := kafka.NewProducer(&kafka.ConfigMap{"bootstrap.servers": b.Addr(), "enable.metrics.push": false, "go.delivery.reports": false})
	require.NoError(t, err)
	defer p.Close()
	send := func(partition int32, values ...string) {
		topic := "in"
		for _, v := range values {
			require.NoError(t, p.Produce(&kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: partition}, Value: []byte(v)}, nil))
		}
		require.Zero(t, p.Flush(10_000))
	}
	send(0, "a", "big", "b")
	send(1, "c", "d")

	cfg := testConfig(t, b.Addr(), "echo-large")
	cfg.Kafka["message.max.bytes"] = "100000"
	w := startTopology(t, cfg, topo, nil)
	var failed runtime.TaskStatus
	require.Eventually(t, func() bool {
		for _, ts := range w.Status().Tasks {
			if ts.ID == "echo/0" {
				failed = ts
			}
		}
		return failed.State == runtime.StateFailed
	}, 30*time.Second, 50*time.Millisecond, "status: %+v", w.Status())
	assert.Contains(t, failed.LastError, "output to out emitted for input in/0@1 was refused")
	assert.Contains(t, failed.LastError, "too large")

	send(1, "e")
	var got []string
	for _, m := range readCommitted(t, b.Addr(), "out", 3, 30*time.Second) {
		if m.TopicPartition.Partition == 1 {
			got = append(got, string(m.Value))
		}
	}
	assert.Equal(t, []string{"c", "d", "e"}, got, "the other task keeps committing")
	assert.LessOrEqual(t, committedOffset(t, b.Addr(), "echo-large", "in", 0), int64(1), "nothing past the refused record's input is committed")
	for _, ts := range w.Status().Tasks {
		if ts.ID == "echo/1" {
			assert.Equal(t, runtime.StateRunning, ts.State)
		}
	}
}
