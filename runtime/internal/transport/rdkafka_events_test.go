//go:build cgo

package transport

import (
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// The librdkafka producer's error events (here: no broker listens at the
// address) are read and logged, not left in the client's channel, where
// they would fill it and hold up the client's poller, and count as
// outstanding for the client's flush.
func TestTheProducersErrorEventsAreDrained(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close()) // nothing listens there now
	core, logs := observer.New(zap.DebugLevel)
	p, admin, err := rdkafkaTransport{}.Producer(Settings{ApplicationID: "drained", InstanceID: "one", Bootstrap: addr,
		Kafka: map[string]string{"reconnect.backoff.ms": "10", "reconnect.backoff.max.ms": "50"}, Log: zap.New(core)})
	require.NoError(t, err)
	defer func() {
		admin.Close()
		assert.NoError(t, p.Close())
	}()
	rp := p.(*rdkProducer)
	deadline := time.Now().Add(20 * time.Second)
	for logs.FilterMessage("producer error event").Len() < 3 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	require.GreaterOrEqual(t, logs.FilterMessage("producer error event").Len(), 3, "the client's errors are logged")
	assert.Zero(t, len(rp.p.Events()), "and none is left in its channel")
}
