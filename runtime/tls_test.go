package runtime_test

import (
	"context"
	"crypto/tls"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/causeway-stream/causeway/internal/testca"
	"github.com/causeway-stream/causeway/runtime"
	"github.com/causeway-stream/causeway/runtime/embedded"
)

// newTestCA is a certificate authority made for one test.
func newTestCA(t *testing.T) testca.CA {
	t.Helper()
	ca, err := testca.New(t.TempDir())
	require.NoError(t, err)
	return ca
}

// A cluster that speaks only TLS: the worker verifies the broker with the
// authority given in ssl.ca.location, on either client.
func TestWorkerOnATLSCluster(t *testing.T) {
	t.Parallel()
	eachClient(t, func(t *testing.T, client string) {
		ca := newTestCA(t)
		b := startBroker(t, embedded.KfakeOpts(kfake.TLS(ca.ServerConfig())))
		settings := map[string]string{"security.protocol": "SSL", "ssl.ca.location": ca.File}
		runShopOnASecuredCluster(t, client, b.Addr(), settings, kgo.DialTLSConfig(&tls.Config{RootCAs: ca.Pool, MinVersion: tls.VersionTLS12}))
	})
}

// A broker whose certificate another authority signed is refused: the
// worker does not start. (Beside TestWorkerOnATLSCluster, which differs
// only in the authority, it shows the verification is what refuses.)
func TestWorkerRefusesABrokerItCannotVerify(t *testing.T) {
	t.Parallel()
	eachClient(t, func(t *testing.T, client string) {
		ca, other := newTestCA(t), newTestCA(t)
		b := startBroker(t, embedded.KfakeOpts(kfake.TLS(ca.ServerConfig())))
		cfg := testConfigFor(t, client, b.Addr(), "tls-unverified")
		cfg.CreateTopics = true
		cfg.Kafka = map[string]string{"security.protocol": "SSL", "ssl.ca.location": other.File}
		// The refusal comes at the first handshake that completes, not at
		// the bound: a certificate that does not verify is not retried.
		cfg.ConnectTimeout = time.Minute
		w, err := runtime.NewStreamThread(cfg, globalShop(t), nil, nil)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		err = w.Start(ctx)
		// Both clients name the broker and why it is refused.
		require.ErrorIs(t, err, runtime.ErrKafkaUnreachable)
		require.ErrorContains(t, err, "TLS handshake with "+b.Addr())
		require.ErrorContains(t, err, "certificate signed by unknown authority")
		// At the first answer: retried, it would end at the bound with
		// the count of attempts.
		require.NotContains(t, err.Error(), "attempts")
	})
}
