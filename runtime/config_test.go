package runtime_test

import (
	"encoding/json"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"

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
	assert.Equal(t, 1, cfg.Threads, "one stream thread by default")

	threaded, err := runtime.Load([]string{"--application-id", "shop", "--threads", "3"}, env(map[string]string{"CAUSEWAY_THREADS": "2"}))
	require.NoError(t, err)
	assert.Equal(t, 3, threaded.Threads, "the flag wins over the environment")
	threaded, err = runtime.Load([]string{"--application-id", "shop"}, env(map[string]string{"CAUSEWAY_THREADS": "2"}))
	require.NoError(t, err)
	assert.Equal(t, 2, threaded.Threads)

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
		{"no threads", []string{"--application-id", "a", "--threads", "0"}, "threads 0: want 1 to 64"},
		{"threads not a number", []string{"--application-id", "a", "--threads", "many"}, `--threads "many"`},
		{"overriding exactly-once settings", []string{"--application-id", "a", "--kafka", "isolation.level=read_uncommitted"}, `"isolation.level" is set by the worker`},
		{"malformed kafka property", []string{"--application-id", "a", "--kafka", "novalue"}, "want key=value"},
		{"unknown flag", []string{"--application-id", "a", "--nope"}, "flag provided but not defined"},
		{"a switch given its value apart", []string{"--application-id", "a", "--create-topics", "false"}, `unexpected argument "false"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := runtime.Load(tt.args, env(nil))
			require.ErrorIs(t, err, runtime.ErrInvalidConfig)
			assert.ErrorContains(t, err, tt.want)
		})
	}
}

// Every flag takes its value from CAUSEWAY_<FLAG> when it is not given,
// as --help says; a flag given wins; a value the flag refuses is an error
// naming the variable. --create-topics is a switch.
func TestEveryFlagHasItsVariable(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		env   map[string]string
		check func(t *testing.T, c runtime.Config)
	}{
		{"default partitions", nil, map[string]string{"CAUSEWAY_DEFAULT_PARTITIONS": "2"},
			func(t *testing.T, c runtime.Config) { assert.Equal(t, 2, c.DefaultPartitions) }},
		{"max held per channel", nil, map[string]string{"CAUSEWAY_MAX_HELD_PER_CHANNEL": "77"},
			func(t *testing.T, c runtime.Config) { assert.Equal(t, 77, c.MaxHeldPerChannel) }},
		{"shutdown timeout", nil, map[string]string{"CAUSEWAY_SHUTDOWN_TIMEOUT": "3s"},
			func(t *testing.T, c runtime.Config) { assert.Equal(t, 3*time.Second, c.ShutdownTimeout) }},
		{"the flag wins", []string{"--default-partitions", "5"}, map[string]string{"CAUSEWAY_DEFAULT_PARTITIONS": "2"},
			func(t *testing.T, c runtime.Config) { assert.Equal(t, 5, c.DefaultPartitions) }},
		{"create topics, a switch before another flag", []string{"--create-topics", "--http-addr", ":9001"},
			map[string]string{"CAUSEWAY_BOOTSTRAP_SERVERS": "k:9092"},
			func(t *testing.T, c runtime.Config) {
				assert.True(t, c.CreateTopics)
				assert.Equal(t, ":9001", c.HTTPAddr)
			}},
		{"create topics off with the embedded broker", []string{"--create-topics=false"}, nil,
			func(t *testing.T, c runtime.Config) { assert.False(t, c.CreateTopics) }},
		{"create topics from the environment", nil, map[string]string{"CAUSEWAY_BOOTSTRAP_SERVERS": "k:9092", "CAUSEWAY_CREATE_TOPICS": "true"},
			func(t *testing.T, c runtime.Config) { assert.True(t, c.CreateTopics) }},
		{"create topics unset: only with the embedded broker", nil, map[string]string{"CAUSEWAY_BOOTSTRAP_SERVERS": "k:9092"},
			func(t *testing.T, c runtime.Config) { assert.False(t, c.CreateTopics) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := map[string]string{"CAUSEWAY_APPLICATION_ID": "shop"}
			for k, v := range tt.env {
				e[k] = v
			}
			c, err := runtime.Load(tt.args, env(e))
			require.NoError(t, err)
			tt.check(t, c)
		})
	}
	for _, bad := range []struct{ name, value, want string }{
		{"CAUSEWAY_DEFAULT_PARTITIONS", "two", `CAUSEWAY_DEFAULT_PARTITIONS="two"`},
		{"CAUSEWAY_COMMIT_INTERVAL", "soon", `CAUSEWAY_COMMIT_INTERVAL="soon"`},
		{"CAUSEWAY_CREATE_TOPICS", "maybe", `CAUSEWAY_CREATE_TOPICS="maybe": want true or false`},
	} {
		_, err := runtime.Load(nil, env(map[string]string{"CAUSEWAY_APPLICATION_ID": "shop", bad.name: bad.value}))
		require.ErrorIs(t, err, runtime.ErrInvalidConfig, bad.name)
		assert.ErrorContains(t, err, bad.want)
	}
}

// flagNames lists the flags --help names.
func flagNames(t *testing.T) []string {
	t.Helper()
	_, err := runtime.Load([]string{"--help"}, env(nil))
	require.ErrorIs(t, err, runtime.ErrHelp)
	var names []string
	for _, line := range strings.Split(err.Error(), "\n") {
		if f, ok := strings.CutPrefix(line, "  -"); ok {
			names = append(names, strings.Fields(f)[0])
		}
	}
	require.NotEmpty(t, names)
	return names
}

// Every flag --help names, set through its variable, gives the same
// configuration as the flag itself, and not the default one: a table over
// every flag, which a new flag without a row fails.
func TestEveryFlagsVariableActsAsTheFlag(t *testing.T) {
	values := map[string]string{
		"application-id": "other", "bootstrap-servers": "k:9092", "commit-interval": "250ms", "state-dir": "elsewhere",
		"stores": "memory", "http-addr": ":9001", "advertised-http-addr": "h:9001", "instance-id": "inst-7",
		"static-membership": "false", "rebalance-protocol": "eager",
		"standby-replicas": "1", "acceptable-recovery-lag": "-1", "max-warmup-replicas": "0", "probing-rebalance-interval": "5s", "state-positions-interval": "2s", "auto-offset-reset": "latest", "allow-offset-reset": "true", "create-topics": "false",
		"default-partitions": "7", "max-held-per-channel": "99", "shutdown-timeout": "3s", "threads": "2",
		"ready-with-failed-tasks": "true", "connect-timeout": "5s", "topic-wait-timeout": "0s", "max-record-bytes": "5000", "task-restart-backoff": "1s", "task-restart-backoff-max": "1m", "log-level": "debug",
		"client": runtime.DefaultConfig().Client, "gate": "off", "check-claims": "false", "admin-token": "secret", "dev": "true",
	}
	// The client that is not the default, where the build has two (without
	// cgo franz-go is the only one, and the default).
	for _, c := range runtime.Clients() {
		if c != runtime.DefaultConfig().Client {
			values["client"] = c
		}
	}
	base, err := runtime.Load([]string{"--application-id", "shop"}, env(nil))
	require.NoError(t, err)
	for _, name := range flagNames(t) {
		if name == "kafka" {
			continue // CAUSEWAY_KAFKA_<PROPERTY>, tested with the transports
		}
		t.Run(name, func(t *testing.T) {
			v, ok := values[name]
			require.True(t, ok, "no value for --%s in this table", name)
			args := []string{"--application-id", "shop"}
			if name == "application-id" {
				args = nil
			}
			byFlag, err := runtime.Load(append(args, "--"+name+"="+v), env(nil))
			require.NoError(t, err)
			variable := "CAUSEWAY_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
			byEnv, err := runtime.Load(args, env(map[string]string{variable: v}))
			require.NoError(t, err)
			assert.Equal(t, byFlag, byEnv, "%s=%s acts as --%s=%s", variable, v, name, v)
			if onlyClient := name == "client" && v == runtime.DefaultConfig().Client; !onlyClient {
				assert.NotEqual(t, base, byEnv, "%s=%s changes nothing", variable, v)
			}
		})
	}
}

func TestHelpPrintsTheFlagsAndExitsZero(t *testing.T) {
	for _, arg := range []string{"--help", "-h"} {
		t.Run(arg, func(t *testing.T) {
			var stdout, stderr strings.Builder
			code := runtime.RunWith(shopTopology(), []string{arg}, env(nil), &stdout, &stderr)
			assert.Equal(t, 0, code)
			assert.Contains(t, stdout.String(), "-bootstrap-servers")
			assert.Contains(t, stdout.String(), "CAUSEWAY_BOOTSTRAP_SERVERS")
			assert.Empty(t, stderr.String())
		})
	}
	var stdout, stderr strings.Builder
	assert.Equal(t, 2, runtime.RunWith(shopTopology(), []string{"--nope"}, env(nil), &stdout, &stderr), "a bad flag is still an error")
	assert.Contains(t, stderr.String(), "flag provided but not defined")
}

// fx's own lines go through the worker's logger: with JSON logs (the
// default), everything the worker writes before its final error line is
// JSON.
func TestFxLogsThroughZap(t *testing.T) {
	type missing struct{}
	// fx's default logger and zap's production logger write to the
	// process's standard error, not to the writer given to RunWith.
	r, w, err := os.Pipe()
	require.NoError(t, err)
	saved := os.Stderr
	os.Stderr = w
	var stdout strings.Builder
	code := runtime.RunWith(shopTopology(), []string{"--application-id", "fxlog", "--state-dir", t.TempDir()}, env(nil), &stdout, w,
		fx.Invoke(func(missing) {}))
	os.Stderr = saved
	require.NoError(t, w.Close())
	stderr, err := io.ReadAll(r)
	require.NoError(t, err)
	assert.Equal(t, 1, code)
	lines := strings.Split(strings.TrimSpace(string(stderr)), "\n")
	require.NotEmpty(t, lines)
	for _, l := range lines[:len(lines)-1] {
		assert.True(t, json.Valid([]byte(l)), "not a JSON log line: %s", l)
	}
	assert.Contains(t, lines[len(lines)-1], "missing type")
}

// Standby replicas need the franz client's balancer: asked for without a
// client, they choose it; asked for with librdkafka, or with what they
// cannot work with, they are refused, naming why.
func TestStandbyReplicasChooseTheirClient(t *testing.T) {
	cfg, err := runtime.Load([]string{"--application-id", "shop", "--standby-replicas", "1"}, env(nil))
	require.NoError(t, err)
	assert.Equal(t, runtime.ClientFranz, cfg.Client)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--client", "librdkafka"}, "need the franz client"},
		{[]string{"--client", "franz", "--rebalance-protocol", "eager"}, "need --rebalance-protocol cooperative"},
		{[]string{"--client", "franz", "--stores", "memory"}, "need --stores pebble"},
	} {
		if tc.args[1] == runtime.ClientLibrdkafka && !slices.Contains(runtime.Clients(), runtime.ClientLibrdkafka) {
			continue // a build without cgo has no librdkafka to refuse
		}
		_, err := runtime.Load(append([]string{"--application-id", "shop", "--standby-replicas", "1"}, tc.args...), env(nil))
		assert.ErrorContains(t, err, tc.want, "%v", tc.args)
	}
}
