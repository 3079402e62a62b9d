//go:build cgo

package transport

import (
	"testing"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/stretchr/testify/assert"
)

// A --kafka setting reaches the clients that read it: a consumer-only
// setting not the producer, a producer-only one not the consumers, and
// any other setting all of them.
func TestKafkaSettingsReachTheClientsThatReadThem(t *testing.T) {
	cfg := Settings{ApplicationID: "app", Kafka: map[string]string{"fetch.max.bytes": "8388608", "linger.ms": "20", "socket.keepalive.enable": "true"}}
	for _, tc := range []struct {
		client     string
		get        func() kafka.ConfigMap
		has, hasNo []string
	}{
		{"consumer", func() kafka.ConfigMap { return cfg.consumerConfig() }, []string{"fetch.max.bytes", "socket.keepalive.enable"}, []string{"linger.ms"}},
		{"restore consumer", func() kafka.ConfigMap { return cfg.restoreConsumerConfig() }, []string{"fetch.max.bytes", "socket.keepalive.enable"}, []string{"linger.ms"}},
		{"producer", func() kafka.ConfigMap { return cfg.producerConfig() }, []string{"linger.ms", "socket.keepalive.enable"}, []string{"fetch.max.bytes"}},
	} {
		t.Run(tc.client, func(t *testing.T) {
			cm := tc.get()
			for _, k := range tc.has {
				assert.Equal(t, cfg.Kafka[k], cm[k], k)
			}
			for _, k := range tc.hasNo {
				assert.NotContains(t, cm, k)
			}
		})
	}
}
