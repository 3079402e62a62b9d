package runtime_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/runtime"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestLoadDefaultsFlagsAndEnvironment(t *testing.T) {
	cfg, err := runtime.Load([]string{"--application-id", "shop", "--commit-interval", "250ms", "--kafka", "security.protocol=SASL_SSL",
		"--kafka", "sasl.mechanism=PLAIN"}, env(map[string]string{"CAUSEWAY_BOOTSTRAP_SERVERS": "k1:9092,k2:9092", "CAUSEWAY_HTTP_ADDR": ":9000"}))
	require.NoError(t, err)
	assert.Equal(t, "shop", cfg.ApplicationID)
	assert.Equal(t, "k1:9092,k2:9092", cfg.BootstrapServers)
	assert.Equal(t, 250*time.Millisecond, cfg.CommitInterval)
	assert.Equal(t, ":9000", cfg.HTTPAddr)
	assert.Equal(t, map[string]string{"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}, cfg.Kafka)
	assert.False(t, cfg.CreateTopics, "a real cluster's topics are not created unless asked")
	assert.True(t, cfg.StaticMembership)
	assert.False(t, cfg.GateOff)

	embedded, err := runtime.Load([]string{"--application-id", "shop"}, env(nil))
	require.NoError(t, err)
	assert.Empty(t, embedded.BootstrapServers)
	assert.True(t, embedded.CreateTopics, "the embedded broker starts empty, so topics are created")
	assert.Equal(t, 100*time.Millisecond, embedded.CommitInterval)
	assert.Equal(t, "127.0.0.1:8080", embedded.HTTPAddr, "localhost by default")
}

func TestLoadRejects(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no application id", nil, "application id is required"},
		{"bad application id", []string{"--application-id", "a b"}, `application id "a b"`},
		{"zero commit interval", []string{"--application-id", "a", "--commit-interval", "0s"}, "commit interval"},
		{"bad reset", []string{"--application-id", "a", "--auto-offset-reset", "middle"}, `auto offset reset "middle"`},
		{"bad gate", []string{"--application-id", "a", "--gate", "maybe"}, `--gate "maybe"`},
		{"overriding exactly-once settings", []string{"--application-id", "a", "--kafka", "isolation.level=read_uncommitted"}, `"isolation.level" is set by the worker`},
		{"malformed kafka property", []string{"--application-id", "a", "--kafka", "novalue"}, "want key=value"},
		{"unknown flag", []string{"--application-id", "a", "--nope"}, "flag provided but not defined"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := runtime.Load(tt.args, env(nil))
			require.ErrorIs(t, err, runtime.ErrInvalidConfig)
			assert.ErrorContains(t, err, tt.want)
		})
	}
}
