package transport

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Each client's admin reports the cluster's id as the cluster says it to
// a client of its own.
func TestEveryAdminReportsTheClusterID(t *testing.T) {
	b := startBroker(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	md, err := kadm.NewClient(cl).BrokerMetadata(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, md.Cluster, "the embedded broker says its cluster's id")
	for _, name := range Clients() {
		t.Run(name, func(t *testing.T) {
			s, err := Named(name)
			require.NoError(t, err)
			p, admin, err := s.Producer(*franzTestSettings(t, b.Addr(), "cluster-id"))
			require.NoError(t, err)
			t.Cleanup(func() {
				admin.Close()
				assert.NoError(t, p.Close())
			})
			id, err := admin.ClusterID(ctx)
			require.NoError(t, err)
			assert.Equal(t, md.Cluster, id)
		})
	}
}
