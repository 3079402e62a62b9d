package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/runtime"
)

// TestMain doubles as the worker binary for the crash and rebalance tests:
// with CAUSEWAY_TEST_WORKER set, the test binary runs the shop topology as
// a worker process (configured by the usual flags and variables).
func TestMain(m *testing.M) {
	if os.Getenv("CAUSEWAY_TEST_WORKER") != "" {
		os.Exit(runtime.Run(shopTopology()))
	}
	goleak.VerifyTestMain(m,
		// librdkafka's Go binding keeps one goroutine per process that
		// outlives clients to serve its log channel; it is not ours.
		goleak.IgnoreAnyFunction("github.com/confluentinc/confluent-kafka-go/v2/kafka.(*handle).eventPoll"),
	)
}

// shopTopology: the ledger sees orders and payments (co-partitioned by order
// id). A payment for an order the ledger has not seen is an anomaly the
// causal gate must prevent; each payment's verdict carries the running count
// of payments for its order, so duplicates and losses show as gaps or
// repeats.
func shopTopology() *framework.Topology {
	topo, err := framework.NewBuilder("shop").
		Processor("ledger", func() framework.Processor {
			return framework.ProcessorFunc(func(ctx framework.Context, rec framework.Record) error {
				orders, err := ctx.KeyValueStore("orders")
				if err != nil {
					return err
				}
				if rec.Topic == "orders" {
					return orders.Put(rec.Key, rec.Value)
				}
				_, known, err := orders.Get(rec.Key)
				if err != nil {
					return err
				}
				paid, err := ctx.KeyValueStore("paid")
				if err != nil {
					return err
				}
				n := 0
				if b, ok, err := paid.Get(rec.Key); err != nil {
					return err
				} else if ok {
					n, _ = strconv.Atoi(string(b))
				}
				n++
				if err := paid.Put(rec.Key, []byte(strconv.Itoa(n))); err != nil {
					return err
				}
				verdict := fmt.Sprintf("%s known=%v n=%d", rec.Value, known, n)
				return ctx.Forward(framework.Record{Key: rec.Key, Value: []byte(verdict)})
			})
		}, framework.From("orders", "payments"), framework.To("verdicts"),
			framework.Stores(framework.KeyValueStore("orders"), framework.KeyValueStore("paid"))).
		Build()
	if err != nil {
		panic(err) // a test fixture: the topology is a constant
	}
	return topo
}

var startBroker = runtime.StartBroker

func createTopics(t *testing.T, addr string, partitions int, topics ...string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := kadm.NewClient(cl).CreateTopics(ctx, int32(partitions), -1, nil, topics...)
	require.NoError(t, err)
	for _, r := range res {
		if !errors.Is(r.Err, kerr.TopicAlreadyExists) {
			require.NoError(t, r.Err, r.Topic)
		}
	}
}

// workload is what the test produced: for every order id, the payment ids
// in the order they were written.
type workload struct {
	payments map[string][]string
}

// add puts what o wrote into wl.
func (wl workload) add(o workload) {
	for k, v := range o.payments {
		wl.payments[k] = append(wl.payments[k], v...)
	}
}

// count is how many payments wl wrote: the verdicts to expect.
func (wl workload) count() int {
	n := 0
	for _, p := range wl.payments {
		n += len(p)
	}
	return n
}

// produceShop writes, for each of orders ids, the order and then payments
// payments, each claiming (through a causal session per order) everything
// its client wrote before. It returns what it wrote.
func produceShop(t *testing.T, addr string, orders, payments int, prefix string) workload {
	t.Helper()
	return produceShopWith(t, addr, orders, payments, prefix, nil)
}

// produceShopWith is produceShop; with late, every third order is written
// in a client transaction that commits only after its payments, which
// claim it, have been acknowledged: late.commitAfter later, in the
// background.
func produceShopWith(t *testing.T, addr string, orders, payments int, prefix string, late *lateCommits) workload {
	t.Helper()
	p := newProducer(t, addr)
	wl := workload{payments: map[string][]string{}}
	sessions := map[string]*causal.Session{}
	send := func(topic, key, value string, s *causal.Session) {
		sendRecord(t, p, &kgo.Record{Topic: topic, Key: []byte(key), Value: []byte(value)}, s)
	}
	var txn *kgo.Client
	if late != nil && orders > 0 {
		var err error
		txn, err = kgo.NewClient(kgo.SeedBrokers(addr), kgo.ProducerLinger(time.Millisecond), kgo.TransactionalID("late-"+prefix))
		require.NoError(t, err)
		require.NoError(t, txn.BeginTransaction())
	}
	for i := range orders {
		id := fmt.Sprintf("%s-o%d", prefix, i)
		sessions[id] = &causal.Session{}
		if txn != nil && i%3 == 0 {
			sendRecord(t, txn, &kgo.Record{Topic: "orders", Key: []byte(id), Value: []byte("order " + id)}, sessions[id])
			continue
		}
		send("orders", id, "order "+id, sessions[id])
	}
	for j := range payments {
		for i := range orders {
			id := fmt.Sprintf("%s-o%d", prefix, i)
			pay := fmt.Sprintf("%s-p%d", id, j)
			send("payments", id, pay, sessions[id])
			wl.payments[id] = append(wl.payments[id], pay)
		}
	}
	if txn != nil {
		late.commit(txn)
	}
	return wl
}

// lateCommits commits client transactions after a delay, in the
// background; wait waits for every one and fails the test on an error.
type lateCommits struct {
	commitAfter func() time.Duration
	wg          sync.WaitGroup
	mu          sync.Mutex
	errs        []error
}

// commit commits txn's open transaction commitAfter from now, then
// closes txn.
func (l *lateCommits) commit(txn *kgo.Client) {
	delay := l.commitAfter()
	l.wg.Go(func() {
		defer txn.Close()
		time.Sleep(delay)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
			l.mu.Lock()
			l.errs = append(l.errs, err)
			l.mu.Unlock()
		}
	})
}

// wait waits for the transactions given to commit.
func (l *lateCommits) wait(t *testing.T) {
	t.Helper()
	l.wg.Wait()
	require.Empty(t, l.errs, "a late commit failed")
}

// newProducer returns a producer to addr that places keyed records as
// Kafka's Java client does (murmur2), closed when the test ends.
func newProducer(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	p, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.ProducerLinger(time.Millisecond)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(p.Close)
	return p
}

// sendRecord writes r, stamped with s's clock when s has one, waits for
// the broker's acknowledgement, and adds r's offset to s (when s is not
// nil). It returns r's offset.
func sendRecord(t *testing.T, p *kgo.Client, r *kgo.Record, s *causal.Session) int64 {
	t.Helper()
	if s != nil && !s.Clock().IsEmpty() {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: causal.HeaderKey, Value: s.AppendHeader(nil)})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, p.ProduceSync(ctx, r).FirstErr())
	if s != nil {
		s.Produced(causal.Channel{Topic: r.Topic, Partition: r.Partition}, r.Offset)
	}
	return r.Offset
}

// readCommitted reads every committed record of topic (read_committed),
// waiting until want records are there or the timeout passes.
func readCommitted(t *testing.T, addr, topic string, want int, timeout time.Duration) []*kgo.Record {
	t.Helper()
	c, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer c.Close()
	var out []*kgo.Record
	poll := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		out = append(out, c.PollFetches(ctx).Records()...)
	}
	deadline := time.Now().Add(timeout)
	for len(out) < want && time.Now().Before(deadline) {
		poll()
	}
	// A little more, to see duplicates beyond the count.
	quiet := time.Now().Add(time.Second)
	for time.Now().Before(quiet) {
		poll()
	}
	return out
}

// checkVerdicts is the oracle for the shop: every payment written has
// exactly one verdict, no verdict reports an unknown order, and each order's
// running counts go 1, 2, ... in offset order. It returns every problem.
func checkVerdicts(wl workload, verdicts []*kgo.Record) []string {
	var problems []string
	type v struct {
		pay   string
		known bool
		n     int
		off   int64
	}
	byOrder := map[string][]v{}
	seen := map[string]int{}
	for _, m := range verdicts {
		f := strings.Fields(string(m.Value))
		if len(f) != 3 {
			problems = append(problems, "unreadable verdict "+string(m.Value))
			continue
		}
		n, _ := strconv.Atoi(strings.TrimPrefix(f[2], "n="))
		byOrder[string(m.Key)] = append(byOrder[string(m.Key)], v{pay: f[0], known: f[1] == "known=true", n: n, off: m.Offset})
		seen[f[0]]++
	}
	for order, pays := range wl.payments {
		for _, p := range pays {
			switch seen[p] {
			case 1:
			case 0:
				problems = append(problems, "lost: no verdict for "+p)
			default:
				problems = append(problems, fmt.Sprintf("duplicate: %d verdicts for %s", seen[p], p))
			}
		}
		vs := byOrder[order]
		sort.Slice(vs, func(i, j int) bool { return vs[i].off < vs[j].off })
		for i, x := range vs {
			if !x.known {
				problems = append(problems, "causal: "+x.pay+" was processed before its order")
			}
			if x.n != i+1 {
				problems = append(problems, fmt.Sprintf("state: verdict %d of %s says n=%d", i+1, order, x.n))
			}
		}
	}
	return problems
}

// verdictsWritten is how many records (committed, aborted and markers
// alike) the verdicts topic holds: it grows whenever a worker writes.
func verdictsWritten(t *testing.T, addr string) int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, "verdicts")
	require.NoError(t, err)
	var n int64
	ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
	return n
}

// awaitVerdicts waits, up to within, until the verdicts topic holds more
// than before, and returns what it holds and whether it grew.
func awaitVerdicts(t *testing.T, addr string, before int64, within time.Duration) (int64, bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		n := verdictsWritten(t, addr)
		if n > before || time.Now().After(deadline) {
			return n, n > before
		}
		time.Sleep(20 * time.Millisecond)
	}
}
