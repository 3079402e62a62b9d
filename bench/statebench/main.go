// Command statebench measures what keeping state costs and how fast it
// comes back, side by side in one run on one standalone broker: a worker
// counting distinct keys (16-byte keys, 1-byte values) with its store on
// Pebble and with it in memory, at several key counts. For each it
// measures the processing rate, the worker's memory after processing, the
// restart after a clean stop until the worker is ready, and the full
// restore after the state dir is lost, against a plain read of the same
// changelog topic. `make bench-state` runs it; docs/benchmarks.md explains
// the results.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/causeway-stream/causeway/bench/benchkit"
	"github.com/causeway-stream/causeway/runtime"
	"github.com/causeway-stream/causeway/runtime/embedded"
)

type options struct {
	keys       []int
	partitions int
	out        string
	// The helper modes: the broker, and the worker under test.
	brokerOnly  bool
	brokerReady string
	worker      bool
	bootstrap   string
	app         string
	input       string
	stateDir    string
	stores      string
	httpAddr    string
}

func main() {
	var o options
	keys := "1000000,5000000"
	flag.StringVar(&keys, "keys", keys, "comma-separated key counts")
	flag.IntVar(&o.partitions, "partitions", 4, "partitions of the input topic")
	flag.StringVar(&o.out, "out", "bench-results", "directory for state.md, state.json and state.png")
	flag.BoolVar(&o.brokerOnly, "broker-only", false, "run only the broker (used by the benchmark itself)")
	flag.StringVar(&o.brokerReady, "broker-ready", "", "file to write the broker address to with -broker-only")
	flag.BoolVar(&o.worker, "worker", false, "run only the counting worker (used by the benchmark itself)")
	flag.StringVar(&o.bootstrap, "bootstrap", "", "broker address with -worker")
	flag.StringVar(&o.app, "app", "", "application id with -worker")
	flag.StringVar(&o.input, "input", "", "input topic with -worker")
	flag.StringVar(&o.stateDir, "state-dir", "", "state dir with -worker")
	flag.StringVar(&o.stores, "stores", "", "store backend with -worker; alone, the backend to measure (default both)")
	flag.StringVar(&o.httpAddr, "http-addr", "", "HTTP address with -worker")
	flag.Parse()
	switch {
	case o.brokerOnly:
		os.Exit(runBroker(o))
	case o.worker:
		os.Exit(runWorker(o))
	}
	for _, k := range strings.Split(keys, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(k))
		if err != nil || n <= 0 {
			fmt.Fprintf(os.Stderr, "statebench: bad key count %q\n", k)
			os.Exit(2)
		}
		o.keys = append(o.keys, n)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "statebench:", err)
		os.Exit(1)
	}
}

// runBroker serves the embedded broker in this process until its parent
// goes away or it is signalled.
// abortApp prefixes the application ids of the abort runs: the broker
// fails some of their changelog writes.
const abortApp = "aborts-"

// abortEvery and maxAborts shape the faults of an abort run: one in every
// abortEvery produce requests to its store changelog fails with an error
// that aborts the transaction, maxAborts times in all.
const (
	abortEvery = 40
	maxAborts  = 8
)

func runBroker(o options) int {
	seen, faulted := 0, 0
	// Runs on the cluster's goroutine: no lock needed.
	abortSome := func(req kmsg.Request) bool {
		produce, ok := req.(*kmsg.ProduceRequest)
		if !ok || faulted >= maxAborts {
			return false
		}
		for _, t := range produce.Topics {
			if strings.HasPrefix(t.Topic, abortApp) && strings.HasSuffix(t.Topic, "-counts-changelog") {
				if seen++; seen%abortEvery == 0 {
					faulted++
					return true
				}
				return false
			}
		}
		return false
	}
	b, err := embedded.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer b.Close()
	b.Cluster().Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.InvalidRecord, Count: -1, When: abortSome})
	if err := os.WriteFile(o.brokerReady, []byte(b.Addr()), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	benchkit.WaitForEnd()
	return 0
}

// runWorker runs the counting worker until signalled.
func runWorker(o options) int {
	if path := os.Getenv("STATEBENCH_WORKER_CPUPROFILE"); path != "" {
		f, err := os.Create(path + "." + strconv.Itoa(os.Getpid()))
		if err == nil && pprof.StartCPUProfile(f) == nil {
			defer pprof.StopCPUProfile()
		}
	}
	topo, err := benchkit.CountTopology(o.input, "")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cfg := runtime.DefaultConfig()
	cfg.ApplicationID, cfg.BootstrapServers, cfg.StateDir, cfg.Stores, cfg.HTTPAddr = o.app, o.bootstrap, o.stateDir, o.stores, o.httpAddr
	cfg.InstanceID = "bench"
	// Fetches of 8 MiB (1 MiB a partition) and a prefetch queue of 32 MiB
	// instead of the worker's 64 MiB, 4 MiB and 256 MiB, so that the memory
	// measured is the state's, not the fetch buffers librdkafka keeps
	// while any of their records waits in its queue (docs/benchmarks.md).
	cfg.Kafka = map[string]string{"queued.max.messages.kbytes": "32768", "queued.min.messages": "10000",
		"fetch.max.bytes": "8388608", "max.partition.fetch.bytes": "1048576"}
	cfg.ShutdownTimeout = time.Minute
	atEnd := func() {
		if os.Getenv("STATEBENCH_WORKER_MEMSTATS") != "" {
			var ms goruntime.MemStats
			goruntime.ReadMemStats(&ms)
			fmt.Fprintf(os.Stderr, "worker %d: go sys %d MiB, heap sys %d MiB, heap inuse %d MiB, heap released %d MiB, stacks %d MiB\n", os.Getpid(),
				ms.Sys>>20, ms.HeapSys>>20, ms.HeapInuse>>20, ms.HeapReleased>>20, ms.StackSys>>20)
			if b, err := os.ReadFile("/proc/self/status"); err == nil {
				for _, l := range strings.Split(string(b), "\n") {
					if strings.HasPrefix(l, "Rss") || strings.HasPrefix(l, "VmRSS") {
						fmt.Fprintln(os.Stderr, "  ", l)
					}
				}
			}
		}
		if path := os.Getenv("STATEBENCH_WORKER_HEAPPROFILE"); path != "" {
			if f, err := os.Create(path + "." + strconv.Itoa(os.Getpid())); err == nil {
				_ = pprof.WriteHeapProfile(f)
				f.Close()
			}
		}
	}
	if err := benchkit.Serve(cfg, topo, atEnd); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func startBroker() (addr string, stop func(), err error) {
	ready, err := os.CreateTemp("", "statebench-broker-")
	if err != nil {
		return "", nil, err
	}
	ready.Close()
	os.Remove(ready.Name())
	cmd, stdin, err := benchkit.Helper("-broker-only", "-broker-ready", ready.Name())
	if err != nil {
		return "", nil, err
	}
	stop = func() {
		stdin.Close()
		_ = cmd.Wait()
		os.Remove(ready.Name())
	}
	for range 300 {
		if b, err := os.ReadFile(ready.Name()); err == nil && len(b) > 0 {
			return string(b), stop, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	stop()
	return "", nil, errors.New("the broker did not start")
}

// workerProc is one run of the counting worker.
type workerProc struct {
	cmd   *exec.Cmd
	stdin io.Closer
	http  string
}

func startWorker(addr, app, input, state, stores string) (*workerProc, error) {
	port, err := benchkit.FreePort()
	if err != nil {
		return nil, err
	}
	httpAddr := "127.0.0.1:" + strconv.Itoa(port)
	cmd, stdin, err := benchkit.Helper("-worker", "-bootstrap", addr, "-app", app, "-input", input, "-state-dir", state, "-stores", stores, "-http-addr", httpAddr)
	if err != nil {
		return nil, err
	}
	return &workerProc{cmd: cmd, stdin: stdin, http: httpAddr}, nil
}

// stop stops the worker cleanly and waits for it.
func (w *workerProc) stop() error {
	if err := w.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	err := w.cmd.Wait()
	w.stdin.Close()
	return err
}

// rss is the worker's resident memory in bytes.
func (w *workerProc) rss() (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", w.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmRSS")
}

// readAll reads every committed record of topic once, as a plain consumer
// would, and returns how many it read. Control records are kept only to
// see where each partition ends.
func readAll(ctx context.Context, addr, topic string) (int, error) {
	adm, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return 0, err
	}
	ends, err := kadm.NewClient(adm).ListEndOffsets(ctx, topic)
	adm.Close()
	if err != nil {
		return 0, err
	}
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
		}
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords(), kgo.FetchMaxBytes(64<<20))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	n := 0
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return n, err
		}
		fs.EachRecord(func(r *kgo.Record) {
			if !r.Attrs.IsControl() {
				n++
			}
			if end, ok := want[r.Partition]; ok && r.Offset+1 >= end {
				delete(want, r.Partition)
			}
		})
	}
	return n, nil
}

func dirSize(dir string) int64 {
	var n int64
	_ = filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			n += info.Size()
		}
		return nil
	})
	return n
}
