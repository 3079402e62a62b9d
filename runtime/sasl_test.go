package runtime_test

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/causeway-stream/causeway/runtime"
	"github.com/causeway-stream/causeway/runtime/embedded"
)

// A cluster that takes only SASL clients (PLAIN, and SCRAM): the worker's
// librdkafka clients get the credentials through --kafka, and so do its
// franz-go readers (here the global table's, which the join needs, and the
// restores'), which before refused such settings.
func TestWorkerOnASASLCluster(t *testing.T) {
	t.Parallel()
	eachClient(t, func(t *testing.T, client string) {
		for _, mechanism := range []string{"PLAIN", "SCRAM-SHA-512"} {
			t.Run(mechanism, func(t *testing.T) {
				t.Parallel()
				workerOnASASLCluster(t, mechanism)
			})
		}
	})
}

func workerOnASASLCluster(t *testing.T, mechanism string) {
	b := startBroker(t, embedded.KfakeOpts(kfake.EnableSASL(), kfake.Superuser(mechanism, "causeway", "s3cret")))
	sasl := map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
		"sasl.username": "causeway", "sasl.password": "s3cret"}
	client := func(extra kafka.ConfigMap) *kafka.ConfigMap {
		cm := kafka.ConfigMap{"bootstrap.servers": b.Addr(), "enable.metrics.push": false}
		for k, v := range sasl {
			cm[k] = v
		}
		maps.Copy(cm, extra)
		return &cm
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, err := kafka.NewAdminClient(client(nil))
	require.NoError(t, err)
	var specs []kafka.TopicSpecification
	for _, topic := range []string{"orders", "payments", "verdicts"} {
		specs = append(specs, kafka.TopicSpecification{Topic: topic, NumPartitions: 1, ReplicationFactor: -1})
	}
	res, err := admin.CreateTopics(ctx, specs)
	admin.Close()
	require.NoError(t, err)
	for _, r := range res {
		require.Equal(t, kafka.ErrNoError, r.Error.Code(), "%v", r.Error)
	}
	p, err := kafka.NewProducer(client(nil))
	require.NoError(t, err)
	defer p.Close()
	produce := func(topic, key, value string) {
		dr := make(chan kafka.Event, 1)
		require.NoError(t, p.Produce(&kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: kafka.PartitionAny},
			Key: []byte(key), Value: []byte(value)}, dr))
		m := (<-dr).(*kafka.Message)
		require.NoError(t, m.TopicPartition.Error)
	}
	for i := range 3 {
		produce("orders", fmt.Sprint("o", i), fmt.Sprint("order o", i))
	}

	cfg := testConfig(t, b.Addr(), "sasl-shop")
	cfg.Kafka = maps.Clone(sasl)
	startTopology(t, cfg, globalShop(t), nil)
	for i := range 3 {
		produce("payments", fmt.Sprint("pay", i), fmt.Sprint("o", i))
	}

	c, err := kafka.NewConsumer(client(kafka.ConfigMap{"group.id": "sasl-reader", "isolation.level": "read_committed", "auto.offset.reset": "earliest"}))
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SubscribeTopics([]string{"verdicts"}, nil))
	var verdicts []string
	for len(verdicts) < 3 {
		require.NoError(t, ctx.Err(), "verdicts so far: %v", verdicts)
		if m, ok := c.Poll(100).(*kafka.Message); ok && m.TopicPartition.Error == nil {
			verdicts = append(verdicts, string(m.Value))
		}
	}
	assert.ElementsMatch(t, []string{"paid: order o0", "paid: order o1", "paid: order o2"}, verdicts)
}

// Wrong credentials are refused, by the librdkafka clients and the
// franz-go readers alike: the worker does not start.
func TestWorkerWithWrongSASLCredentialsDoesNotStart(t *testing.T) {
	t.Parallel()
	eachClient(t, func(t *testing.T, client string) {
		b := startBroker(t, embedded.KfakeOpts(kfake.EnableSASL(), kfake.Superuser("PLAIN", "causeway", "s3cret")))
		cfg := testConfigFor(t, client, b.Addr(), "sasl-wrong")
		cfg.CreateTopics = true
		cfg.Kafka = map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
			"sasl.username": "causeway", "sasl.password": "wrong"}
		w, err := runtime.NewWorker(cfg, globalShop(t), nil, nil)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		assert.Error(t, w.Start(ctx))
	})
}
