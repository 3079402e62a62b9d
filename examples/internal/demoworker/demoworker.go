// Package demoworker is what the examples' commands share: their main,
// and for their demos a worker on the embedded broker's address, with a
// state directory of its own that goes when the worker stops, and a way
// to poll what it committed.
package demoworker

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/runtime"
)

// Main is an example's main: it builds the topology, then runs the demo
// when the first argument is "demo", else the worker (runtime.Run), and
// exits with their status.
func Main(topology func() (*framework.Topology, error), demo func(topo *framework.Topology, args []string) int) {
	topo, err := topology()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "demo":
			os.Exit(demo(topo, os.Args[2:]))
		case "-h", "-help", "--help":
			name := filepath.Base(os.Args[0])
			fmt.Printf("Usage: %s demo [flags]: the example's self-contained demo on the embedded broker (demo --help lists its flags)\n", name)
			fmt.Printf("   or: %s [flags]: a worker of the example's topology\n\n", name)
		}
	}
	os.Exit(runtime.Run(topo))
}

// ParseFlags parses a demo's flags. It reports false, with the status to
// exit with, when the demo is not to run: 0 after -h or --help (the flags
// printed on stdout), 2 after a bad flag (the error and the flags on
// stderr).
func ParseFlags(fs *flag.FlagSet, args []string) (status int, run bool) {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(os.Stdout)
		fmt.Fprintf(os.Stdout, "Usage of %s:\n", fs.Name())
		fs.PrintDefaults()
		return 0, false
	case err != nil:
		fs.SetOutput(os.Stderr)
		fmt.Fprintln(os.Stderr, err)
		fs.PrintDefaults()
		return 2, false
	}
	return 0, true
}

// IsTerminal reports whether w is a terminal, where a progress line may
// be rewritten in place with a carriage return.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// PollOnce polls cl for up to a tenth of a second and hands each record
// to f; a fetch error other than the poll's own deadline is returned.
func PollOnce(ctx context.Context, cl *kgo.Client, f func(*kgo.Record) error) error {
	poll, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	fetches := cl.PollFetches(poll)
	var ferr error
	fetches.EachError(func(topic string, p int32, err error) {
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			ferr = cmp.Or(ferr, fmt.Errorf("read %s/%d: %w", topic, p, err))
		}
	})
	if ferr != nil {
		return ferr
	}
	for it := fetches.RecordIter(); !it.Done(); {
		if err := f(it.Next()); err != nil {
			return err
		}
	}
	return nil
}

// Options say how the demo's worker runs. Zero values take the worker's
// defaults.
type Options struct {
	ApplicationID    string
	BootstrapServers string
	// Client is the Kafka client library: see runtime.Clients.
	Client string
	// Partitions is the count of the topics the worker creates.
	Partitions int
	// LogLevel is the least level logged to stderr; zero: warnings.
	LogLevel zapcore.Level
}

// Start starts a worker running topo and returns the function that stops
// it and removes its state.
func Start(ctx context.Context, topo *framework.Topology, o Options) (stop func() error, err error) {
	state, err := os.MkdirTemp("", "causeway-"+o.ApplicationID+"-")
	if err != nil {
		return nil, err
	}
	cfg := runtime.DefaultConfig()
	cfg.Client = cmp.Or(o.Client, cfg.Client)
	cfg.ApplicationID, cfg.BootstrapServers, cfg.StateDir, cfg.HTTPAddr = o.ApplicationID, o.BootstrapServers, state, ""
	cfg.CreateTopics = true
	if o.Partitions > 0 {
		cfg.DefaultPartitions = o.Partitions
	}
	level := cmp.Or(o.LogLevel, zapcore.WarnLevel)
	log := zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()), zapcore.Lock(os.Stderr), level))
	w, err := runtime.NewStreamThread(cfg, topo, log, nil)
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(state))
	}
	if err := w.Start(ctx); err != nil {
		return nil, errors.Join(err, os.RemoveAll(state))
	}
	return func() error {
		stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var errs []error
		if err := w.Stop(stopCtx); err != nil {
			errs = append(errs, fmt.Errorf("stop worker: %w", err))
		}
		return errors.Join(append(errs, os.RemoveAll(state))...)
	}, nil
}

// Keyed is one record a demo writes: its key and value.
type Keyed struct {
	Key   string
	Value []byte
}

// WriteAfter writes recs to topic, each stamped with the session's clock
// as it stands (what was written before), then adds them to the session.
func WriteAfter(ctx context.Context, cl *kgo.Client, session *causal.Session, topic string, recs []Keyed) error {
	var headers []kgo.RecordHeader
	if !session.Clock().IsEmpty() {
		headers = []kgo.RecordHeader{{Key: causal.HeaderKey, Value: session.AppendHeader(nil)}}
	}
	var (
		mu     sync.Mutex
		failed error
		done   []*kgo.Record
	)
	for _, w := range recs {
		cl.Produce(ctx, &kgo.Record{Topic: topic, Key: []byte(w.Key), Value: w.Value, Headers: headers}, func(r *kgo.Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed = cmp.Or(failed, fmt.Errorf("write %s of %s: %w", topic, r.Key, err))
				return
			}
			done = append(done, r)
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	mu.Lock()
	defer mu.Unlock()
	for _, r := range done {
		session.Produced(causal.Channel{Topic: r.Topic, Partition: r.Partition}, r.Offset)
	}
	return failed
}
