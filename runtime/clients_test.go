package runtime_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/causeway-stream/causeway/runtime"
)

// A build lists the clients it has, the default first, and refuses the one
// it lacks by name: without cgo, librdkafka.
func TestTheClientsAreThoseBuiltIn(t *testing.T) {
	want := []string{runtime.ClientFranz}
	if builtWithCgo {
		want = []string{runtime.ClientLibrdkafka, runtime.ClientFranz}
	}
	assert.Equal(t, want, runtime.Clients())
	assert.Equal(t, want[0], runtime.DefaultConfig().Client)

	for _, client := range []string{runtime.ClientLibrdkafka, runtime.ClientFranz} {
		cfg := runtime.DefaultConfig()
		cfg.ApplicationID, cfg.Client, cfg.BootstrapServers = "shop", client, "127.0.0.1:1"
		w, err := runtime.NewStreamThread(cfg, shopTopology(), zap.NewNop(), nil)
		if client == runtime.ClientFranz || builtWithCgo {
			require.NoError(t, err, client)
			require.NotNil(t, w)
			continue
		}
		require.ErrorIs(t, err, runtime.ErrInvalidConfig)
		assert.ErrorContains(t, err, `client "librdkafka" is not built into this binary`)
	}
}
