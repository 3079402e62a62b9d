package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/query"
	"github.com/causeway-stream/causeway/framework/serde"
	"github.com/causeway-stream/causeway/runtime"
	"github.com/causeway-stream/causeway/runtime/embedded"
)

// ReadReport counts what a client saw when it read its orders' status at
// once after paying them.
type ReadReport struct {
	Orders int
	// CausalPaid and PlainPaid count the orders whose status read "paid",
	// with the client's clock and without it.
	CausalPaid, PlainPaid int
	// Forwarded counts the orders whose queries went to a worker that did
	// not hold the order (all of them, unless a rebalance moved the task).
	Forwarded int
	// LongestWait is the longest a causal read waited.
	LongestWait time.Duration
}

// String is the report in one line.
func (r ReadReport) String() string {
	return fmt.Sprintf("with the client's clock %d/%d paid (longest wait %v), without it %d/%d; %d asked of the worker not holding the order",
		r.CausalPaid, r.Orders, r.LongestWait.Round(time.Millisecond), r.PlainPaid, r.Orders, r.Forwarded)
}

// worker is one of the demonstration's workers, with its HTTP server.
type worker struct {
	w   *runtime.StreamThread
	srv *runtime.Server
	q   *query.Client
}

// readYourWrites runs two workers of the shop on a fresh embedded broker,
// with the same partitions lagging as in runShop. For each order, the
// client writes the order and its payment, then at once asks the worker
// that does not hold the order for its status, once with its session's
// clock and once without. The status store is a processor after billing,
// so the clock's claim on the payment is followed through billing.
func readYourWrites(ctx context.Context, topo *framework.Topology, o demoOptions, out io.Writer) (ReadReport, error) {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	b, err := embedded.Start()
	if err != nil {
		return ReadReport{}, err
	}
	defer b.Close()
	if err := createTopics(ctx, b.Addr()); err != nil {
		return ReadReport{}, err
	}
	log := zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()), zapcore.Lock(os.Stderr), zap.ErrorLevel))
	workers, stop, err := startWorkers(ctx, b.Addr(), topo, o, log)
	defer stop()
	if err != nil {
		return ReadReport{}, err
	}
	fmt.Fprintf(out, "  two workers share the shop's tasks...")
	if err := shareTasks(ctx, topo, workers); err != nil {
		return ReadReport{}, err
	}

	lag := b.Cluster().Fault(
		kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Topic: OrdersTopic, Partitions: []int32{0}, Err: kerr.NotLeaderForPartition, Count: -1},
		kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Topic: PaymentsTopic, Partitions: []int32{1}, Err: kerr.NotLeaderForPartition, Count: -1},
	)
	lagOver := time.AfterFunc(o.lag, lag.Remove)
	defer lagOver.Stop()
	fmt.Fprintf(out, " partitions lagging; the client pays %d orders and reads each one's status at once...", o.orders)
	client, err := NewClient(b.Addr())
	if err != nil {
		return ReadReport{}, err
	}
	defer client.Close()
	r, err := payAndRead(ctx, client, workers, o)
	if err != nil {
		return r, err
	}
	fmt.Fprintf(out, " done\n")
	return r, nil
}

// startWorkers starts two workers of topo on the broker at addr, each
// with an HTTP server and a query client of it. stop stops them and
// removes their state, whatever the error.
func startWorkers(ctx context.Context, addr string, topo *framework.Topology, o demoOptions, log *zap.Logger) (workers []worker, stop func(), err error) {
	var states []string
	stop = func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, wk := range workers {
			if err := wk.srv.Stop(stopCtx); err != nil {
				fmt.Fprintln(os.Stderr, "stop server:", err)
			}
			if err := wk.w.Stop(stopCtx); err != nil {
				fmt.Fprintln(os.Stderr, "stop worker:", err)
			}
		}
		for _, dir := range states { // once no worker writes there
			os.RemoveAll(dir)
		}
	}
	for i := range 2 {
		state, err := os.MkdirTemp("", "causeway-orders-")
		if err != nil {
			return workers, stop, err
		}
		states = append(states, state)
		cfg := runtime.DefaultConfig()
		cfg.Client = cmp.Or(o.client, cfg.Client)
		cfg.ApplicationID, cfg.BootstrapServers, cfg.StateDir, cfg.HTTPAddr = "shop", addr, state, ""
		cfg.InstanceID = "shop-" + strconv.Itoa(i)
		w, err := runtime.NewStreamThread(cfg, topo, log, nil)
		if err != nil {
			return workers, stop, err
		}
		if err := w.Start(ctx); err != nil {
			return workers, stop, err
		}
		srv := runtime.NewServer("127.0.0.1:0", w, log)
		if err := srv.Start(ctx); err != nil {
			_ = w.Stop(ctx)
			return workers, stop, err
		}
		workers = append(workers, worker{w: w, srv: srv, q: query.NewClient("http://" + srv.Addr())})
	}
	return workers, stop, nil
}

// payAndRead writes each order and its payment, then at once asks the
// worker that does not hold the order for its status, without a clock and
// (on a goroutine of its own, as the wait may be long) with the session's.
func payAndRead(ctx context.Context, client *Client, workers []worker, o demoOptions) (ReadReport, error) {
	r := ReadReport{Orders: o.orders}
	var (
		mu    sync.Mutex
		wg    sync.WaitGroup
		fails []error
	)
	for i := range o.orders {
		order := fmt.Sprintf("rw-order-%04d", i)
		if err := client.Write(ctx, OrdersTopic, order, "created "+order); err != nil {
			return r, err
		}
		if err := client.Write(ctx, PaymentsTopic, order, "pay-"+order); err != nil {
			return r, err
		}
		clock := client.session.Clock()
		other, elsewhere := notHolding(workers, order)
		if elsewhere {
			r.Forwarded++
		}
		plain, err := statusOf(ctx, other, order)
		if err != nil {
			return r, fmt.Errorf("status of %s without a clock: %w", order, err)
		}
		if plain == Paid {
			r.PlainPaid++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			began := time.Now()
			v, err := statusOf(ctx, other, order, query.After(clock, o.timeout/2))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				fails = append(fails, fmt.Errorf("status of %s with the client's clock: %w", order, err))
				return
			}
			r.LongestWait = max(r.LongestWait, time.Since(began))
			if v == Paid {
				r.CausalPaid++
			}
		}()
	}
	wg.Wait()
	return r, errors.Join(fails...)
}

// statusOf asks wk for order's status, again while the answer is one to
// retry (the worker has not read where the others are yet) and no clock
// was given.
func statusOf(ctx context.Context, wk worker, order string, opts ...query.Option) (string, error) {
	for {
		v, found, err := query.Get(ctx, wk.q, StatusStore, order, serde.String(), serde.String(), opts...)
		var qe *query.Error
		if errors.As(err, &qe) && qe.Retryable && ctx.Err() == nil && len(opts) == 0 {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		if err != nil || !found {
			return "", err
		}
		return v, nil
	}
}

// shareTasks waits until the workers are ready and run every task
// between them, each some.
func shareTasks(ctx context.Context, topo *framework.Topology, workers []worker) error {
	want := 0
	for _, pi := range topo.Processors() {
		want += partitions[pi.Inputs[0]]
	}
	for {
		all, n := true, 0
		for _, wk := range workers {
			st := wk.w.Status()
			all = all && st.Ready && len(st.Tasks) > 0
			n += len(st.Tasks)
		}
		if all && n == want {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the workers never shared the tasks: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// notHolding returns a worker that does not run the status task of order,
// and whether it found one.
func notHolding(workers []worker, order string) (worker, bool) {
	id := "status/" + strconv.Itoa(int(framework.PartitionFor([]byte(order), int32(partitions[BilledTopic]))))
	for _, wk := range workers {
		held := false
		for _, t := range wk.w.Status().Tasks {
			held = held || t.ID == id
		}
		if !held {
			return wk, true
		}
	}
	return workers[0], false
}
