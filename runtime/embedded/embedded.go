// Package embedded starts franz-go's kfake, a Kafka-protocol cluster written
// in Go, in process and on localhost: the broker Causeway uses for the
// quickstart, for development and for tests when no bootstrap servers are
// given. Any Kafka client (librdkafka, franz-go, kcat) can talk to it.
package embedded

import (
	"crypto/tls"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// Broker is a running embedded cluster.
type Broker struct {
	cluster *kfake.Cluster
}

// Opt configures Start.
type Opt interface{ apply(*config) }

type config struct {
	dataDir string
	port    int
	extra   []kfake.Opt
}

type optFunc func(*config)

func (f optFunc) apply(c *config) { f(c) }

// DataDir keeps the cluster's data in dir, so it survives restarts. Default:
// in memory only.
func DataDir(dir string) Opt { return optFunc(func(c *config) { c.dataDir = dir }) }

// Port listens on a fixed localhost port. Default: a free port.
func Port(p int) Opt { return optFunc(func(c *config) { c.port = p }) }

// TLS makes the broker speak only TLS, with cfg (its certificate).
// Default: plaintext.
func TLS(cfg *tls.Config) Opt { return KfakeOpts(kfake.TLS(cfg)) }

// KfakeOpts passes options straight to kfake (fault injection in tests).
func KfakeOpts(opts ...kfake.Opt) Opt {
	return optFunc(func(c *config) { c.extra = append(c.extra, opts...) })
}

// Start starts a one-broker cluster on localhost. It answers every request
// kfake does, at the same versions, but for KIP-714's client metrics: it
// does not offer them, as it would only drop what clients push (each
// franz-go client compresses a rollup for it, and one more as it closes).
func Start(opts ...Opt) (*Broker, error) {
	var cfg config
	for _, o := range opts {
		o.apply(&cfg)
	}
	kopts := []kfake.Opt{kfake.NumBrokers(1), kfake.DefaultNumPartitions(1), kfake.MaxVersions(withoutTelemetry())}
	if cfg.port != 0 {
		kopts = append(kopts, kfake.Ports(cfg.port))
	}
	if cfg.dataDir != "" {
		kopts = append(kopts, kfake.DataDir(cfg.dataDir))
	}
	kopts = append(kopts, cfg.extra...)
	c, err := kfake.NewCluster(kopts...)
	if err != nil {
		return nil, fmt.Errorf("embedded broker: %w", err)
	}
	return &Broker{cluster: c}, nil
}

// withoutTelemetry is the request versions the broker offers: kfake's own,
// which are franz-go's stable versions (TestTheBrokerOffersWhatKfakeDoes),
// without the two KIP-714 requests.
func withoutTelemetry() *kversion.Versions {
	v := kversion.Stable()
	v.SetMaxKeyVersion(int16(kmsg.GetTelemetrySubscriptions), -1)
	v.SetMaxKeyVersion(int16(kmsg.PushTelemetry), -1)
	return v
}

// Addr returns the bootstrap servers, comma-separated.
func (b *Broker) Addr() string { return strings.Join(b.cluster.ListenAddrs(), ",") }

// Cluster gives tests the kfake cluster (faults, compaction).
func (b *Broker) Cluster() *kfake.Cluster { return b.cluster }

// Close stops the cluster, writing its data out if it has a data dir.
func (b *Broker) Close() { b.cluster.Close() }
