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

func run(perClient, rate int, out string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	b, err := embedded.Start()
	if err != nil {
		return err
	}
	defer b.Close()
	text := serde.Codec[string, string]{Key: serde.String(), Value: serde.String()}
	db := dsl.NewBuilder("counter")
	dsl.From(db, "words", text).GroupByKey().Count(store).ToStream().To("counts")
	topo, err := db.Build()
	if err != nil {
		return err
	}
	var workers []*runtime.Worker
	var clientsOf []*query.Client
	for i := range 2 {
		dir, err := os.MkdirTemp("", "querybench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		cfg := runtime.DefaultConfig()
		cfg.ApplicationID, cfg.BootstrapServers, cfg.StateDir, cfg.HTTPAddr = "counter", b.Addr(), dir, ""
		cfg.InstanceID, cfg.CreateTopics, cfg.DefaultPartitions = fmt.Sprint("worker-", i), true, partitions
		w, err := runtime.NewWorker(cfg, topo, zap.NewNop(), nil)
		if err != nil {
			return err
		}
		if err := w.Start(ctx); err != nil {
			return err
		}
		defer w.Stop(context.Background()) //nolint:errcheck // the bench is over
		srv := runtime.NewServer("127.0.0.1:0", w, zap.NewNop())
		if err := srv.Start(ctx); err != nil {
			return err
		}
		defer srv.Stop(context.Background()) //nolint:errcheck // the bench is over
		workers = append(workers, w)
		clientsOf = append(clientsOf, query.NewClient("http://"+srv.Addr()))
	}
	owner := func(word string) int {
		id := fmt.Sprint("words/", framework.PartitionFor([]byte(word), partitions))
		for i, w := range workers {
			for _, ts := range w.Status().Tasks {
				if ts.ID == id {
					return i
				}
			}
		}
		return -1
	}
	for {
		if owner("w0") >= 0 && len(workers[0].Status().Tasks) > 0 && len(workers[1].Status().Tasks) > 0 &&
			workers[0].Ready() && workers[1].Ready() {
			break
		}
		if ctx.Err() != nil {
			return fmt.Errorf("the workers never shared the tasks: %w", ctx.Err())
		}
		time.Sleep(100 * time.Millisecond)
	}

	p, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.ProducerLinger(5*time.Millisecond)) // murmur2, as queries find keys
	if err != nil {
		return err
	}
	defer p.Close()
	topic := "words"
	// One record of every word first, with a clock for each that the
	// causal queries carry once it is committed.
	clocks := map[string]causal.Clock{}
	for i := range words {
		word := fmt.Sprint("w", i)
		r := &kgo.Record{Topic: topic, Key: []byte(word), Value: []byte(word)}
		if err := p.ProduceSync(ctx, r).FirstErr(); err != nil {
			return err
		}
		if clocks[word], err = causal.NewClock(causal.Entry{Channel: causal.Channel{Topic: topic, Partition: r.Partition},
			Offset: r.Offset}); err != nil {
			return err
		}
	}
	// Every word counted and its owner known to both workers.
	for _, c := range clientsOf {
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

	// The pipeline keeps running while the queries do.
	stop := make(chan struct{})
	var written atomic.Int64
	var loadDone sync.WaitGroup
	loadDone.Add(1)
	go func() {
		defer loadDone.Done()
		tick := time.NewTicker(time.Second / time.Duration(max(rate/100, 1)))
		defer tick.Stop()
		for i := 0; ; {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			for range 100 {
				word := fmt.Sprint("w", i%words)
				i++
				p.Produce(ctx, &kgo.Record{Topic: topic, Key: []byte(word), Value: []byte(word)}, func(_ *kgo.Record, err error) {
					if err == nil {
						written.Add(1)
					}
				})
			}
		}
	}()

	ways := []way{
		{"get, asked of the worker holding the key", func(ctx context.Context, word string) error {
			_, _, err := query.Get(ctx, clientsOf[owner(word)], store, word, serde.String(), serde.Int64())
			return err
		}},
		{"get, asked of the other worker (forwarded)", func(ctx context.Context, word string) error {
			_, _, err := query.Get(ctx, clientsOf[1-owner(word)], store, word, serde.String(), serde.Int64())
			return err
		}},
		{"causal get, clock already caught up with", func(ctx context.Context, word string) error {
			_, _, err := query.Get(ctx, clientsOf[owner(word)], store, word, serde.String(), serde.Int64(), query.After(clocks[word], time.Minute))
			return err
		}},
	}
	var report strings.Builder
	fmt.Fprintf(&report, "Store queries on two workers counting words while %d words/s are written; %d clients, %d queries each per way.\n\n",
		rate, clients, perClient)
	fmt.Fprintf(&report, "| way | p50 ms | p99 ms | queries/s | pipeline words/s meanwhile |\n|---|---:|---:|---:|---:|\n")
	for _, wy := range ways {
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
			return fmt.Errorf("%s: %d queries failed", wy.name, f)
		}
		slices.Sort(lat)
		pct := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Microseconds()) / 1000 }
		line := fmt.Sprintf("| %s | %.1f | %.1f | %.0f | %.0f |\n", wy.name, pct(0.50), pct(0.99),
			float64(len(lat))/took.Seconds(), float64(written.Load()-before)/took.Seconds())
		report.WriteString(line)
		fmt.Print(line)
	}
	close(stop)
	loadDone.Wait()
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	fmt.Println()
	fmt.Print(report.String())
	return os.WriteFile(filepath.Join(out, "query.md"), []byte(report.String()), 0o644)
}
