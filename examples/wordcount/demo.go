package main

import (
	"bufio"
	"cmp"
	"context"
	_ "embed"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/causeway-stream/causeway/examples/internal/demoworker"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/serde"
	"github.com/causeway-stream/causeway/runtime"
	"github.com/causeway-stream/causeway/runtime/embedded"
)

//go:embed testdata/opticks.txt
var opticks string

// demoOptions configure one demo run.
type demoOptions struct {
	lines      int // how many lines of the text to feed; 0: all
	top        int
	partitions int
	timeout    time.Duration
	client     string // the worker's Kafka client library
}

// demoResult is what a run measured.
type demoResult struct {
	Lines, Words, Distinct int
	Elapsed                time.Duration
	Counts                 map[string]int64 // committed counts, as read back
	Expected               map[string]int64 // counted independently here
}

func demo(topo *framework.Topology, args []string) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	var o demoOptions
	fs.IntVar(&o.lines, "lines", 0, "feed only the first n lines of the text (0: all)")
	fs.IntVar(&o.top, "top", 15, "how many of the most frequent words to print")
	fs.IntVar(&o.partitions, "partitions", 2, "partitions of the demo's topics")
	fs.DurationVar(&o.timeout, "timeout", 2*time.Minute, "give up after this long")
	fs.StringVar(&o.client, "client", runtime.DefaultConfig().Client, "the worker's Kafka client library: "+strings.Join(runtime.Clients(), " or "))
	if status, run := demoworker.ParseFlags(fs, args); !run {
		return status
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := runDemo(ctx, topo, o, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "\nwordcount demo:", err)
		return 1
	}
	printSummary(os.Stdout, res, o.top)
	if mismatch := res.mismatch(); mismatch != "" {
		fmt.Fprintln(os.Stderr, "counts do not match:", mismatch)
		return 1
	}
	return 0
}

// runDemo starts the embedded broker, feeds the text, runs a worker and
// reads the committed counts back until every word is counted.
func runDemo(ctx context.Context, topo *framework.Topology, o demoOptions, out io.Writer) (demoResult, error) {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	lines := textLines(o.lines)
	res := demoResult{Lines: len(lines), Expected: map[string]int64{}, Counts: map[string]int64{}}
	for _, l := range lines {
		for _, w := range Words(l) {
			res.Expected[w]++
			res.Words++
		}
	}
	res.Distinct = len(res.Expected)
	fmt.Fprintf(out, "Starting the embedded broker and feeding %d lines (%d words) of Newton's Opticks...\n", res.Lines, res.Words)

	b, err := embedded.Start()
	if err != nil {
		return res, err
	}
	defer b.Close()
	if err := feed(ctx, b.Addr(), lines, o.partitions); err != nil {
		return res, err
	}
	start := time.Now()
	stop, err := demoworker.Start(ctx, topo, demoworker.Options{ApplicationID: "wordcount-demo", BootstrapServers: b.Addr(),
		Client: o.client, Partitions: o.partitions})
	if err != nil {
		return res, err
	}
	defer func() {
		if err := stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}()
	err = readCounts(ctx, b.Addr(), res, out, start)
	res.Elapsed = time.Since(start)
	fmt.Fprintln(out)
	return res, err
}

func textLines(limit int) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(opticks))
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		out = append(out, sc.Text())
		if limit > 0 && len(out) == limit {
			break
		}
	}
	return out
}

// feed writes the lines to the lines topic, spread over its partitions.
func feed(ctx context.Context, addr string, lines []string, partitions int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	for _, topic := range []string{LinesTopic, CountsTopic} {
		if _, err := kadm.NewClient(cl).CreateTopic(ctx, int32(partitions), -1, nil, topic); err != nil {
			return fmt.Errorf("create topic %s: %w", topic, err)
		}
	}
	var (
		mu     sync.Mutex
		failed error
	)
	for i, l := range lines {
		r := &kgo.Record{Topic: LinesTopic, Partition: int32(i % partitions), Key: []byte(strconv.Itoa(i)), Value: []byte(l)}
		cl.Produce(ctx, r, func(r *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				failed = cmp.Or(failed, fmt.Errorf("produce line %s: %w", r.Key, err))
				mu.Unlock()
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	mu.Lock()
	defer mu.Unlock()
	return failed
}

// readCounts follows the committed counts, printing progress, until every
// word has been counted.
func readCounts(ctx context.Context, addr string, res demoResult, out io.Writer, start time.Time) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(CountsTopic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return err
	}
	defer cl.Close()
	seen := 0
	lastPrint := time.Time{}
	terminal := demoworker.IsTerminal(out)
	for seen < res.Words {
		if ctx.Err() != nil {
			return fmt.Errorf("counted %d of %d words: %w", seen, res.Words, ctx.Err())
		}
		err := demoworker.PollOnce(ctx, cl, func(r *kgo.Record) error {
			n, err := serde.Int64().Deserialize(r.Value)
			if err != nil {
				return fmt.Errorf("count of %q: %w", r.Key, err)
			}
			res.Counts[string(r.Key)] = max(res.Counts[string(r.Key)], n)
			seen++
			return nil
		})
		if err != nil {
			return err
		}
		// On a terminal the progress line is rewritten in place; elsewhere
		// (a log, a pipe) only the last one is written.
		if (terminal && time.Since(lastPrint) > 300*time.Millisecond) || seen == res.Words {
			lastPrint = time.Now()
			prefix := "\r"
			if !terminal {
				prefix = ""
			}
			fmt.Fprintf(out, "%scounted %d of %d words (%3.0f%%), %d distinct, %.1fs ",
				prefix, seen, res.Words, 100*float64(seen)/float64(res.Words), len(res.Counts), time.Since(start).Seconds())
		}
	}
	return nil
}

func printSummary(out io.Writer, res demoResult, top int) {
	type wc struct {
		word  string
		count int64
	}
	var all []wc
	for w, n := range res.Counts {
		all = append(all, wc{w, n})
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].count != all[j].count {
			return all[i].count > all[j].count
		}
		return all[i].word < all[j].word
	})
	fmt.Fprintf(out, "\nTop %d words:\n", min(top, len(all)))
	for i, x := range all[:min(top, len(all))] {
		fmt.Fprintf(out, "%4d. %-12s %6d\n", i+1, x.word, x.count)
	}
	verdict := "every count matches an independent count of the text"
	if m := res.mismatch(); m != "" {
		verdict = "MISMATCH: " + m
	}
	fmt.Fprintf(out, "\n%d lines, %d words (%d distinct) counted in %.1fs: %.0f words/s, exactly once through a repartition and a state store.\n%s.\n",
		res.Lines, res.Words, res.Distinct, res.Elapsed.Seconds(), float64(res.Words)/res.Elapsed.Seconds(), verdict)
}

// mismatch describes the first difference between the committed counts and
// the independent ones, or returns "".
func (r demoResult) mismatch() string {
	if len(r.Counts) != len(r.Expected) {
		return fmt.Sprintf("%d distinct words counted, %d expected", len(r.Counts), len(r.Expected))
	}
	for w, n := range r.Expected {
		if r.Counts[w] != n {
			return fmt.Sprintf("%q counted %d times, expected %d", w, r.Counts[w], n)
		}
	}
	return ""
}
