//go:build cgo

package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/causeway-stream/causeway/causal"
)

// The output reader runs in a process of its own, as the broker does, so
// that the CPU time and allocations counted for the measuring process are
// the pipeline's (and the idle load producer's) alone.
//
// It reports on its standard output, one line per event:
//
//	warm                              the warm-up records are all visible
//	bulk <unix ns> <header bytes> <n> the burst's last record became visible
//	lat <ms> <ms> ...                 every latency record's latency; then it exits

// readerArgs is what the reader process follows and waits for.
type readerArgs struct {
	only       bool
	addr       string
	topic      string
	partitions int
	warm       int
	bulk       int
	lat        int
	cpus       []int // with -pin, the CPUs the reader process runs on
}

// runReader follows args.topic with read_committed from the beginning and
// reports as above. It is the whole of a -reader-only process.
func runReader(args readerArgs) int {
	if err := follow(args, os.Stdout, parentGone()); err != nil {
		fmt.Fprintln(os.Stderr, "reader:", err)
		return 1
	}
	return 0
}

// follow does the reading and reporting until its work is done, or until
// gone closes.
func follow(args readerArgs, out io.Writer, gone <-chan struct{}) error {
	// franz-go rather than librdkafka: it hands over whole fetches without
	// a cgo call per record, so the instrument takes a small share of the
	// two cores the pipelines are measured on. The fetch wait matches the
	// pipelines' consumers, so a record is seen as soon as they would see
	// one.
	parts := map[int32]kgo.Offset{}
	for part := range args.partitions {
		parts[int32(part)] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(args.addr),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{args.topic: parts}),
		kgo.FetchMaxWait(10*time.Millisecond),
		kgo.FetchMaxBytes(64<<20),
		kgo.FetchMaxPartitionBytes(4<<20),
	)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-gone:
			cancel()
		case <-ctx.Done():
		}
	}()
	warm, bulk, headerBytes := 0, 0, 0
	var lat strings.Builder
	lat.WriteString("lat")
	lats := 0
	for {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return errors.New("the measuring process is gone")
		}
		// Every record of a fetch became visible here at the same moment.
		now := time.Now()
		if err := fetches.Err(); err != nil {
			return fmt.Errorf("read %s: %w", args.topic, err)
		}
		for it := fetches.RecordIter(); !it.Done(); {
			r := it.Next()
			switch key := r.Key; {
			case bytes.HasPrefix(key, []byte("warm-")):
				warm++
				if warm == args.warm {
					if _, err := fmt.Fprintln(out, "warm"); err != nil {
						return err
					}
				}
			case bytes.HasPrefix(key, []byte("lat-")):
				lat.WriteString(" " + strconv.FormatFloat(float64(now.Sub(r.Timestamp).Microseconds())/1000, 'f', 3, 64))
				lats++
				if lats == args.lat {
					_, err := fmt.Fprintln(out, lat.String())
					return err
				}
			default:
				bulk++
				for _, h := range r.Headers {
					if h.Key == causal.HeaderKey {
						headerBytes += len(h.Value)
					}
				}
				if bulk == args.bulk {
					if _, err := fmt.Fprintf(out, "bulk %d %d %d\n", now.UnixNano(), headerBytes, bulk); err != nil {
						return err
					}
				}
			}
		}
	}
}

// reader is the measuring process's side of a reader process: its channels
// close as the reader reports each phase done.
type reader struct {
	cmd         *exec.Cmd
	stdin       io.Closer // keeps the process alive; see parentGone
	warmDone    chan struct{}
	bulkDone    chan struct{}
	latDone     chan struct{}
	last        time.Time // when the burst's last record became visible
	headerBytes int       // clock header bytes over the burst
	bulk        int
	latencies   []float64
	exited      chan struct{} // closed when the process has exited
	exitErr     error         // why, if it failed; read after exited
}

// startReader starts a reader process; onBulk runs, with the process's id,
// as soon as the burst's last record is reported visible, before bulkDone
// closes.
func startReader(args readerArgs, onBulk func(pid int)) (*reader, error) {
	cmd, stdin, err := helperCommand("-reader-only", "-reader-addr", args.addr, "-reader-topic", args.topic,
		"-partitions", strconv.Itoa(args.partitions), "-reader-warm", strconv.Itoa(args.warm),
		"-reader-bulk", strconv.Itoa(args.bulk), "-reader-lat", strconv.Itoa(args.lat), "-cpus", formatCPUs(args.cpus))
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	r := &reader{cmd: cmd, stdin: stdin, warmDone: make(chan struct{}), bulkDone: make(chan struct{}), latDone: make(chan struct{}),
		exited: make(chan struct{})}
	go func() {
		defer close(r.exited)
		scanErr := r.scan(bufio.NewScanner(stdout), onBulk)
		waitErr := cmd.Wait()
		_ = stdin.Close()
		r.exitErr = errors.Join(scanErr, waitErr)
	}()
	return r, nil
}

func (r *reader) scan(sc *bufio.Scanner, onBulk func(pid int)) error {
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "warm":
			close(r.warmDone)
		case "bulk":
			if len(f) != 4 {
				return fmt.Errorf("bad report %q", sc.Text())
			}
			ns, err1 := strconv.ParseInt(f[1], 10, 64)
			hb, err2 := strconv.Atoi(f[2])
			n, err3 := strconv.Atoi(f[3])
			if err := errors.Join(err1, err2, err3); err != nil {
				return fmt.Errorf("bad report %q: %w", sc.Text(), err)
			}
			onBulk(r.pid())
			r.last, r.headerBytes, r.bulk = time.Unix(0, ns), hb, n
			close(r.bulkDone)
		case "lat":
			for _, v := range f[1:] {
				ms, err := strconv.ParseFloat(v, 64)
				if err != nil {
					return fmt.Errorf("bad latency %q: %w", v, err)
				}
				r.latencies = append(r.latencies, ms)
			}
			close(r.latDone)
		default:
			return fmt.Errorf("unknown report %q", sc.Text())
		}
	}
	return sc.Err()
}

// pid is the reader process's id.
func (r *reader) pid() int { return r.cmd.Process.Pid }

// kill stops the reader process if it is still running.
func (r *reader) kill() {
	select {
	case <-r.exited:
	default:
		_ = r.cmd.Process.Kill() // it may exit by itself in between
		<-r.exited
	}
}
