package transport

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFranzConnection(t *testing.T) {
	notPEM := filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(notPEM, []byte("not a certificate"), 0o600))
	tests := []struct {
		name     string
		settings map[string]string
		opts     int    // options it gives (one of them, unless asked otherwise, turns the client metrics off)
		refused  string // or what the error names
	}{
		{name: "nothing", settings: nil, opts: 1},
		{name: "tuning only", settings: map[string]string{"queued.max.messages.kbytes": "32768", "linger.ms": "10", "fetch.wait.max.ms": "5"}, opts: 1},
		{name: "client id", settings: map[string]string{"client.id": "shop-1"}, opts: 2},
		{name: "client metrics pushed", settings: map[string]string{"enable.metrics.push": "true"}, opts: 0},
		{name: "client metrics neither on nor off", settings: map[string]string{"enable.metrics.push": "sometimes"}, refused: "enable.metrics.push"},
		{name: "SASL PLAIN", settings: map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
			"sasl.username": "u", "sasl.password": "p"}, opts: 2},
		{name: "SCRAM over TLS, librdkafka's plural key", settings: map[string]string{"security.protocol": "sasl_ssl", "sasl.mechanisms": "SCRAM-SHA-512",
			"sasl.username": "u", "sasl.password": "p"}, opts: 3},
		{name: "TLS without verification", settings: map[string]string{"security.protocol": "SSL", "enable.ssl.certificate.verification": "false"}, opts: 2},
		{name: "TLS without host name check", settings: map[string]string{"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "none"}, opts: 2},
		{name: "OAUTHBEARER", settings: map[string]string{"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER"}, refused: "sasl.mechanism=OAUTHBEARER"},
		{name: "SASL without a mechanism is GSSAPI", settings: map[string]string{"security.protocol": "SASL_PLAINTEXT"}, refused: "sasl.mechanism=GSSAPI"},
		{name: "an unknown protocol", settings: map[string]string{"security.protocol": "QUIC"}, refused: "security.protocol=QUIC"},
		{name: "a setting franz-go has no match for", settings: map[string]string{"client.dns.lookup": "use_all_dns_ips"}, refused: "client.dns.lookup"},
		{name: "an encrypted client key", settings: map[string]string{"security.protocol": "SSL", "ssl.key.password": "x"}, refused: "ssl.key.password"},
		{name: "a CA file without a certificate", settings: map[string]string{"security.protocol": "SSL", "ssl.ca.location": notPEM}, refused: "no PEM certificate"},
		{name: "a key without its certificate", settings: map[string]string{"security.protocol": "SSL", "ssl.key.location": notPEM}, refused: "go together"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts, err := FranzConnection(tt.settings)
			if tt.refused != "" {
				require.Error(t, err)
				assert.ErrorContains(t, err, tt.refused)
				return
			}
			require.NoError(t, err)
			assert.Len(t, opts, tt.opts)
		})
	}
}
