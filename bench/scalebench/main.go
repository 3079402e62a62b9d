// Command scalebench measures what changing an application's workers
// costs its partitions: how long each stops, and how much state moves,
// when a worker is added and when one is killed, with and without standby
// replicas and warm-ups, side by side in one run. Each scenario starts a
// broker, writes one record for each of -keys keys, lets -workers workers
// (processes of this program, on franz-go) count them, then feeds steady
// input while the change happens, and reads the committed counts as they
// come: the longest gap between committed outputs of a partition is how
// long it stopped. `make bench-scale` runs it; docs/benchmarks.md explains
// the results.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/causeway-stream/causeway/bench/benchkit"
	"github.com/causeway-stream/causeway/runtime"
)

type options struct {
	keys, partitions, workers, rate int
	event, window                   time.Duration
	out, scenarios                  string
	// The helper mode: the worker under test.
	worker                                   bool
	bootstrap, app, stateDir, http, instance string
	standbys                                 int
	acceptable                               int64
	probing                                  time.Duration
	protocol                                 string
}

func main() {
	var o options
	flag.IntVar(&o.keys, "keys", 2_000_000, "distinct keys counted before the change")
	flag.IntVar(&o.partitions, "partitions", 16, "partitions of the input and output topics")
	flag.IntVar(&o.workers, "workers", 4, "workers before the change")
	flag.IntVar(&o.rate, "rate", 2000, "records a second fed while the change happens")
	flag.DurationVar(&o.event, "event", 10*time.Second, "when, after steady input starts, the change happens")
	flag.DurationVar(&o.window, "window", 45*time.Second, "how long steady input is fed")
	flag.StringVar(&o.out, "out", "bench-results", "directory for scale.md, scale.json and scale.png")
	flag.StringVar(&o.scenarios, "scenarios", strings.Join(scenarioIDs(), ","), "comma-separated scenarios to run")
	flag.BoolVar(&o.worker, "worker", false, "run only a counting worker (used by the benchmark itself)")
	flag.StringVar(&o.bootstrap, "bootstrap", "", "broker address with -worker")
	flag.StringVar(&o.app, "app", "", "application id with -worker")
	flag.StringVar(&o.stateDir, "state-dir", "", "state dir with -worker")
	flag.StringVar(&o.http, "http-addr", "", "HTTP address with -worker")
	flag.StringVar(&o.instance, "instance", "", "instance id with -worker")
	flag.IntVar(&o.standbys, "standby-replicas", 0, "standby replicas with -worker")
	flag.Int64Var(&o.acceptable, "acceptable-recovery-lag", 10_000, "acceptable recovery lag with -worker")
	flag.DurationVar(&o.probing, "probing-rebalance-interval", time.Minute, "probing rebalance interval with -worker")
	flag.StringVar(&o.protocol, "rebalance-protocol", runtime.RebalanceCooperative, "rebalance protocol with -worker")
	flag.Parse()
	if o.worker {
		os.Exit(runWorker(o))
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "scalebench:", err)
		os.Exit(1)
	}
}

// Topics of the benchmark's application.
const (
	inputTopic  = "events"
	outputTopic = "counts"
)

// runWorker runs one counting worker until signalled.
func runWorker(o options) int {
	topo, err := benchkit.CountTopology(inputTopic, outputTopic)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cfg := runtime.DefaultConfig()
	cfg.ApplicationID, cfg.BootstrapServers, cfg.StateDir, cfg.HTTPAddr, cfg.InstanceID = o.app, o.bootstrap, o.stateDir, o.http, o.instance
	cfg.Client, cfg.StaticMembership, cfg.StandbyReplicas = runtime.ClientFranz, false, o.standbys
	cfg.AcceptableRecoveryLag, cfg.ProbingRebalanceInterval, cfg.RebalanceProtocol = o.acceptable, o.probing, o.protocol
	cfg.ShutdownTimeout = time.Minute
	if err := benchkit.Serve(cfg, topo, nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
