package connectworker_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/causeway-stream/causeway/runtime/connectworker"
	"github.com/causeway-stream/causeway/runtime/internal/reach/reachtest"
)

// A connect worker reaches its cluster before it reads its state topic,
// as the stream worker does, on either client: where nothing listens it
// retries until ConnectTimeout and then names the address and the cause;
// a broker whose certificate does not verify with the settings' authority
// is refused at the first handshake, not at the bound.
func TestAConnectWorkerThatCannotReachItsClusterSaysWhereAndWhy(t *testing.T) {
	reachtest.Run(t, connectworker.ErrKafkaUnreachable, func(t *testing.T, client string, c reachtest.Case) error {
		w, err := connectworker.New(connectworker.Config{Bootstrap: c.Bootstrap, Client: client, Kafka: c.Kafka,
			Listen: "127.0.0.1:0", ConnectTimeout: c.Timeout, Log: zaptest.NewLogger(t)})
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		return w.Run(ctx)
	})
}
