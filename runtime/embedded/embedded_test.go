package embedded

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// offered is what a broker at addrs answers to ApiVersions: each request
// key's highest version, and the finalized features' levels.
func offered(t *testing.T, addrs []string) (keys map[int16]int16, features map[string]int16) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DisableClientMetrics())
	require.NoError(t, err)
	defer cl.Close()
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(context.Background(), cl)
	require.NoError(t, err)
	keys, features = map[int16]int16{}, map[string]int16{}
	for _, k := range resp.ApiKeys {
		keys[k.ApiKey] = k.MaxVersion
	}
	for _, f := range resp.FinalizedFeatures {
		features[f.Name] = f.MaxVersionLevel
	}
	return keys, features
}

// The embedded broker offers every request kfake offers, at the same
// version, and the same features (the transaction version among them),
// but for KIP-714's client metrics. It caps kfake's versions at
// franz-go's stable ones: should a kfake upgrade offer more than those,
// this fails, rather than the broker quietly offering less.
func TestTheBrokerOffersWhatKfakeDoes(t *testing.T) {
	plain, err := kfake.NewCluster(kfake.NumBrokers(1))
	require.NoError(t, err)
	defer plain.Close()
	wantKeys, wantFeatures := offered(t, plain.ListenAddrs())
	require.Contains(t, wantKeys, int16(kmsg.GetTelemetrySubscriptions), "kfake no longer offers client metrics")
	delete(wantKeys, int16(kmsg.GetTelemetrySubscriptions))
	delete(wantKeys, int16(kmsg.PushTelemetry))

	b, err := Start()
	require.NoError(t, err)
	defer b.Close()
	keys, features := offered(t, b.cluster.ListenAddrs())
	assert.Equal(t, wantKeys, keys)
	assert.Equal(t, wantFeatures, features)
}
