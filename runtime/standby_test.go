package runtime_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/runtime"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Failover with standby replicas: three workers (franz-go, the balancer
// that places copies) share the shop under steady input; one is killed
// with SIGKILL. Its tasks go to the workers that kept copies of their
// stores, which restore only what the copies lacked: far less than the
// same run without standbys restores, the control. Both runs keep every
// verdict exactly once and in causal order.
func TestStandbysRestoreLittleOnFailover(t *testing.T) {
	t.Parallel()
	withAndWithout(t, "standbys ", "1", "0", func(t *testing.T, standbys string) failover {
		return killOne(t, "--client", "franz", "--standby-replicas", standbys, "--kafka", "session.timeout.ms=6000")
	}, func(with, without failover) {
		t.Logf("restored after the kill: %d records with standbys, %d without", with.restored, without.restored)
		assert.Positive(t, without.restored, "without standbys the moved tasks restore their stores")
		assert.Less(t, with.restored*5, without.restored, "with standbys a failover restores what the copies lacked")
		assert.Positive(t, with.copies, "the workers reported standby copies in /status")
	})
}

type failover struct {
	// restored counts the changelog records the survivors restored after
	// the kill; copies, the standby copies their status listed before.
	restored, copies int
}

func killOne(t *testing.T, flags ...string) failover {
	b := startBroker(t)
	createTopics(t, b.Addr(), 6, "orders", "payments", "verdicts")
	wl := workload{payments: map[string][]string{}}
	round := 0
	feed := func(d time.Duration) {
		for deadline := time.Now().Add(d); time.Now().Before(deadline); round++ {
			wl.add(produceShop(t, b.Addr(), 6, 2, fmt.Sprintf("r%d", round)))
			time.Sleep(50 * time.Millisecond)
		}
	}
	wl.add(preloadShop(t, b.Addr(), 2000, 2, "pre"))
	args := append([]string{"--static-membership=false", "--stores", "pebble"}, flags...)
	var ws []*workerProcess
	addrs := make([]string, 3)
	for i := range 3 {
		ws = append(ws, spawnWorker(t, b.Addr(), "shop-standby", t.TempDir(), append(args, "--http-addr", "127.0.0.1:0")...))
		addrs[i] = ws[i].servingAddr(30 * time.Second)
	}
	// The workers work through the preload, their copies with them.
	readCommitted(t, b.Addr(), "verdicts", wl.count(), 90*time.Second)
	feed(3 * time.Second)
	var f failover
	victim := -1
	for i, a := range addrs {
		st := getStatus(t, a)
		f.copies += len(st.Standbys)
		if victim < 0 && len(st.Tasks) > 0 {
			victim = i
		}
	}
	require.GreaterOrEqual(t, victim, 0, "no worker runs a task")
	marks := make([]int, len(ws))
	for i, w := range ws {
		marks[i] = len(w.logs.String())
	}
	ws[victim].kill()
	// The killed worker's tasks wait for its session to time out (6 s,
	// the broker's least).
	feed(10 * time.Second)
	want := wl.count()
	verdicts := readCommitted(t, b.Addr(), "verdicts", want, 90*time.Second)
	if !assert.Empty(t, checkVerdicts(wl, verdicts)) || !assert.Len(t, verdicts, want) {
		for i, w := range ws {
			t.Logf("worker %d:\n%s", i, w.logs.String())
		}
	}
	for i, w := range ws {
		if i != victim {
			f.restored += restoredRecords(w.logs.String()[marks[i]:])
			require.NoError(t, w.stop(30*time.Second), w.tail())
		}
	}
	return f
}

// restoredRecords adds up the records of the "restored" lines in a
// worker's logs.
func restoredRecords(logs string) int {
	n := 0
	for _, line := range strings.Split(logs, "\n") {
		if !strings.Contains(line, `"msg":"restored"`) {
			continue
		}
		var l struct{ Records int }
		if json.Unmarshal([]byte(line), &l) == nil {
			n += l.Records
		}
	}
	return n
}

// Warm-up: one worker runs the shop; a second joins while the tasks' state
// is larger than the acceptable recovery lag. The tasks stay where they
// run while the newcomer warms copies up; a probing rebalance then moves
// them, and the newcomer restores only what its copies lacked. With
// warm-ups off (the control) it restores their whole state at once.
func TestNewWorkersWarmUpBeforeTakingTasks(t *testing.T) {
	t.Parallel()
	withAndWithout(t, "acceptable lag ", "50", "-1", func(t *testing.T, lag string) warmed {
		return joinLate(t, "--client", "franz", "--acceptable-recovery-lag", lag, "--probing-rebalance-interval", "2s")
	}, func(with, without warmed) {
		t.Logf("the newcomer restored %d records with warm-ups, %d without; it warmed up %d copies", with.restored, without.restored, with.warming)
		assert.Positive(t, with.warming, "the newcomer showed warm-ups in /status")
		assert.Zero(t, without.warming, "warm-ups off, none showed")
		assert.Positive(t, with.tasks, "the probing rebalance moved tasks to the newcomer")
		assert.Less(t, with.restored*3, without.restored, "a warmed-up copy restores what it lacked, not the whole state")
	})
}

type warmed struct {
	// restored is what the newcomer restored; warming the most warm-up
	// copies its status showed at once; tasks what it ran in the end.
	restored, warming, tasks int
}

func joinLate(t *testing.T, flags ...string) warmed {
	b := startBroker(t)
	createTopics(t, b.Addr(), 4, "orders", "payments", "verdicts")
	wl := workload{payments: map[string][]string{}}
	round := 0
	feed := func(d time.Duration) {
		for deadline := time.Now().Add(d); time.Now().Before(deadline); round++ {
			wl.add(produceShop(t, b.Addr(), 6, 2, fmt.Sprintf("r%d", round)))
			time.Sleep(50 * time.Millisecond)
		}
	}
	wl.add(preloadShop(t, b.Addr(), 2000, 2, "pre"))
	args := append([]string{"--static-membership=false", "--state-positions-interval", "1s"}, flags...)
	first := spawnWorker(t, b.Addr(), "shop-warmup", t.TempDir(), args...)
	// The first worker works through the preload, then looks at its
	// stores' sizes (every second) at least twice more, to tell the group
	// when the newcomer joins.
	readCommitted(t, b.Addr(), "verdicts", wl.count(), 90*time.Second)
	feed(3 * time.Second)
	late := spawnWorker(t, b.Addr(), "shop-warmup", t.TempDir(), append(args, "--http-addr", "127.0.0.1:0")...)
	addr := late.servingAddr(30 * time.Second)
	// The newcomer is watched for 5 to 20 s: until it runs tasks, and,
	// with warm-ups on, has shown one.
	warmups := !slices.Contains(flags, "-1")
	var w warmed
	start := time.Now()
	for deadline := start.Add(20 * time.Second); time.Now().Before(deadline); round++ {
		if time.Since(start) > 5*time.Second && w.tasks > 0 && (w.warming > 0 || !warmups) {
			break
		}
		wl.add(produceShop(t, b.Addr(), 6, 2, fmt.Sprintf("r%d", round)))
		if st, err := tryStatus(addr); err == nil {
			n := 0
			for _, c := range st.Standbys {
				if c.Role == "WARMING_UP" {
					n++
				}
			}
			w.warming, w.tasks = max(w.warming, n), len(st.Tasks)
		}
		time.Sleep(50 * time.Millisecond)
	}
	want := wl.count()
	verdicts := readCommitted(t, b.Addr(), "verdicts", want, 90*time.Second)
	if !assert.Empty(t, checkVerdicts(wl, verdicts)) || !assert.Len(t, verdicts, want) {
		t.Logf("first worker:\n%s\nlate worker:\n%s", first.logs.String(), late.logs.String())
	}
	w.restored = restoredRecords(late.logs.String())
	require.NoError(t, late.stop(30*time.Second), late.tail())
	require.NoError(t, first.stop(30*time.Second), first.tail())
	return w
}

// tryStatus reads a worker's /status, failing while it does not answer.
func tryStatus(addr string) (runtime.Status, error) {
	var st runtime.Status
	resp, err := http.Get("http://" + addr + "/status")
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// preloadShop writes, in bulk, orders orders and then payments payments of
// each, every payment claiming its order as produceShop's do; it returns
// what it wrote. It gives a test state larger than a worker's catch-up
// rounds however slowly the machine runs the rest.
func preloadShop(t *testing.T, addr string, orders, payments int, prefix string) workload {
	t.Helper()
	p := newProducer(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	wl := workload{payments: map[string][]string{}}
	clocks := make([]causal.Session, orders)
	var mu sync.Mutex
	var failed error
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if failed == nil {
			failed = err
		}
	}
	for i := range orders {
		p.Produce(ctx, &kgo.Record{Topic: "orders", Key: []byte(fmt.Sprintf("%s-o%d", prefix, i)), Value: []byte("order")},
			func(r *kgo.Record, err error) {
				if err != nil {
					fail(err)
					return
				}
				mu.Lock()
				clocks[i].Produced(causal.Channel{Topic: r.Topic, Partition: r.Partition}, r.Offset)
				mu.Unlock()
			})
	}
	require.NoError(t, p.Flush(ctx))
	require.NoError(t, failed)
	for j := range payments {
		for i := range orders {
			id := fmt.Sprintf("%s-o%d", prefix, i)
			pay := fmt.Sprintf("%s-p%d", id, j)
			p.Produce(ctx, &kgo.Record{Topic: "payments", Key: []byte(id), Value: []byte(pay),
				Headers: []kgo.RecordHeader{{Key: causal.HeaderKey, Value: clocks[i].AppendHeader(nil)}}}, func(_ *kgo.Record, err error) {
				if err != nil {
					fail(err)
				}
			})
			wl.payments[id] = append(wl.payments[id], pay)
		}
	}
	require.NoError(t, p.Flush(ctx))
	require.NoError(t, failed)
	return wl
}

// withAndWithout runs run with the value under test and with the
// control's, as parallel subtests named prefix+value, and hands both
// results to compare once both have ended.
func withAndWithout[R any](t *testing.T, prefix, with, without string, run func(t *testing.T, value string) R, compare func(with, without R)) {
	t.Helper()
	results := map[string]*R{with: new(R), without: new(R)}
	for _, v := range []string{with, without} {
		t.Run(prefix+v, func(t *testing.T) {
			t.Parallel()
			*results[v] = run(t, v)
		})
	}
	t.Cleanup(func() { compare(*results[with], *results[without]) })
}
