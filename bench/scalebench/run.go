package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/causeway-stream/causeway/bench/benchkit"
	"github.com/causeway-stream/causeway/runtime"
	"github.com/causeway-stream/causeway/runtime/embedded"
)

// scenario is one change to measure.
type scenario struct {
	ID, Name string
	// Add adds a worker; otherwise one is killed with SIGKILL.
	Add        bool
	Standbys   int
	Acceptable int64
	// Eager rebalances eagerly, as workers did before cooperative
	// rebalancing: the comparison.
	Eager bool
}

var scenarios = []scenario{
	{ID: "add", Name: "add a worker (warm-ups)", Add: true, Acceptable: 10_000},
	{ID: "add-now", Name: "add a worker, tasks move at once", Add: true, Acceptable: -1},
	{ID: "add-eager", Name: "add a worker, eager rebalancing", Add: true, Acceptable: -1, Eager: true},
	{ID: "kill-standby", Name: "SIGKILL a worker, 1 standby", Standbys: 1, Acceptable: 10_000},
	{ID: "kill", Name: "SIGKILL a worker, no standby", Acceptable: 10_000},
}

func scenarioIDs() []string {
	var out []string
	for _, s := range scenarios {
		out = append(out, s.ID)
	}
	return out
}

// result is what one scenario measured.
type result struct {
	Scenario scenario
	// Moved are the partitions whose task changed worker (or died with
	// it); the gaps are the longest stops of those and of the others.
	Moved                 []int32
	GapMoved, GapUnmoved  time.Duration
	GapByPartition        map[int32]time.Duration
	Restored, Changelog   int64
	BacklogSeconds        float64
	Series                []bucket
	EventAt, InputStopped time.Duration
}

// bucket is the committed outputs read in one quarter second, of moved
// and unmoved partitions.
type bucket struct {
	At             time.Duration
	Moved, Unmoved int
}

// worker is one worker process.
type worker struct {
	cmd   *exec.Cmd
	stdin io.Closer
	http  string
}

func startWorker(o options, addr, app string, i int, s scenario) (*worker, error) {
	port, err := benchkit.FreePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "scalebench-")
	if err != nil {
		return nil, err
	}
	w := &worker{http: "127.0.0.1:" + strconv.Itoa(port)}
	protocol := runtime.RebalanceCooperative
	if s.Eager {
		protocol = runtime.RebalanceEager
	}
	w.cmd, w.stdin, err = benchkit.Helper("-worker", "-bootstrap", addr, "-app", app, "-state-dir", dir, "-http-addr", w.http,
		"-instance", fmt.Sprintf("w%d", i), "-standby-replicas", strconv.Itoa(s.Standbys),
		"-acceptable-recovery-lag", strconv.FormatInt(s.Acceptable, 10), "-probing-rebalance-interval", "10s",
		"-rebalance-protocol", protocol)
	return w, err
}

func (w *worker) stop() {
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	_ = w.cmd.Wait()
	w.stdin.Close()
}

func (w *worker) kill() {
	_ = w.cmd.Process.Kill()
	_ = w.cmd.Wait()
	w.stdin.Close()
}

// status reads the worker's /status.
func (w *worker) status() (runtime.Status, error) {
	var st runtime.Status
	resp, err := http.Get("http://" + w.http + "/status")
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// partitions are the input partitions the worker's tasks read.
func (w *worker) partitions() []int32 {
	st, err := w.status()
	if err != nil {
		return nil
	}
	var out []int32
	for _, t := range st.Tasks {
		if _, p, ok := strings.Cut(t.ID, "/"); ok {
			if n, err := strconv.Atoi(p); err == nil {
				out = append(out, int32(n))
			}
		}
	}
	return out
}

func run(o options) error {
	var rs []result
	for _, id := range strings.Split(o.scenarios, ",") {
		i := slices.IndexFunc(scenarios, func(s scenario) bool { return s.ID == id })
		if i < 0 {
			return fmt.Errorf("no scenario %q (have %v)", id, scenarioIDs())
		}
		fmt.Printf("%s:\n", scenarios[i].Name)
		r, err := measure(o, scenarios[i])
		if err != nil {
			return fmt.Errorf("%s: %w", scenarios[i].Name, err)
		}
		fmt.Printf("  moved %v: longest stop %v; the others %v; restored %d of %d changelog records\n",
			r.Moved, r.GapMoved.Round(time.Millisecond), r.GapUnmoved.Round(time.Millisecond), r.Restored, r.Changelog)
		rs = append(rs, r)
	}
	return report(o, rs)
}

// measure runs one scenario on a broker of its own.
func measure(o options, s scenario) (result, error) {
	r := result{Scenario: s, GapByPartition: map[int32]time.Duration{}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	b, err := embedded.Start()
	if err != nil {
		return r, err
	}
	defer b.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()))
	if err != nil {
		return r, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopics(ctx, int32(o.partitions), -1, nil, inputTopic, outputTopic); err != nil {
		return r, err
	}
	if err := benchkit.ProduceKeys(ctx, b.Addr(), inputTopic, o.keys); err != nil {
		return r, err
	}
	app := "scale-" + s.ID
	var ws []*worker
	defer func() {
		for _, w := range ws {
			if w.cmd.ProcessState == nil {
				w.stop()
			}
		}
	}()
	began := time.Now()
	for i := range o.workers {
		w, err := startWorker(o, b.Addr(), app, i, s)
		if err != nil {
			return r, err
		}
		ws = append(ws, w)
	}
	if err := waitCounted(ctx, adm, app, int64(o.keys)); err != nil {
		return r, err
	}
	r.BacklogSeconds = time.Since(began).Seconds()
	// Every task running: no restore of the start-up's moves still under
	// way to count as the change's.
	for _, w := range ws {
		if err := benchkit.WaitReady(w.http, 2*time.Minute); err != nil {
			return r, err
		}
	}
	if s.Standbys > 0 {
		waitStandbys(ws, o.partitions*s.Standbys)
	}
	before := restored(ws)

	reader, err := startReader(ctx, b.Addr())
	if err != nil {
		return r, err
	}
	feeding, stopFeed := context.WithCancel(ctx)
	fed := make(chan error, 1)
	go func() { fed <- feed(feeding, b.Addr(), o.keys, o.rate) }()
	start := time.Now()
	time.Sleep(o.event)
	var moved []int32
	r.EventAt = time.Since(start)
	if s.Add {
		w, err := startWorker(o, b.Addr(), app, len(ws), s)
		if err != nil {
			stopFeed()
			return r, err
		}
		ws = append(ws, w)
	} else {
		moved = ws[0].partitions()
		before -= restored(ws[:1])
		ws[0].kill()
	}
	time.Sleep(o.window - o.event)
	stopFeed()
	r.InputStopped = time.Since(start)
	if err := <-fed; err != nil && !errors.Is(err, context.Canceled) {
		return r, err
	}
	time.Sleep(3 * time.Second) // the last commits
	arrivals := reader.stop()
	if s.Add {
		moved = ws[len(ws)-1].partitions()
	}
	slices.Sort(moved)
	r.Moved = moved
	r.Restored = int64(restored(ws) - before)
	ends, err := adm.ListEndOffsets(ctx, app+"-counts-changelog")
	if err != nil {
		return r, err
	}
	ends.Each(func(l kadm.ListedOffset) { r.Changelog += l.Offset })
	r.gaps(arrivals, start, start.Add(r.InputStopped), o.partitions)
	return r, nil
}

// waitCounted waits until the group has committed every key's record.
func waitCounted(ctx context.Context, adm *kadm.Client, app string, n int64) error {
	last := time.Now()
	for {
		done, err := benchkit.Committed(ctx, adm, app, inputTopic)
		if err == nil && done >= n {
			return nil
		}
		if time.Since(last) > 10*time.Second {
			fmt.Printf("  counted %d of %d\n", done, n)
			last = time.Now()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// waitStandbys waits, up to five minutes, until the workers keep want
// standby copies, each with little to catch up.
func waitStandbys(ws []*worker, want int) {
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		have := 0
		for _, w := range ws {
			st, err := w.status()
			if err != nil {
				continue
			}
			for _, c := range st.Standbys {
				if c.Lag != nil && *c.Lag < 1000 {
					have++
				}
			}
		}
		if have >= want {
			return
		}
		time.Sleep(time.Second)
	}
	fmt.Printf("  the standbys did not all catch up within five minutes\n")
}

// restored is what the workers' restores have read so far.
func restored(ws []*worker) float64 {
	sum := 0.0
	for _, w := range ws {
		if w.cmd.ProcessState != nil {
			continue
		}
		if v, err := benchkit.MetricSum(w.http, "causeway_restore_records_total"); err == nil {
			sum += v
		}
	}
	return sum
}

// feed writes rate records a second, of keys drawn at random, until ctx
// is done.
func feed(ctx context.Context, addr string, keys, rate int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(inputTopic), kgo.ProducerLinger(2*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		for range max(1, rate/100) {
			cl.Produce(ctx, &kgo.Record{Key: benchkit.Key(rand.IntN(keys)), Value: []byte{'1'}}, nil)
		}
	}
}

// reader records when committed outputs arrive, by partition.
type reader struct {
	cancel   context.CancelFunc
	done     chan struct{}
	mu       sync.Mutex
	arrivals map[int32][]arrival
}

// arrival is n committed outputs of a partition, read at one moment.
type arrival struct {
	at time.Time
	n  int
}

func startReader(ctx context.Context, addr string) (*reader, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(outputTopic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()), kgo.FetchMaxWait(50*time.Millisecond))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	r := &reader{cancel: cancel, done: make(chan struct{}), arrivals: map[int32][]arrival{}}
	go func() {
		defer close(r.done)
		defer cl.Close()
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			now := time.Now()
			r.mu.Lock()
			fs.EachPartition(func(p kgo.FetchTopicPartition) {
				if len(p.Records) > 0 {
					r.arrivals[p.Partition] = append(r.arrivals[p.Partition], arrival{at: now, n: len(p.Records)})
				}
			})
			r.mu.Unlock()
		}
	}()
	return r, nil
}

func (r *reader) stop() map[int32][]arrival {
	r.cancel()
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.arrivals
}

// gaps finds each partition's longest stop between from and to, and the
// outputs over time, by quarter seconds.
func (r *result) gaps(arrivals map[int32][]arrival, from, to time.Time, partitions int) {
	const step = 250 * time.Millisecond
	r.Series = make([]bucket, int(to.Sub(from)/step)+1)
	for i := range r.Series {
		r.Series[i].At = time.Duration(i) * step
	}
	for p := range int32(partitions) {
		last, longest := from, time.Duration(0)
		for _, a := range arrivals[p] {
			if a.at.After(to) {
				break
			}
			longest = max(longest, a.at.Sub(last))
			last = a.at
			if i := int(a.at.Sub(from) / step); i >= 0 && i < len(r.Series) {
				if slices.Contains(r.Moved, p) {
					r.Series[i].Moved += a.n
				} else {
					r.Series[i].Unmoved += a.n
				}
			}
		}
		longest = max(longest, to.Sub(last))
		r.GapByPartition[p] = longest
		if slices.Contains(r.Moved, p) {
			r.GapMoved = max(r.GapMoved, longest)
		} else {
			r.GapUnmoved = max(r.GapUnmoved, longest)
		}
	}
}
