package sinkworker_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/causeway-stream/causeway/connect"
	"github.com/causeway-stream/causeway/runtime/internal/reach/reachtest"
	"github.com/causeway-stream/causeway/runtime/sinkworker"
)

// idleTask is a sink task that is only closed.
type idleTask struct{ connect.SinkTask }

func (idleTask) Close() error { return nil }

// A sink worker reaches its cluster before it reads anything, as the
// stream worker does, on either client: where nothing listens it retries
// until ConnectTimeout and then names the address and the cause; a broker
// whose certificate does not verify with the settings' authority is
// refused at the first handshake, not at the bound.
func TestASinkWorkerThatCannotReachItsClusterSaysWhereAndWhy(t *testing.T) {
	reachtest.Run(t, sinkworker.ErrKafkaUnreachable, func(t *testing.T, client string, c reachtest.Case) error {
		w, err := sinkworker.New(sinkworker.Config{Connector: "unreached", Topics: []string{"orders"}, Task: idleTask{},
			Bootstrap: c.Bootstrap, Client: client, Kafka: c.Kafka, ConnectTimeout: c.Timeout, Log: zaptest.NewLogger(t)})
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		return w.Run(ctx)
	})
}
