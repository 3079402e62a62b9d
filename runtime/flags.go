package runtime

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// kafkaFlag collects repeated --kafka key=value flags.
type kafkaFlag map[string]string

func (k kafkaFlag) String() string {
	keys := make([]string, 0, len(k))
	for key := range k {
		keys = append(keys, key+"="+k[key])
	}
	sort.Strings(keys)
	return strings.Join(keys, ",")
}

func (k kafkaFlag) Set(v string) error {
	key, val, ok := strings.Cut(v, "=")
	if !ok || key == "" {
		return fmt.Errorf("want key=value, got %q", v)
	}
	k[key] = val
	return nil
}

// Load reads the configuration from the environment, then the flags in
// args (flags win), and validates it.
func Load(args []string, env func(string) string) (Config, error) {
	if env == nil {
		env = os.Getenv
	}
	c := DefaultConfig()
	var createTopics optionalBool
	gate := "on"
	fs := flag.NewFlagSet("causeway", flag.ContinueOnError)
	fs.SetOutput(new(strings.Builder))
	fs.StringVar(&c.ApplicationID, "application-id", env("CAUSEWAY_APPLICATION_ID"), "application id (consumer group and topic prefix)")
	fs.StringVar(&c.BootstrapServers, "bootstrap-servers", env("CAUSEWAY_BOOTSTRAP_SERVERS"), "Kafka brokers; empty starts the embedded broker")
	fs.DurationVar(&c.CommitInterval, "commit-interval", envDuration(env, "CAUSEWAY_COMMIT_INTERVAL", c.CommitInterval), "transaction commit interval")
	fs.StringVar(&c.StateDir, "state-dir", envOr(env, "CAUSEWAY_STATE_DIR", c.StateDir), "state directory")
	fs.StringVar(&c.Stores, "stores", envOr(env, "CAUSEWAY_STORES", c.Stores), "where stores live: pebble (on disk) or memory")
	fs.StringVar(&c.HTTPAddr, "http-addr", envOr(env, "CAUSEWAY_HTTP_ADDR", c.HTTPAddr), "HTTP address for health, metrics and status; empty disables")
	fs.StringVar(&c.AdvertisedHTTPAddr, "advertised-http-addr", env("CAUSEWAY_ADVERTISED_HTTP_ADDR"),
		"host:port at which other workers reach this one's HTTP server, for forwarded queries (default: the address it listens on)")
	fs.StringVar(&c.InstanceID, "instance-id", env("CAUSEWAY_INSTANCE_ID"), "this worker's stable id (default: kept in the state dir)")
	fs.BoolVar(&c.StaticMembership, "static-membership", envOr(env, "CAUSEWAY_STATIC_MEMBERSHIP", "true") == "true", "join the group as a static member (fast restarts)")
	fs.StringVar(&c.RebalanceProtocol, "rebalance-protocol", envOr(env, "CAUSEWAY_REBALANCE_PROTOCOL", c.RebalanceProtocol),
		"cooperative (only the tasks that move stop) or eager (every rebalance stops every task); all workers must agree")
	fs.IntVar(&c.StandbyReplicas, "standby-replicas", c.StandbyReplicas, "workers besides a task's own that keep a copy of its state up to date, for fast failover (franz client)")
	fs.Int64Var(&c.AcceptableRecoveryLag, "acceptable-recovery-lag", c.AcceptableRecoveryLag,
		"changelog records a worker's copy may lack for a task to move to it at once; further behind it warms up first (negative: no warm-ups)")
	fs.IntVar(&c.MaxWarmupReplicas, "max-warmup-replicas", c.MaxWarmupReplicas, "warm-ups of the application at once")
	fs.DurationVar(&c.ProbingRebalanceInterval, "probing-rebalance-interval", c.ProbingRebalanceInterval,
		"how often a worker warming copies up asks the group to rebalance, to move the tasks that caught up")
	fs.DurationVar(&c.StatePositionsInterval, "state-positions-interval", c.StatePositionsInterval,
		"how often the worker learns where its stores on disk stand in their changelogs (bounds what a restart replays; ages the state sizes reported to the group)")
	fs.StringVar(&c.AutoOffsetReset, "auto-offset-reset", envOr(env, "CAUSEWAY_AUTO_OFFSET_RESET", c.AutoOffsetReset), "earliest or latest")
	fs.BoolVar(&c.AllowOffsetReset, "allow-offset-reset", env("CAUSEWAY_ALLOW_OFFSET_RESET") == "true", "go on when a committed offset is out of range")
	fs.Var(&createTopics, "create-topics", "create missing topics (default: only with the embedded broker)")
	fs.IntVar(&c.DefaultPartitions, "default-partitions", c.DefaultPartitions, "partitions of topics the worker creates")
	fs.IntVar(&c.MaxHeldPerChannel, "max-held-per-channel", c.MaxHeldPerChannel, "hold-queue bound per channel before pausing it")
	fs.IntVar(&c.MaxRecordBytes, "max-record-bytes", c.MaxRecordBytes, "most key and value bytes of a store write (a larger one fails its input record) and of a dead letter (a larger one is cut to fit); 0: no bound")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", c.ShutdownTimeout, "bound on a graceful stop's last commit, and again on closing the Kafka clients (after a fatal error too)")
	fs.DurationVar(&c.ConnectTimeout, "connect-timeout", c.ConnectTimeout, "how long to keep trying to reach Kafka at start, with backoff, before exiting")
	fs.DurationVar(&c.TaskRestartBackoff, "task-restart-backoff", c.TaskRestartBackoff, "restart a FAILED task this long after it failed, doubling the wait on each failure in a row (0: never, as Kafka Streams)")
	fs.DurationVar(&c.TaskRestartBackoffMax, "task-restart-backoff-max", c.TaskRestartBackoffMax, "the longest wait before a task restart, and how long a restarted task must run to count from the first attempt again")
	fs.DurationVar(&c.TopicWaitTimeout, "topic-wait-timeout", c.TopicWaitTimeout, "how long to wait at start for input and output topics that do not exist to be created, before exiting (0: exit at once)")
	fs.BoolVar(&c.ReadyWithFailedTasks, "ready-with-failed-tasks", false, "answer /readyz with 200 while some tasks are FAILED and the others run (/status still says degraded)")
	threads := envOr(env, "CAUSEWAY_THREADS", strconv.Itoa(c.Threads))
	fs.StringVar(&threads, "threads", threads, "stream threads: pumps, each with its own consumer and producer, that share the process's tasks")
	fs.StringVar(&c.Client, "client", envOr(env, "CAUSEWAY_CLIENT", c.Client), "Kafka client library: librdkafka or franz (pure Go)")
	fs.StringVar(&gate, "gate", envOr(env, "CAUSEWAY_GATE", gate), "on, or off to deliver without causal order (demonstrations only)")
	fs.BoolVar(&c.CheckClaims, "check-claims", envOr(env, "CAUSEWAY_CHECK_CLAIMS", "true") == "true", "check that claims entering the topology name records that exist")
	fs.StringVar(&c.AdminToken, "admin-token", env("CAUSEWAY_ADMIN_TOKEN"), "bearer token required by the HTTP endpoints that change something (default: none)")
	fs.BoolVar(&c.Development, "dev", env("CAUSEWAY_DEV") == "true", "console logs")
	fs.StringVar(&c.LogLevel, "log-level", c.LogLevel, "least level logged: debug, info, warn or error")
	kafka := kafkaFlag(c.Kafka)
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, "CAUSEWAY_KAFKA_") && env(k) != "" {
			kafka[strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(k, "CAUSEWAY_KAFKA_"), "_", "."))] = v
		}
	}
	fs.Var(kafka, "kafka", "librdkafka property key=value (repeatable)")
	if err := setFromEnv(fs, env); err != nil {
		return c, err
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return c, &helpError{usage: usage(fs)}
		}
		return c, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("%w: unexpected argument %q (a switch takes its value as --flag=value)", ErrInvalidConfig, fs.Arg(0))
	}
	clientChosen := false
	fs.Visit(func(f *flag.Flag) { clientChosen = clientChosen || f.Name == "client" })
	if c.StandbyReplicas > 0 && !clientChosen && slices.Contains(Clients(), ClientFranz) {
		// Only franz-go's balancer places copies of state.
		c.Client = ClientFranz
	}
	c.CreateTopics = c.BootstrapServers == ""
	if createTopics.set {
		c.CreateTopics = createTopics.value
	}
	n, err := strconv.Atoi(threads)
	if err != nil {
		return c, fmt.Errorf("%w: --threads %q: want a number", ErrInvalidConfig, threads)
	}
	c.Threads = n
	switch gate {
	case "on":
	case "off":
		c.GateOff = true
	default:
		return c, fmt.Errorf("%w: --gate %q: want on or off", ErrInvalidConfig, gate)
	}
	return c, c.Validate()
}

// setFromEnv sets every flag of fs whose variable CAUSEWAY_<FLAG> (dashes
// as underscores) env holds, before the arguments are parsed, so that a
// flag given wins and every flag has its variable. --kafka takes its
// properties from CAUSEWAY_KAFKA_<PROPERTY> instead. A value the flag
// refuses is an error naming the variable.
func setFromEnv(fs *flag.FlagSet, env func(string) string) error {
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if err != nil || f.Name == "kafka" {
			return
		}
		name := "CAUSEWAY_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v := env(name); v != "" {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("%w: %s=%q: %w", ErrInvalidConfig, name, v, e)
			}
		}
	})
	return err
}

// optionalBool is a switch that may be left unset: --create-topics alone
// turns it on, --create-topics=false off.
type optionalBool struct{ set, value bool }

func (b *optionalBool) String() string {
	if b == nil || !b.set {
		return ""
	}
	return strconv.FormatBool(b.value)
}

func (b *optionalBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return errors.New("want true or false")
	}
	b.set, b.value = true, v
	return nil
}

// IsBoolFlag lets the flag be given alone.
func (b *optionalBool) IsBoolFlag() bool { return true }

// usage describes the flags of fs for --help.
func usage(fs *flag.FlagSet) string {
	var b strings.Builder
	b.WriteString("Usage: worker [flags]\n\n" +
		"Runs the topology as one worker of its application. Flags win over environment\n" +
		"variables: CAUSEWAY_<FLAG> with dashes written as underscores\n" +
		"(CAUSEWAY_BOOTSTRAP_SERVERS), and CAUSEWAY_KAFKA_<PROPERTY> for --kafka.\n\nFlags:\n")
	fs.SetOutput(&b)
	fs.PrintDefaults()
	return b.String()
}

func envOr(env func(string) string, key, def string) string {
	if v := env(key); v != "" {
		return v
	}
	return def
}

func envDuration(env func(string) string, key string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(env(key)); err == nil {
		return d
	}
	return def
}
