package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap/zapcore"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/examples/internal/demoworker"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/serde"
	"github.com/causeway-stream/causeway/operators"
	"github.com/causeway-stream/causeway/runtime"
	"github.com/causeway-stream/causeway/runtime/embedded"
)

// Regions the demo's users live in.
var Regions = []string{"americas", "apac", "emea"}

// demoOptions configure one demo run.
type demoOptions struct {
	users, views int
	// badEvery makes every n-th view not JSON (0: none).
	badEvery   int
	partitions int
	timeout    time.Duration
	client     string // the worker's Kafka client library
	seed       uint64
}

// window names one region's count window.
type window struct {
	Region string
	Start  time.Time
}

// demoResult is what a run wrote, counted independently, and read back.
type demoResult struct {
	Views, Bad int
	Expected   map[window]int64 // counted here, from what was written
	Counts     map[window]int64 // committed by the worker
	Repeats    int              // windows emitted more than once
	DeadLetter int              // records on the dead-letter topic
	Elapsed    time.Duration
}

// start is the time of the first view: windows are aligned to the epoch,
// so a round minute.
var start = time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)

func demo(topo *framework.Topology, args []string) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	var o demoOptions
	fs.IntVar(&o.users, "users", 30, "how many users view pages")
	fs.IntVar(&o.views, "views", 3000, "how many page views to write, over ten minutes of view time")
	fs.IntVar(&o.badEvery, "bad-every", 200, "make every n-th view not JSON, for the dead-letter topic (0: none)")
	fs.IntVar(&o.partitions, "partitions", 2, "partitions of the demo's topics")
	fs.DurationVar(&o.timeout, "timeout", 2*time.Minute, "give up after this long")
	fs.StringVar(&o.client, "client", runtime.DefaultConfig().Client, "the worker's Kafka client library: "+strings.Join(runtime.Clients(), " or "))
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the views' users, pages and jitter")
	if status, run := demoworker.ParseFlags(fs, args); !run {
		return status
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := runDemo(ctx, topo, o, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "\nclicks demo:", err)
		return 1
	}
	printSummary(os.Stdout, res)
	if m := res.mismatch(); m != "" {
		fmt.Fprintln(os.Stderr, "counts do not match:", m)
		return 1
	}
	return 0
}

// written is one record the demo writes: a view by its user, or a
// profile.
type written = demoworker.Keyed

// dataset makes the demo's profiles and views, and counts the views per
// region and window on its own. Views come in the order of their times,
// with a jitter of up to four seconds either way (so some arrive out of
// order, within the grace); every badEvery-th is not JSON. The closing
// views, one per region an hour later, move every task's stream time
// past the last window, so that all of them close; their own windows
// never close and are not counted.
func dataset(o demoOptions) (profiles map[string]string, views, closing []written, res demoResult) {
	rng := rand.New(rand.NewPCG(o.seed, 0))
	profiles = map[string]string{}
	for i := range o.users {
		profiles[fmt.Sprintf("user-%03d", i)] = Regions[i%len(Regions)]
	}
	res = demoResult{Expected: map[window]int64{}, Counts: map[window]int64{}}
	pages := []string{"/", "/search", "/cart", "/checkout", "/help"}
	step := 10 * time.Minute / time.Duration(max(o.views, 1))
	for i := range o.views {
		user := fmt.Sprintf("user-%03d", rng.IntN(o.users))
		if o.badEvery > 0 && i%o.badEvery == o.badEvery-1 {
			views = append(views, written{Key: user, Value: []byte(`{"page": "/", "at": `)})
			res.Bad++
			continue
		}
		at := start.Add(time.Duration(i)*step + time.Duration(rng.IntN(8001)-4000)*time.Millisecond)
		b, _ := json.Marshal(View{Page: pages[rng.IntN(len(pages))], At: at})
		views = append(views, written{Key: user, Value: b})
		res.Expected[window{profiles[user], at.Truncate(Window)}]++
		res.Views++
	}
	for i := range min(len(Regions), o.users) { // user i lives in Regions[i]
		b, _ := json.Marshal(View{Page: "/", At: start.Add(time.Hour)})
		closing = append(closing, written{Key: fmt.Sprintf("user-%03d", i), Value: b})
	}
	return profiles, views, closing, res
}

// runDemo starts the embedded broker, writes the profiles and then the
// views in one causal session (so a view is never joined before its
// user's profile, whichever topic the worker reads first), runs a worker
// and reads the closed windows back until every window is in.
func runDemo(ctx context.Context, topo *framework.Topology, o demoOptions, out io.Writer) (demoResult, error) {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	profiles, views, closing, res := dataset(o)
	fmt.Fprintf(out, "Starting the embedded broker; writing %d profiles and %d page views over ten minutes (%d not JSON)...\n",
		len(profiles), len(views), res.Bad)
	b, err := embedded.Start()
	if err != nil {
		return res, err
	}
	defer b.Close()
	began := time.Now()
	if err := write(ctx, b.Addr(), o.partitions, profiles, views); err != nil {
		return res, err
	}
	stop, err := demoworker.Start(ctx, topo, demoworker.Options{ApplicationID: demoApplication, BootstrapServers: b.Addr(),
		Client: o.client, Partitions: o.partitions, LogLevel: zapcore.ErrorLevel})
	if err != nil {
		return res, err
	}
	err = closeWindows(ctx, b.Addr(), res.Views, closing)
	if err == nil {
		err = readWindows(ctx, b.Addr(), &res)
	}
	res.Elapsed = time.Since(began)
	return res, errors.Join(err, stop())
}

// write creates the topics, then writes the profiles and the views in one
// causal session: every view carries a clock that covers every profile,
// so the worker joins no view before its user's profile, whichever topic
// it reads first.
func write(ctx context.Context, addr string, partitions int, profiles map[string]string, views []written) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ProducerLinger(2*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	for _, topic := range []string{ViewsTopic, ProfilesTopic, RegionViewsTopic, DeadLetterTopic} {
		if _, err := kadm.NewClient(cl).CreateTopic(ctx, int32(partitions), -1, nil, topic); err != nil {
			return fmt.Errorf("create topic %s: %w", topic, err)
		}
	}
	var session causal.Session
	rows := make([]written, 0, len(profiles))
	for _, u := range slices.Sorted(maps.Keys(profiles)) {
		b, _ := json.Marshal(Profile{Region: profiles[u]})
		rows = append(rows, written{Key: u, Value: b})
	}
	if err := demoworker.WriteAfter(ctx, cl, &session, ProfilesTopic, rows); err != nil {
		return err
	}
	return demoworker.WriteAfter(ctx, cl, &session, ViewsTopic, views)
}

// demoApplication is the demo worker's application id.
const demoApplication = "clicks-demo"

// closeWindows waits until every valid view has been joined and handed to
// the windows' repartition topic, then writes the closing views. Two join
// tasks feed each partition of that topic, each at its own pace, so a
// view written last may be handed on first: the closing views must wait
// for all of them, or the views behind them would be late.
func closeWindows(ctx context.Context, addr string, joined int, closing []written) error {
	topic := demoApplication + "-" + RegionViewsStore + "-repartition"
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ProducerLinger(time.Millisecond),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return err
	}
	defer cl.Close()
	for seen := 0; seen < joined; {
		if ctx.Err() != nil {
			return fmt.Errorf("%d of %d views joined: %w", seen, joined, ctx.Err())
		}
		if err := demoworker.PollOnce(ctx, cl, func(*kgo.Record) error { seen++; return nil }); err != nil {
			return err
		}
	}
	var session causal.Session
	return demoworker.WriteAfter(ctx, cl, &session, ViewsTopic, closing)
}

// readWindows reads the committed window counts and the dead letters
// until every expected window and every bad view is in.
func readWindows(ctx context.Context, addr string, res *demoResult) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(RegionViewsTopic, DeadLetterTopic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return err
	}
	defer cl.Close()
	keys := operators.WindowedKey(serde.String(), Window)
	for len(res.Counts) < len(res.Expected) || res.DeadLetter < res.Bad {
		if ctx.Err() != nil {
			return fmt.Errorf("read %d of %d windows and %d of %d dead letters: %w",
				len(res.Counts), len(res.Expected), res.DeadLetter, res.Bad, ctx.Err())
		}
		err := demoworker.PollOnce(ctx, cl, func(r *kgo.Record) error {
			if r.Topic == DeadLetterTopic {
				res.DeadLetter++
				return nil
			}
			w, err := keys.Deserialize(r.Key)
			if err != nil {
				return fmt.Errorf("window key at %s/%d@%d: %w", r.Topic, r.Partition, r.Offset, err)
			}
			n, err := serde.Int64().Deserialize(r.Value)
			if err != nil {
				return fmt.Errorf("count at %s/%d@%d: %w", r.Topic, r.Partition, r.Offset, err)
			}
			k := window{w.Key, w.Start.UTC()}
			if _, dup := res.Counts[k]; dup {
				res.Repeats++
			}
			res.Counts[k] = n
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func printSummary(out io.Writer, res demoResult) {
	fmt.Fprintf(out, "\n%-10s %7s %8s %9s\n", "region", "views", "windows", "busiest")
	for _, region := range Regions {
		var views, busiest int64
		windows := 0
		for w, n := range res.Counts {
			if w.Region == region {
				views += n
				busiest = max(busiest, n)
				windows++
			}
		}
		fmt.Fprintf(out, "%-10s %7d %8d %9d\n", region, views, windows, busiest)
	}
	verdict := "every window's count matches an independent count of the views written, each window emitted once"
	if m := res.mismatch(); m != "" {
		verdict = "MISMATCH: " + m
	}
	fmt.Fprintf(out, "\n%d views counted in one-minute windows by the time in their JSON, %d not JSON sent to %s, in %.1fs.\n%s.\n",
		res.Views, res.DeadLetter, DeadLetterTopic, res.Elapsed.Seconds(), verdict)
}

// mismatch describes the first difference between the committed counts
// and the independent ones, or returns "".
func (r demoResult) mismatch() string {
	switch {
	case r.Repeats > 0:
		return fmt.Sprintf("%d windows emitted more than once", r.Repeats)
	case r.DeadLetter != r.Bad:
		return fmt.Sprintf("%d dead letters, %d views were not JSON", r.DeadLetter, r.Bad)
	case len(r.Counts) != len(r.Expected):
		return fmt.Sprintf("%d windows counted, %d expected", len(r.Counts), len(r.Expected))
	}
	for w, n := range r.Expected {
		if r.Counts[w] != n {
			return fmt.Sprintf("%s at %s counted %d views, expected %d", w.Region, w.Start.Format("15:04"), r.Counts[w], n)
		}
	}
	return ""
}
