package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/causeway-stream/causeway/connect"
	"github.com/causeway-stream/causeway/connect/pgcdc"
	"github.com/causeway-stream/causeway/connect/postgres"
	"github.com/causeway-stream/causeway/runtime/connectworker"
)

const connectUsage = `Usage: causeway connect --bootstrap-servers HOST:PORT [flags]

Runs a connect worker: connectors managed over Kafka Connect's REST API
(POST /connectors, GET /connectors/{name}/status, ...). Workers given the
same --state-topic make one cluster and share the connectors' tasks.

Plugins: PostgresSink, PostgresSource, PostgresCdcSource (Debezium's
io.debezium.connector.postgresql.PostgresConnector), HttpSource.

Flags:
`

// keyValues collects repeated key=value flags.
type keyValues map[string]string

func (k keyValues) String() string { return fmt.Sprint(map[string]string(k)) }

func (k keyValues) Set(v string) error {
	key, value, ok := strings.Cut(v, "=")
	if !ok || key == "" {
		return fmt.Errorf("%q is not key=value", v)
	}
	k[key] = value
	return nil
}

// runConnect runs a connect worker until a signal ends it.
func runConnect(ctx context.Context, args []string, env func(string) string, stderr io.Writer) int {
	fs := flag.NewFlagSet("causeway connect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kafka := keyValues{}
	bootstrap := fs.String("bootstrap-servers", env("CAUSEWAY_BOOTSTRAP_SERVERS"), "Kafka's bootstrap servers (CAUSEWAY_BOOTSTRAP_SERVERS)")
	client := fs.String("client", "", "the Kafka client library: librdkafka or franz (default: the first built in)")
	listen := fs.String("listen", ":8083", "the REST API's address")
	id := fs.String("worker-id", "", "the worker's id in the cluster (default: host name and REST port)")
	stateTopic := fs.String("state-topic", "causeway-connect-state", "the cluster's state topic: connectors, their states and the workers")
	offsetsTopic := fs.String("offsets-topic", "causeway-connect-offsets", "where sources keep their offsets")
	connectTimeout := fs.Duration("connect-timeout", 30*time.Second, "how long to keep trying to reach Kafka at start, with backoff, before exiting")
	heartbeat := fs.Duration("heartbeat", 2*time.Second, "how often the worker says it is alive; gone after three")
	restartBackoff := fs.Duration("task-restart-backoff", 0, "restart a FAILED task this long after it failed, doubling the wait on each failure in a row (0: never, as Kafka Connect)")
	restartMax := fs.Duration("task-restart-backoff-max", 5*time.Minute, "the longest wait before a task restart, and how long a restarted task must run to count from the first attempt again")
	level := fs.String("log-level", "info", "debug, info, warn or error")
	fs.Var(kafka, "kafka", "a librdkafka client setting, key=value (repeatable): security and the like")
	fs.Usage = func() {
		fmt.Fprint(stderr, connectUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *bootstrap == "" || fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	var lvl zapcore.Level
	if err := lvl.Set(*level); err != nil {
		fmt.Fprintf(stderr, "--log-level: %v\n", err)
		return 2
	}
	logCfg := zap.NewProductionConfig()
	logCfg.Level = zap.NewAtomicLevelAt(lvl)
	logCfg.DisableStacktrace = true
	log, err := logCfg.Build()
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	defer log.Sync() //nolint:errcheck // stderr
	w, err := connectworker.New(connectworker.Config{Bootstrap: *bootstrap, Client: *client, Kafka: kafka, StateTopic: *stateTopic,
		OffsetsTopic: *offsetsTopic, Listen: *listen, WorkerID: *id, ConnectTimeout: *connectTimeout, Heartbeat: *heartbeat, Log: log,
		Restarts: connectworker.RestartPolicy{Initial: *restartBackoff, Max: *restartMax},
		Sinks:    map[string]connect.Sink{"PostgresSink": postgres.Sink{}},
		Sources:  map[string]connect.Source{"PostgresSource": postgres.Source{}, "PostgresCdcSource": pgcdc.Source{}}})
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := w.Run(ctx); err != nil {
		log.Error("connect worker stopped", zap.Error(err))
		return 1
	}
	return 0
}
