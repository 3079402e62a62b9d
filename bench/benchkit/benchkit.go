// Package benchkit is what the benchmark programs that run workers as
// processes share: starting this program again as a helper (a broker or a
// worker), a counting topology, writing keys, and reading the group's
// offsets and a worker's metrics.
package benchkit

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/runtime"
)

// Helper starts this program again with args, in one of its helper modes;
// closing the returned pipe (its stdin), or signalling the process, ends
// it (see WaitForEnd).
func Helper(args ...string) (*exec.Cmd, io.Closer, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(self, args...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	return cmd, stdin, nil
}

// WaitForEnd returns when stdin closes (the parent went away) or a
// termination signal arrives: how a helper knows to stop.
func WaitForEnd() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	gone := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(gone)
	}()
	select {
	case <-sig:
	case <-gone:
	}
}

// FreePort is a local TCP port nobody listens on.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// CountTopology counts the records of input per key in store "counts";
// with output set, it also writes each key's new count there.
func CountTopology(input, output string) (*framework.Topology, error) {
	opts := []framework.ProcessorOpt{framework.From(input), framework.Stores(framework.KeyValueStore("counts"))}
	if output != "" {
		opts = append(opts, framework.To(output))
	}
	return framework.NewBuilder("count").
		Processor("count", func() framework.Processor {
			return framework.ProcessorFunc(func(ctx framework.Context, rec framework.Record) error {
				s, err := ctx.KeyValueStore("counts")
				if err != nil {
					return err
				}
				v, _, err := s.Get(rec.Key)
				if err != nil {
					return err
				}
				n, _ := strconv.Atoi(string(v))
				count := strconv.AppendInt(nil, int64(n+1), 10)
				if err := s.Put(rec.Key, count); err != nil {
					return err
				}
				if output == "" {
					return nil
				}
				return ctx.Forward(framework.Record{Key: rec.Key, Value: count})
			})
		}, opts...).
		Build()
}

// Key is the i-th of the benchmarks' 16-byte keys.
func Key(i int) []byte { return fmt.Appendf(nil, "key-%012d", i) }

// ProduceKeys writes n distinct keys (Key) with 1-byte values to topic.
func ProduceKeys(ctx context.Context, addr, topic string, n int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(1<<16))
	if err != nil {
		return err
	}
	defer cl.Close()
	var failed error
	for i := range n {
		cl.Produce(ctx, &kgo.Record{Key: Key(i), Value: []byte{'1'}}, func(_ *kgo.Record, err error) {
			if err != nil && failed == nil {
				failed = err
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	return failed
}

// Committed is the sum of the group's committed offsets on topic.
func Committed(ctx context.Context, adm *kadm.Client, group, topic string) (int64, error) {
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return 0, err
	}
	sum := int64(0)
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic && o.Err == nil {
			sum += o.At
		}
	})
	return sum, nil
}

// MetricSum is the sum of a metric's series on the /metrics of the worker
// serving at addr.
func MetricSum(addr, name string) (float64, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	sum := 0.0
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, name+" ") && !strings.HasPrefix(line, name+"{") {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", line, err)
		}
		sum += v
	}
	return sum, nil
}

// WaitReady waits, up to timeout, until the worker serving at addr
// answers /readyz with 200: every task it has runs. It asks every 10 ms,
// which bounds what a timing of it adds.
func WaitReady(addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if resp, err := http.Get("http://" + addr + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("the worker at %s did not become ready within %v", addr, timeout)
}

// Serve runs a stream thread of topo with cfg, and its HTTP server at
// cfg.HTTPAddr, until WaitForEnd returns; then it calls atEnd, if given,
// and stops them.
func Serve(cfg runtime.Config, topo *framework.Topology, atEnd func()) error {
	w, err := runtime.NewStreamThread(cfg, topo, zap.NewNop(), nil)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := w.Start(ctx); err != nil {
		return err
	}
	srv := runtime.NewServer(cfg.HTTPAddr, w, zap.NewNop())
	if err := srv.Start(ctx); err != nil {
		return err
	}
	WaitForEnd()
	if atEnd != nil {
		atEnd()
	}
	stop, cancelStop := context.WithTimeout(context.Background(), time.Minute)
	defer cancelStop()
	_ = srv.Stop(stop)
	return w.Stop(stop)
}

// WritePNG writes img to path as a PNG.
func WritePNG(img *vgimg.Canvas, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		return err
	}
	return f.Close()
}
