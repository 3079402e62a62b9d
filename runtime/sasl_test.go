package runtime_test

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

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
				workerOnASASLCluster(t, client, mechanism)
			})
		}
	})
}

func workerOnASASLCluster(t *testing.T, client, mechanism string) {
	b := startBroker(t, embedded.KfakeOpts(kfake.EnableSASL(), kfake.Superuser(mechanism, "causeway", "s3cret")))
	settings := map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
		"sasl.username": "causeway", "sasl.password": "s3cret"}
	var auth sasl.Mechanism = plain.Auth{User: "causeway", Pass: "s3cret"}.AsMechanism()
	if mechanism == "SCRAM-SHA-512" {
		auth = scram.Auth{User: "causeway", Pass: "s3cret"}.AsSha512Mechanism()
	}
	runShopOnASecuredCluster(t, client, b.Addr(), settings, kgo.SASL(auth))
}

// runShopOnASecuredCluster runs the global-table shop on the cluster at
// addr with the worker's --kafka settings, the test's own clients
// connecting with secure, and checks its verdicts.
func runShopOnASecuredCluster(t *testing.T, client, addr string, settings map[string]string, secure ...kgo.Opt) {
	connect := append([]kgo.Opt{kgo.SeedBrokers(addr)}, secure...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(connect...)
	require.NoError(t, err)
	defer cl.Close()
	res, err := kadm.NewClient(cl).CreateTopics(ctx, 1, -1, nil, "orders", "payments", "verdicts")
	require.NoError(t, err)
	require.NoError(t, res.Error())
	produce := func(topic, key, value string) {
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte(key), Value: []byte(value)}).FirstErr())
	}
	for i := range 3 {
		produce("orders", fmt.Sprint("o", i), fmt.Sprint("order o", i))
	}

	cfg := testConfigFor(t, client, addr, "secured-shop")
	cfg.Kafka = maps.Clone(settings)
	startTopology(t, cfg, globalShop(t), nil)
	for i := range 3 {
		produce("payments", fmt.Sprint("pay", i), fmt.Sprint("o", i))
	}

	c, err := kgo.NewClient(append(connect, kgo.ConsumeTopics("verdicts"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	require.NoError(t, err)
	defer c.Close()
	var verdicts []string
	for len(verdicts) < 3 {
		require.NoError(t, ctx.Err(), "verdicts so far: %v", verdicts)
		poll, cancelPoll := context.WithTimeout(ctx, 100*time.Millisecond)
		for _, r := range c.PollFetches(poll).Records() {
			verdicts = append(verdicts, string(r.Value))
		}
		cancelPoll()
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
		cfg.ConnectTimeout = 3 * time.Second // the start's own bound, well inside the test's
		cfg.Kafka = map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
			"sasl.username": "causeway", "sasl.password": "wrong"}
		w, err := runtime.NewStreamThread(cfg, globalShop(t), nil, nil)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		// The embedded broker hangs up on wrong credentials instead of
		// answering SASL_AUTHENTICATION_FAILED, so the clients see a
		// connection closed, which is retried until the start gives up.
		err = w.Start(ctx)
		assert.ErrorIs(t, err, runtime.ErrKafkaUnreachable)
		assert.ErrorContains(t, err, b.Addr())
	})
}
