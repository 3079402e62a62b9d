//go:build cgo

package main

import (
	"context"
	"fmt"
	"os"
	goruntime "runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/causeway-stream/causeway/runtime"
)

// warmRecords is how many records each run starts with, to warm up.
const warmRecords = 2000

// stampExtraBytes is about how much longer Causeway's stamp on an output is
// than the input's clock in the pass-through runs (68.7–69.7 bytes against
// 58 in the reports): the stamp also names the task's input channel, a
// topic of a few characters with one partition and its offset.
const stampExtraBytes = 11

// settle is the pause before each run, for the previous one's after-effects
// to die down.
const settle = 2 * time.Second

// measure runs config once: a warm-up, a burst measured for throughput,
// allocations and CPU, then records at a steady rate for latency.
func measure(addr string, brokerPid int, config string, size, run, id int, o options) (result, error) {
	res := result{Config: config, ValueBytes: size, Run: run, Records: o.records}
	prefix := fmt.Sprintf("b%d", id)
	t := topics{in: prefix + "-in", in2: prefix + "-side", mid: prefix + "-mid", mid2: prefix + "-mid2", out: prefix + "-out", group: prefix,
		sideWritten: make([]int64, o.partitions), checkpoints: prefix + "-checkpoints"}
	twoHop := config == cfgTwoHop
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	names := topicNames(t, config)
	if err := createTopics(ctx, addr, o.partitions, names...); err != nil {
		return res, err
	}
	if _, err := produce(addr, &t, "warm-", warmRecords, size, o.partitions, twoHop, nil); err != nil {
		return res, err
	}
	dir, err := os.MkdirTemp("", "e2ebench-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	p, err := pipelineFor(config, addr, t, dir)
	if err != nil {
		return res, err
	}
	snaps := &burstSnapshots{p: p, brokerPid: brokerPid, profile: o.cpuProfile, config: config, size: size, run: run}
	defer snaps.endProfile()
	r, err := startReader(readerArgs{addr: addr, topic: t.out, partitions: o.partitions, warm: warmRecords, bulk: o.records, lat: o.latRecords,
		cpus: o.helperCPUs},
		snaps.after)
	if err != nil {
		return res, fmt.Errorf("start the output reader: %w", err)
	}
	defer r.kill()
	if err := p.start(ctx); err != nil {
		return res, err
	}
	// Warm up (group joined, clients connected), then the burst. The burst
	// is written in one transaction, so the pipelines (read_committed) see
	// none of it until it is all there: they meet it as a backlog, and the
	// load producer is idle while they are measured. Throughput is the
	// burst's size over the time from its commit to its last record
	// becoming visible at the output.
	if err := r.await(ctx, "warm-up", r.warmDone); err != nil {
		return res, err
	}
	start, err := produce(addr, &t, "", o.records, size, o.partitions, twoHop, func() { snaps.before(r.pid()) })
	if err != nil {
		return res, err
	}
	if err := r.await(ctx, "throughput", r.bulkDone); err != nil {
		return res, err
	}
	if err := produceSteadily(addr, t.in, size, o); err != nil {
		return res, err
	}
	if err := r.await(ctx, "latency", r.latDone); err != nil {
		return res, err
	}
	<-r.exited
	if r.exitErr != nil {
		return res, fmt.Errorf("output reader: %w", r.exitErr)
	}
	if err := p.stop(); err != nil {
		return res, err
	}
	// The broker keeps everything in memory: drop this run's topics so the
	// next run does not pay for them.
	if err := deleteTopics(ctx, addr, names...); err != nil {
		return res, err
	}
	res.fill(r, start, snaps.first, snaps.second)
	return res, nil
}

// topicNames lists the topics config's pipeline reads and writes.
func topicNames(t topics, config string) []string {
	names := []string{t.in, t.out}
	switch config {
	case cfgHandCP:
		names = append(names, t.checkpoints)
	case cfgTwoHop:
		names = append(names, t.in2, t.mid)
	case cfgThree:
		names = append(names, t.mid, t.mid2)
	}
	return names
}

// pipelineFor returns the pipeline config names, its state in dir.
func pipelineFor(config, addr string, t topics, dir string) (pipeline, error) {
	switch config {
	case cfgHand, cfgHandCP, cfgHandKey, cfgHandPad:
		h := &handLoop{addr: addr, t: t, checkpoints: config == cfgHandCP, byKey: config == cfgHandKey}
		if config == cfgHandPad {
			h.padHeader = stampExtraBytes
		}
		return h, nil
	case cfgFranz:
		return &franzLoop{addr: addr, t: t}, nil
	case cfgGateOff, cfgGateOn, cfgThreads, cfgOnKey, cfgTwoHop, cfgFused, cfgThree, cfgFranzOff, cfgFranzOn, cfgFranzOnKey:
		client := runtime.ClientLibrdkafka
		if config == cfgFranzOff || config == cfgFranzOn || config == cfgFranzOnKey {
			client = runtime.ClientFranz
		}
		w := &worker{addr: addr, t: t, gateOff: config == cfgGateOff || config == cfgFranzOff, twoHop: config == cfgTwoHop,
			byKey: config == cfgOnKey || config == cfgFranzOnKey, dir: dir, fused: config == cfgFused, three: config == cfgThree,
			threads: 1, client: client}
		if config == cfgThreads {
			w.threads = 2
		}
		return w, nil
	}
	return nil, fmt.Errorf("unknown configuration %q", config)
}

// snapshot is the allocations, commit time and CPU when the burst was
// committed to the input, or when its last record became visible at the
// output.
type snapshot struct {
	mem                    goruntime.MemStats
	commit                 float64
	client, broker, reader usage
}

// burstSnapshots takes the snapshots at either end of the burst; with
// -cpuprofile, the burst gets a profile of its own between them
// (burstProfile). The second comes from the reader's goroutine.
type burstSnapshots struct {
	p               pipeline
	brokerPid       int
	profile, config string
	size, run       int
	first, second   snapshot
	profMu          sync.Mutex
	stopProfile     func()
}

func (b *burstSnapshots) take(s *snapshot, readerPid int) {
	goruntime.ReadMemStats(&s.mem)
	s.commit = b.p.commitSeconds()
	s.client, s.broker, s.reader = processUsage(0), processUsage(b.brokerPid), processUsage(readerPid)
}

func (b *burstSnapshots) before(readerPid int) {
	b.take(&b.first, readerPid)
	if b.profile != "" {
		b.profMu.Lock()
		b.stopProfile = burstProfile(b.profile, b.config, b.size, b.run)
		b.profMu.Unlock()
	}
}

func (b *burstSnapshots) after(readerPid int) {
	b.endProfile()
	b.take(&b.second, readerPid)
}

func (b *burstSnapshots) endProfile() {
	b.profMu.Lock()
	defer b.profMu.Unlock()
	if b.stopProfile != nil {
		b.stopProfile()
		b.stopProfile = nil
	}
}

// await waits for done, the end of a phase of the run, and fails when the
// reader stops first or ctx ends.
func (r *reader) await(ctx context.Context, phase string, done chan struct{}) error {
	select {
	case <-done:
		return nil
	case <-r.exited:
		select {
		case <-done: // the reader's last report came with its exit
			return nil
		default:
		}
		return fmt.Errorf("%s phase: the output reader stopped: %v", phase, r.exitErr)
	case <-ctx.Done():
		return fmt.Errorf("%s phase: %w", phase, ctx.Err())
	}
}

// produceSteadily writes the latency phase's records into the running
// pipeline at a steady rate; they are timed from their produce timestamp
// to their visibility downstream.
func produceSteadily(addr, topic string, size int, o options) error {
	lp, err := newProducer(addr, 0)
	if err != nil {
		return err
	}
	tick := time.NewTicker(time.Second / time.Duration(o.latRate))
	defer tick.Stop()
	for i := range o.latRecords {
		<-tick.C
		part := int32(i % o.partitions)
		if err := lp.send(topic, part, []byte("lat-"+strconv.Itoa(i)), make([]byte, size), clockFor("", 0, 0), time.Now()); err != nil {
			return err
		}
	}
	return lp.close()
}

// fill sets the run's figures from what the reader saw from start on and
// the snapshots at either end of the burst.
func (res *result) fill(r *reader, start time.Time, before, after snapshot) {
	secs := r.last.Sub(start).Seconds()
	res.RecordsPerSec = float64(res.Records) / secs
	slices.Sort(r.latencies)
	res.P50Millis = r.latencies[len(r.latencies)/2]
	res.P99Millis = r.latencies[len(r.latencies)*99/100]
	res.HeaderBytes = float64(r.headerBytes) / float64(r.bulk)
	res.AllocsPerRecord = float64(after.mem.Mallocs-before.mem.Mallocs) / float64(res.Records)
	res.CommitShare = (after.commit - before.commit) / secs
	perRecord := func(n float64) float64 { return n / float64(res.Records) }
	res.ClientCPUMicros = perRecord((after.client.cpu - before.client.cpu).Seconds() * 1e6)
	res.BrokerCPUMicros = perRecord((after.broker.cpu - before.broker.cpu).Seconds() * 1e6)
	res.ReaderCPUMicros = perRecord((after.reader.cpu - before.reader.cpu).Seconds() * 1e6)
	res.ClientFaults = perRecord(float64(after.client.faults - before.client.faults))
	res.BrokerFaults = perRecord(float64(after.broker.faults - before.broker.faults))
}
