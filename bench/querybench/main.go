// Command querybench measures store queries against workers that are
// processing: on one embedded broker, two workers count words (four
// tasks, two each) while a producer keeps writing words, and eight
// clients query the counts concurrently, three ways in turn: a get asked
// of the worker holding the key, a get asked of the other worker (which
// forwards it), and a get with a causal clock the store has already
// caught up with. It reports each way's p50 and p99 latency and the
// pipeline's throughput meanwhile. `make bench` runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/dsl"
	"github.com/causeway-stream/causeway/framework/query"
	"github.com/causeway-stream/causeway/framework/serde"
	"github.com/causeway-stream/causeway/runtime"
	"github.com/causeway-stream/causeway/runtime/embedded"
)

const (
	partitions = 4
	words      = 100
	clients    = 8
	store      = "word-counts"
)

func main() {
	perClient := flag.Int("queries", 200, "queries per client and way")
	rate := flag.Int("rate", 2000, "words written per second while the queries run")
	out := flag.String("out", "bench-results", "directory for query.md")
	flag.Parse()
	if err := run(*perClient, *rate, *out); err != nil {
		fmt.Fprintln(os.Stderr, "querybench:", err)
		os.Exit(1)
	}
}

type way struct {
	name string
	ask  func(ctx context.Context, word string) error
}

// bench is the two workers and a query client of each.
type bench struct {
	workers []*runtime.StreamThread
	clients []*query.Client
	// processor is the name of the processor that counts (the DSL names
	// it after its aggregation), whose tasks hold the counts.
	processor string
	stops     []func()
}

func run(perClient, rate int, out string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	b, err := embedded.Start()
	if err != nil {
		return err
	}
	defer b.Close()
	bn := &bench{}
	defer bn.stop()
	if err := bn.start(ctx, b.Addr()); err != nil {
		return err
	}
	if err := bn.awaitShared(ctx); err != nil {
		return err
	}
	p, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.ProducerLinger(5*time.Millisecond)) // murmur2, as queries find keys
	if err != nil {
		return err
	}
	defer p.Close()
	clocks, err := writeEveryWord(ctx, p)
	if err != nil {
		return err
	}
	if err := bn.awaitReadable(ctx, clocks); err != nil {
		return err
	}
	// The pipeline keeps running while the queries do.
	l := startLoad(ctx, p, rate)
	defer l.stop()
	var report strings.Builder
	fmt.Fprintf(&report, "Store queries on two workers counting words while %d words/s are written; %d clients, %d queries each per way.\n\n",
		rate, clients, perClient)
	fmt.Fprintf(&report, "| way | p50 ms | p99 ms | queries/s | pipeline words/s meanwhile |\n|---|---:|---:|---:|---:|\n")
	for _, wy := range bn.ways(clocks) {
		line, err := measureWay(ctx, wy, perClient, &l.written)
		if err != nil {
			return err
		}
		report.WriteString(line)
		fmt.Print(line)
	}
	l.stop()
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	fmt.Println()
	fmt.Print(report.String())
	return os.WriteFile(filepath.Join(out, "query.md"), []byte(report.String()), 0o644)
}

// start starts two workers counting words on the broker at addr, each
// with an HTTP server to query.
func (bn *bench) start(ctx context.Context, addr string) error {
	text := serde.Codec[string, string]{Key: serde.String(), Value: serde.String()}
	db := dsl.NewBuilder("counter")
	dsl.From(db, "words", text).GroupByKey().Count(store).ToStream().To("counts")
	topo, err := db.Build()
	if err != nil {
		return err
	}
	if ps := topo.Processors(); len(ps) != 1 {
		return fmt.Errorf("want one processor, the topology has %d", len(ps))
	}
	bn.processor = topo.Processors()[0].Name
	for i := range 2 {
		dir, err := os.MkdirTemp("", "querybench-")
		if err != nil {
			return err
		}
		bn.stops = append(bn.stops, func() { os.RemoveAll(dir) })
		cfg := runtime.DefaultConfig()
		cfg.ApplicationID, cfg.BootstrapServers, cfg.StateDir, cfg.HTTPAddr = "counter", addr, dir, ""
		cfg.InstanceID, cfg.CreateTopics, cfg.DefaultPartitions = fmt.Sprint("worker-", i), true, partitions
		w, err := runtime.NewStreamThread(cfg, topo, zap.NewNop(), nil)
		if err != nil {
			return err
		}
		if err := w.Start(ctx); err != nil {
			return err
		}
		bn.stops = append(bn.stops, func() { w.Stop(context.Background()) }) //nolint:errcheck // the bench is over
		srv := runtime.NewServer("127.0.0.1:0", w, zap.NewNop())
		if err := srv.Start(ctx); err != nil {
			return err
		}
		bn.stops = append(bn.stops, func() { srv.Stop(context.Background()) }) //nolint:errcheck // the bench is over
		bn.workers = append(bn.workers, w)
		bn.clients = append(bn.clients, query.NewClient("http://"+srv.Addr()))
	}
	return nil
}

// stop stops what start started, the last first.
func (bn *bench) stop() {
	for i := len(bn.stops) - 1; i >= 0; i-- {
		bn.stops[i]()
	}
	bn.stops = nil
}

// owner returns the index of the worker holding word's task, or -1.
func (bn *bench) owner(word string) int {
	id := fmt.Sprint(bn.processor, "/", framework.PartitionFor([]byte(word), partitions))
	for i, w := range bn.workers {
		for _, ts := range w.Status().Tasks {
			if ts.ID == id {
				return i
			}
		}
	}
	return -1
}

// awaitShared waits until both workers hold tasks and are ready.
func (bn *bench) awaitShared(ctx context.Context) error {
	for {
		w := bn.workers
		if bn.owner("w0") >= 0 && len(w[0].Status().Tasks) > 0 && len(w[1].Status().Tasks) > 0 && w[0].Ready() && w[1].Ready() {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("the workers never shared the tasks: %w", ctx.Err())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// writeEveryWord writes one record of every word, and returns for each a
// clock that the causal queries carry once it is committed.
func writeEveryWord(ctx context.Context, p *kgo.Client) (map[string]causal.Clock, error) {
	clocks := map[string]causal.Clock{}
	for i := range words {
		word := fmt.Sprint("w", i)
		r := &kgo.Record{Topic: "words", Key: []byte(word), Value: []byte(word)}
		if err := p.ProduceSync(ctx, r).FirstErr(); err != nil {
			return nil, err
		}
		var err error
		if clocks[word], err = causal.NewClock(causal.Entry{Channel: causal.Channel{Topic: r.Topic, Partition: r.Partition},
			Offset: r.Offset}); err != nil {
			return nil, err
		}
	}
	return clocks, nil
}

// awaitReadable waits until every word is counted and its owner known to
// both workers.
func (bn *bench) awaitReadable(ctx context.Context, clocks map[string]causal.Clock) error {
	for _, c := range bn.clients {
		for word, clock := range clocks {
			for {
				_, found, err := query.Get(ctx, c, store, word, serde.String(), serde.Int64(), query.After(clock, time.Minute))
				if err == nil && found {
					break
				}
				if ctx.Err() != nil {
					return fmt.Errorf("%s never readable: %v", word, err)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
	return nil
}

// load writes words at a steady rate until stopped.
type load struct {
	written atomic.Int64
	done    chan struct{}
	wg      sync.WaitGroup
	once    sync.Once
}

func startLoad(ctx context.Context, p *kgo.Client, rate int) *load {
	l := &load{done: make(chan struct{})}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		tick := time.NewTicker(time.Second / time.Duration(max(rate/100, 1)))
		defer tick.Stop()
		for i := 0; ; {
			select {
			case <-l.done:
				return
			case <-tick.C:
			}
			for range 100 {
				word := fmt.Sprint("w", i%words)
				i++
				p.Produce(ctx, &kgo.Record{Topic: "words", Key: []byte(word), Value: []byte(word)}, func(_ *kgo.Record, err error) {
					if err == nil {
						l.written.Add(1)
					}
				})
			}
		}
	}()
	return l
}

func (l *load) stop() {
	l.once.Do(func() { close(l.done) })
	l.wg.Wait()
}

// ways are the three ways of asking that the bench compares.
func (bn *bench) ways(clocks map[string]causal.Clock) []way {
	return []way{
		{"get, asked of the worker holding the key", func(ctx context.Context, word string) error {
			_, _, err := query.Get(ctx, bn.clients[bn.owner(word)], store, word, serde.String(), serde.Int64())
			return err
		}},
		{"get, asked of the other worker (forwarded)", func(ctx context.Context, word string) error {
			_, _, err := query.Get(ctx, bn.clients[1-bn.owner(word)], store, word, serde.String(), serde.Int64())
			return err
		}},
		{"causal get, clock already caught up with", func(ctx context.Context, word string) error {
			_, _, err := query.Get(ctx, bn.clients[bn.owner(word)], store, word, serde.String(), serde.Int64(), query.After(clocks[word], time.Minute))
			return err
		}},
	}
}

// measureWay runs perClient queries from each client the way wy asks, and
// returns the report's line for it.
func measureWay(ctx context.Context, wy way, perClient int, written *atomic.Int64) (string, error) {
	var mu sync.Mutex
	var lat []time.Duration
	var failed atomic.Int64
	before, began := written.Load(), time.Now()
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for q := range perClient {
				word := fmt.Sprint("w", (c*perClient+q)%words)
				t0 := time.Now()
				if err := wy.ask(ctx, word); err != nil {
					failed.Add(1)
					continue
				}
				d := time.Since(t0)
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	took := time.Since(began)
	if f := failed.Load(); f > 0 {
		return "", fmt.Errorf("%s: %d queries failed", wy.name, f)
	}
	slices.Sort(lat)
	pct := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Microseconds()) / 1000 }
	return fmt.Sprintf("| %s | %.1f | %.1f | %.0f | %.0f |\n", wy.name, pct(0.50), pct(0.99),
		float64(len(lat))/took.Seconds(), float64(written.Load()-before)/took.Seconds()), nil
}
