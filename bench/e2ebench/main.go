//go:build cgo

// Command e2ebench measures, in one run against one broker, what Causeway
// costs over a hand-written librdkafka transactional loop, and what causal
// delivery costs on top of that. It writes a JSON result file, a markdown
// table and a PNG chart. `make bench` runs it; docs/benchmarks.md explains
// the method. It measures librdkafka against franz-go, so it builds only
// with cgo.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/runtime/embedded"
)

// The configurations, in the order of the report.
const (
	cfgHand    = "hand-written librdkafka loop"
	cfgHandCP  = "hand-written loop + checkpoint writes"
	cfgHandKey = "hand-written loop, outputs placed by key"
	cfgHandPad = "hand-written loop, stamp-sized headers"
	cfgFranz   = "franz-go GroupTransactSession"
	cfgGateOff = "Causeway, gate off"
	cfgGateOn  = "Causeway, gate on"
	cfgThreads = "Causeway, gate on, 2 stream threads"
	cfgOnKey   = "Causeway, gate on, outputs placed by key"
	cfgTwoHop  = "Causeway, two hops, gate on"
	cfgFused   = "Causeway, three steps fused (DSL)"
	cfgThree   = "Causeway, three steps as three processors"
	// The same worker on the franz-go transport (--client franz).
	cfgFranzOff   = "Causeway on franz-go, gate off"
	cfgFranzOn    = "Causeway on franz-go, gate on"
	cfgFranzOnKey = "Causeway on franz-go, gate on, outputs placed by key"
)

var allConfigs = []string{cfgHand, cfgHandKey, cfgHandCP, cfgHandPad, cfgFranz, cfgGateOff, cfgGateOn, cfgThreads, cfgOnKey,
	cfgFranzOff, cfgFranzOn, cfgFranzOnKey, cfgTwoHop, cfgFused, cfgThree}

// configIDs are the short names -configs takes.
var configIDs = map[string]string{"hand": cfgHand, "handcp": cfgHandCP, "handkey": cfgHandKey, "handpad": cfgHandPad, "franz": cfgFranz, "off": cfgGateOff, "on": cfgGateOn,
	"zoff": cfgFranzOff, "zon": cfgFranzOn, "zonkey": cfgFranzOnKey, "threads": cfgThreads, "onkey": cfgOnKey, "twohop": cfgTwoHop,
	"fused": cfgFused, "three": cfgThree}

type options struct {
	records     int
	runs        int
	sizes       []int
	partitions  int
	latRecords  int
	latRate     int
	out         string
	configs     []string
	cpuProfile  string
	brokerProf  string
	from        string
	brokerOnly  bool
	reader      readerArgs
	brokerPort  int
	brokerReady string
	// segmentSize is the broker's log.segment.bytes.
	segmentSize int
	// pageFaultUs is what the first touch of a fresh page cost when the run
	// began (pageFaultMicros); it goes into the report.
	pageFaultUs float64
	// pin splits the CPUs between the pipeline's process and the other two
	// (cpuSplit); pipelineCPUs and helperCPUs are the halves.
	pin                      bool
	pipelineCPUs, helperCPUs []int
	// cpus is what a helper process (broker, reader) pins itself to.
	cpus string
}

// result is one measured run of one configuration.
type result struct {
	Config          string  `json:"config"`
	ValueBytes      int     `json:"value_bytes"`
	Run             int     `json:"run"`
	Records         int     `json:"records"`
	RecordsPerSec   float64 `json:"records_per_sec"`
	P50Millis       float64 `json:"p50_ms"`
	P99Millis       float64 `json:"p99_ms"`
	HeaderBytes     float64 `json:"header_bytes_per_record"`
	AllocsPerRecord float64 `json:"allocs_per_record"`
	CommitShare     float64 `json:"commit_time_share"`
	// CPU time per burst record, in microseconds, of the measuring process
	// (the pipeline, and the load producer, idle while the burst is timed)
	// and of the broker process.
	ClientCPUMicros float64 `json:"client_cpu_us_per_record"`
	BrokerCPUMicros float64 `json:"broker_cpu_us_per_record"`
	// The same for the output reader's process, which does the same work
	// for every configuration.
	ReaderCPUMicros float64 `json:"reader_cpu_us_per_record"`
	// Page faults per burst record of the measuring process and of the
	// broker: the first touch of memory the system has to hand out. See
	// pageFaultMicros for what one costs.
	ClientFaults float64 `json:"client_page_faults_per_record"`
	BrokerFaults float64 `json:"broker_page_faults_per_record"`
}

func main() {
	o := options{}
	var sizes, configs string
	flag.IntVar(&o.records, "records", 200_000, "records per throughput run")
	flag.IntVar(&o.runs, "runs", 3, "runs of every configuration, interleaved")
	flag.StringVar(&sizes, "sizes", "100,1000", "value sizes in bytes")
	flag.IntVar(&o.partitions, "partitions", 4, "partitions per topic")
	flag.IntVar(&o.latRecords, "latency-records", 3000, "records in the latency phase")
	flag.IntVar(&o.latRate, "latency-rate", 3000, "records per second in the latency phase")
	flag.StringVar(&o.out, "out", "bench-results", "directory for the result files")
	flag.StringVar(&configs, "configs", "hand,handkey,franz,off,on,onkey,zoff,zon,zonkey,twohop,fused,three", "configurations to run: hand, handkey (outputs placed by key), handcp (with checkpoint writes), handpad (headers as long as Causeway's stamps), franz, off, on, threads (gate on, --threads 2), onkey (outputs placed by key), zoff, zon and zonkey (off, on and onkey on the franz-go transport), twohop, fused (three stateless steps fused by the DSL), three (the same steps as three processors)")
	flag.StringVar(&o.brokerProf, "broker-cpuprofile", "", "write a CPU profile of the broker process to this file")
	flag.StringVar(&o.from, "from", "", "write the report from this earlier e2e.json instead of measuring")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the measured process during the timed bursts to this file (the load producer, busy before each burst, stays out of it)")
	flag.BoolVar(&o.brokerOnly, "broker-only", false, "run only the broker (used by the benchmark itself)")
	flag.BoolVar(&o.pin, "pin", false, "run the pipeline's process on half of the CPUs and the broker and output reader on the other half, so that the pipeline's own CPU sets its throughput")
	flag.StringVar(&o.cpus, "cpus", "", "CPUs this process runs on, comma-separated (used by the benchmark itself with -pin)")
	flag.IntVar(&o.segmentSize, "broker-segment-bytes", 1<<20, "the broker's log.segment.bytes: kfake keeps each partition's active segment in memory and grows it by doubling, so large segments make the broker copy, and fault in fresh pages, far more")
	flag.IntVar(&o.brokerPort, "broker-port", 0, "broker port with -broker-only")
	flag.StringVar(&o.brokerReady, "broker-ready", "", "file to write the broker address to with -broker-only")
	flag.BoolVar(&o.reader.only, "reader-only", false, "run only the output reader (used by the benchmark itself)")
	flag.StringVar(&o.reader.addr, "reader-addr", "", "broker address with -reader-only")
	flag.StringVar(&o.reader.topic, "reader-topic", "", "topic to follow with -reader-only")
	flag.IntVar(&o.reader.warm, "reader-warm", 0, "warm-up records to wait for with -reader-only")
	flag.IntVar(&o.reader.bulk, "reader-bulk", 0, "burst records to wait for with -reader-only")
	flag.IntVar(&o.reader.lat, "reader-lat", 0, "latency records to wait for with -reader-only")
	flag.Parse()
	if o.cpus != "" {
		cpus, err := parseCPUs(o.cpus)
		if err == nil {
			err = pinTo(cpus)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
	if o.brokerOnly {
		os.Exit(runBroker(o))
	}
	if o.reader.only {
		o.reader.partitions = o.partitions
		os.Exit(runReader(o.reader))
	}
	for _, s := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			fmt.Fprintf(os.Stderr, "bad size %q\n", s)
			os.Exit(2)
		}
		o.sizes = append(o.sizes, n)
	}
	for _, c := range strings.Split(configs, ",") {
		name, ok := configIDs[strings.TrimSpace(c)]
		if !ok {
			fmt.Fprintf(os.Stderr, "unknown configuration %q\n", c)
			os.Exit(2)
		}
		o.configs = append(o.configs, name)
	}
	if o.from != "" {
		if err := replot(o); err != nil {
			fmt.Fprintln(os.Stderr, "e2ebench:", err)
			os.Exit(1)
		}
		return
	}
	if o.pin {
		var err error
		if o.pipelineCPUs, o.helperCPUs, err = cpuSplit(); err == nil {
			err = pinTo(o.pipelineCPUs)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2ebench:", err)
			os.Exit(1)
		}
	}
	if err := run(o); err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "e2ebench:", err)
		os.Exit(1)
	}
}

// burstProfile starts a CPU profile of this process into its own file
// beside prefix, named for the configuration, value size and run, and
// returns what stops it. A failure to start is reported and leaves the run
// unprofiled. `go tool pprof` reads several such files at once.
func burstProfile(prefix, config string, size, run int) (stop func()) {
	slug := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, strings.ToLower(config))
	path := fmt.Sprintf("%s.%s.%dB.run%d", prefix, slug, size, run)
	if err := startCPUProfile(path); err != nil {
		fmt.Fprintln(os.Stderr, "e2ebench: burst profile:", err)
		return func() {}
	}
	return pprof.StopCPUProfile
}

// startCPUProfile starts this process's CPU profile into a new file at
// path; pprof.StopCPUProfile ends it.
func startCPUProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return fmt.Errorf("start CPU profile: %w", err)
	}
	return nil
}

// runBroker serves the embedded broker in this process until killed: the
// benchmark keeps the broker's own work out of the measured process.
func runBroker(o options) int {
	if o.brokerProf != "" {
		if err := startCPUProfile(o.brokerProf); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	b, err := embedded.Start(embedded.Port(o.brokerPort),
		embedded.KfakeOpts(kfake.BrokerConfigs(map[string]string{"log.segment.bytes": strconv.Itoa(o.segmentSize)})))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer b.Close()
	if err := os.WriteFile(o.brokerReady, []byte(b.Addr()), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	select {
	case <-sig:
	case <-parentGone():
	}
	return 0
}

// parentGone is closed when this process's standard input reaches its end.
// The benchmark's helper processes (broker, output reader) get a pipe from
// the measuring process as their input and write nothing to it, so this
// happens when the measuring process closes it or exits, however it exits:
// a helper never outlives the benchmark.
func parentGone() <-chan struct{} {
	gone := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(gone)
	}()
	return gone
}

// helperCommand is a helper process running this program with args, its
// standard error going to ours and its standard input a pipe that keeps it
// alive (see parentGone) until the returned closer is closed.
func helperCommand(args ...string) (*exec.Cmd, io.Closer, error) {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, err
	}
	return cmd, stdin, nil
}

func startBrokerProcess(o options) (addr string, pid int, stop func(), err error) {
	ready, err := os.CreateTemp("", "e2ebench-broker-")
	if err != nil {
		return "", 0, nil, err
	}
	ready.Close()
	os.Remove(ready.Name())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", 0, nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd, stdin, err := helperCommand("-broker-only", "-broker-port", strconv.Itoa(port), "-broker-ready", ready.Name(),
		"-broker-cpuprofile", o.brokerProf, "-broker-segment-bytes", strconv.Itoa(o.segmentSize), "-cpus", formatCPUs(o.helperCPUs))
	if err != nil {
		return "", 0, nil, err
	}
	cmd.Env = append(os.Environ(), "GODEBUG="+brokerGODEBUG())
	if err := cmd.Start(); err != nil {
		return "", 0, nil, err
	}
	stop = func() {
		_ = cmd.Process.Signal(syscall.SIGTERM) // it may have exited already
		_ = cmd.Wait()
		_ = stdin.Close()
		os.Remove(ready.Name())
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(ready.Name()); err == nil && len(b) > 0 {
			return string(b), cmd.Process.Pid, stop, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	return "", 0, nil, errors.New("the broker process did not start")
}

func run(o options) error {
	var err error
	if o.pageFaultUs, err = pageFaultMicros(); err != nil {
		return err
	}
	addr, brokerPid, stop, err := startBrokerProcess(o)
	if err != nil {
		return err
	}
	defer stop()
	fmt.Printf("broker at %s; %d records per run, values %v bytes, %d runs of %d configurations, interleaved; a page fault costs %.1f µs here\n",
		addr, o.records, o.sizes, o.runs, len(o.configs), o.pageFaultUs)
	var results []result
	id := 0
	shuffle := rand.New(rand.NewPCG(1, 2)) // fixed: the same orders every time
	// One value size at a time. The first run after a change of size ran
	// slower whatever it ran: the broker spent about twice its usual CPU
	// per record (not on page faults; where inside the broker is not
	// pinned down). With the sizes alternating inside each round, the first
	// configuration of every size block paid for it, and with the fixed
	// shuffle below the same configuration did so in most rounds. So each
	// size starts with a run that is not counted, as large as the counted
	// ones.
	for _, size := range o.sizes {
		id++
		if _, err := measure(addr, brokerPid, o.configs[0], size, 0, id, o); err != nil {
			return fmt.Errorf("warm-up run, %d bytes: %w", size, err)
		}
		fmt.Printf("  warm-up run at %d bytes done (not counted)\n", size)
		for r := 1; r <= o.runs; r++ {
			// A new order each round: with a plain rotation every
			// configuration would always follow the same one, and whatever a
			// run leaves behind (the broker's clean-up of its topics, a
			// client's last background work) would always land on the same
			// successor.
			order := slices.Clone(o.configs)
			shuffle.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
			for _, c := range order {
				time.Sleep(settle)
				id++
				res, err := measure(addr, brokerPid, c, size, r, id, o)
				if err != nil {
					return fmt.Errorf("%s, %d bytes, run %d: %w", c, size, r, err)
				}
				fmt.Printf("  run %d  %5dB  %-32s %9.0f rec/s  p50 %6.1f ms  p99 %6.1f ms  %5.1f B hdr  %6.1f allocs  %4.1f%% commit  cpu µs/rec %5.1f + %5.1f broker + %4.1f reader  faults/rec %.2f + %.2f broker\n",
					r, size, c, res.RecordsPerSec, res.P50Millis, res.P99Millis, res.HeaderBytes, res.AllocsPerRecord, 100*res.CommitShare,
					res.ClientCPUMicros, res.BrokerCPUMicros, res.ReaderCPUMicros, res.ClientFaults, res.BrokerFaults)
				results = append(results, res)
			}
		}
	}
	return report(o, results)
}

// clockFor builds the 8-entry clock the input records carry: claims on
// upstream topics no pipeline reads, plus, for the two-hop run, one claim
// on the side input that makes records wait for it.
func clockFor(sideTopic string, partition int32, sideOffset int64) []byte {
	var es []causal.Entry
	for i := range 8 {
		es = append(es, causal.Entry{Channel: causal.Channel{Topic: "upstream-" + strconv.Itoa(i/4), Partition: int32(i % 4)}, Offset: 1_000_000 + int64(i)})
	}
	if sideTopic != "" {
		es[7] = causal.Entry{Channel: causal.Channel{Topic: sideTopic, Partition: partition}, Offset: sideOffset}
	}
	c, err := causal.NewClock(es...)
	if err != nil {
		panic(err) // constant input
	}
	return causal.EncodeClock(c)
}

func createTopics(ctx context.Context, addr string, partitions int, names ...string) error {
	cm := kafka.ConfigMap{"bootstrap.servers": addr, "enable.metrics.push": false}
	admin, err := kafka.NewAdminClient(&cm)
	if err != nil {
		return err
	}
	defer admin.Close()
	var specs []kafka.TopicSpecification
	for _, n := range names {
		specs = append(specs, kafka.TopicSpecification{Topic: n, NumPartitions: partitions, ReplicationFactor: -1})
	}
	res, err := admin.CreateTopics(ctx, specs)
	if err != nil {
		return err
	}
	for _, r := range res {
		if r.Error.Code() != kafka.ErrNoError {
			return fmt.Errorf("create %s: %w", r.Topic, r.Error)
		}
	}
	return nil
}

func deleteTopics(ctx context.Context, addr string, names ...string) error {
	cm := kafka.ConfigMap{"bootstrap.servers": addr, "enable.metrics.push": false}
	admin, err := kafka.NewAdminClient(&cm)
	if err != nil {
		return err
	}
	defer admin.Close()
	res, err := admin.DeleteTopics(ctx, names)
	if err != nil {
		return fmt.Errorf("delete topics: %w", err)
	}
	for _, r := range res {
		if r.Error.Code() != kafka.ErrNoError {
			return fmt.Errorf("delete %s: %w", r.Topic, r.Error)
		}
	}
	return nil
}

type producer struct{ p *kafka.Producer }

func newProducer(addr string, linger int) (*producer, error) {
	cm := producerTuned(addr)
	cm["linger.ms"], cm["enable.idempotence"] = linger, true
	p, err := kafka.NewProducer(&cm)
	return &producer{p}, err
}

// newTxnProducer is newProducer with a transaction open.
func newTxnProducer(addr, id string) (*producer, error) {
	cm := producerTuned(addr)
	cm["linger.ms"], cm["transactional.id"] = 5, id
	kp, err := kafka.NewProducer(&cm)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := kp.InitTransactions(ctx); err != nil {
		kp.Close()
		return nil, err
	}
	if err := kp.BeginTransaction(); err != nil {
		kp.Close()
		return nil, err
	}
	return &producer{kp}, nil
}

// commit waits until every record sent is with the broker, calls before,
// and commits the transaction, returning when the commit began.
func (p *producer) commit(before func()) (time.Time, error) {
	if err := p.flush(); err != nil {
		return time.Time{}, err
	}
	before()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return start, p.p.CommitTransaction(ctx)
}

func (p *producer) send(topic string, partition int32, key, value, clock []byte, ts time.Time) error {
	msg := &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: partition}, Key: key, Value: value,
		Headers: []kafka.Header{{Key: causal.HeaderKey, Value: clock}}, Timestamp: ts}
	for {
		err := p.p.Produce(msg, nil)
		var ke kafka.Error
		if errors.As(err, &ke) && ke.Code() == kafka.ErrQueueFull {
			p.p.Flush(10)
			continue
		}
		return err
	}
}

func (p *producer) close() error {
	defer p.p.Close()
	return p.flush()
}

// flush waits, up to a minute, until every record sent is with the broker.
func (p *producer) flush() error {
	if n := p.p.Flush(60_000); n > 0 {
		return fmt.Errorf("%d records not delivered", n)
	}
	return nil
}

// produce writes n records with keys prefix+i, spread evenly over the
// partitions; for the two-hop run it first fills the side input that the
// records' clocks claim, so the claims name records that exist.
// produce writes n keyed records to the input (and, for the two-hop run,
// the side records they claim). With atCommit set it writes them in one
// transaction: it calls atCommit once everything is sent and returns the
// time the commit began.
func produce(addr string, t *topics, prefix string, n, size, partitions int, twoHop bool, atCommit func()) (time.Time, error) {
	var p *producer
	var err error
	if atCommit != nil {
		p, err = newTxnProducer(addr, t.group+"-load")
	} else {
		p, err = newProducer(addr, 5)
	}
	if err != nil {
		return time.Time{}, err
	}
	rng := rand.New(rand.NewPCG(uint64(size), 1))
	value := make([]byte, size)
	for i := range value {
		value[i] = byte('a' + rng.IntN(26))
	}
	per := (n + partitions - 1) / partitions
	side := ""
	base := make([]int64, partitions) // where this call's side records start
	if twoHop {
		side = t.in2
		for part := range partitions {
			base[part] = t.sideWritten[part]
			for j := range per/2 + 1 {
				if err := p.send(t.in2, int32(part), []byte(prefix+"s"+strconv.Itoa(j)), []byte("side"), clockFor("", 0, 0), time.Now()); err != nil {
					return time.Time{}, err
				}
				t.sideWritten[part]++
			}
		}
	}
	count := make([]int64, partitions)
	for i := range n {
		part := int32(i % partitions)
		// Record k of a partition claims side record k/2 of this call: the
		// claims walk through the side input as the records do.
		clock := clockFor(side, part, base[part]+count[part]/2)
		count[part]++
		if err := p.send(t.in, part, []byte(prefix+"k"+strconv.Itoa(i)), value, clock, time.Now()); err != nil {
			return time.Time{}, err
		}
	}
	if atCommit == nil {
		return time.Time{}, p.close()
	}
	start, err := p.commit(atCommit)
	if err != nil {
		return start, err
	}
	if twoHop {
		for part := range partitions {
			t.sideWritten[part]++ // the commit marker takes an offset
		}
	}
	return start, p.close()
}
