package runtime_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// workerProcess is a worker running as a separate process: this test
// binary, started with CAUSEWAY_TEST_WORKER set (see TestMain).
type workerProcess struct {
	t    *testing.T
	cmd  *exec.Cmd
	logs *syncBuffer
	done chan struct{}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// workerBinary is the program spawnWorker runs: this test binary, unless
// CAUSEWAY_WORKER_BINARY names another build of the runtime's tests. make
// test names one built without the race detector: the processes' job is to
// be killed and restarted, and the detector made each of them several times
// slower while it watched code the in-process tests already run under it
// (a chaos run cost 83 s of CPU with race-built workers, 37 s without).
// Without the variable, as under make test-all, the workers are built as
// the tests are.
func workerBinary() string {
	if b := os.Getenv("CAUSEWAY_WORKER_BINARY"); b != "" {
		return b
	}
	return os.Args[0]
}

func spawnWorker(t *testing.T, addr, app, stateDir string, extra ...string) *workerProcess {
	t.Helper()
	args := append([]string{"--application-id", app, "--bootstrap-servers", addr, "--state-dir", stateDir,
		"--http-addr", "", "--commit-interval", "50ms"}, extra...)
	cmd := exec.Command(workerBinary(), args...)
	cmd.Env = append(os.Environ(), "CAUSEWAY_TEST_WORKER=1")
	logs := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	require.NoError(t, cmd.Start())
	wp := &workerProcess{t: t, cmd: cmd, logs: logs, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait() // the exit status is read from cmd.ProcessState
		close(wp.done)
	}()
	t.Cleanup(func() { wp.kill() })
	return wp
}

// kill sends SIGKILL and waits for the process to be gone.
func (w *workerProcess) kill() {
	select {
	case <-w.done:
		return
	default:
	}
	_ = w.cmd.Process.Kill() // it may have exited on its own meanwhile
	<-w.done
}

// stop sends SIGTERM and waits for a graceful exit.
func (w *workerProcess) stop(timeout time.Duration) error {
	if err := w.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-w.done:
		if code := w.cmd.ProcessState.ExitCode(); code != 0 {
			return fmt.Errorf("worker exited with %d", code)
		}
		return nil
	case <-time.After(timeout):
		w.kill()
		return fmt.Errorf("worker did not stop within %v", timeout)
	}
}

// threadsAssigned counts the distinct stream threads of the process that
// logged an assignment.
func (w *workerProcess) threadsAssigned() int {
	threads := map[string]bool{}
	for _, line := range strings.Split(w.logs.String(), "\n") {
		if !strings.Contains(line, `"partitions assigned"`) {
			continue
		}
		th := "0"
		if _, after, ok := strings.Cut(line, `"thread":`); ok {
			th, _, _ = strings.Cut(after, ",")
		}
		threads[th] = true
	}
	return len(threads)
}

func (w *workerProcess) tail() string {
	s := w.logs.String()
	if len(s) > 4000 {
		s = s[len(s)-4000:]
	}
	return s
}

// Crash test: the worker is killed with SIGKILL at random points, many
// times, while input keeps arriving, and restarted each time from the same
// state dir. The committed verdicts must still be exactly once and causal.
//
// It runs with one stream thread per process and with two: each thread is
// a consumer and a transactional producer of its own, killed together.
func TestCrashRecoveryExactlyOnce(t *testing.T) {
	t.Parallel()
	eachClient(t, func(t *testing.T, client string) {
		for _, threads := range []string{"1", "2"} {
			t.Run(threads+" threads", func(t *testing.T) {
				t.Parallel()
				n, _ := strconv.Atoi(threads)
				crashRecovery(t, n, "--client", client, "--threads", threads)
			})
		}
	})
}

func crashRecovery(t *testing.T, threads int, flags ...string) {
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 7))
	t.Logf("kill schedule seed %d", seed)
	b := startBroker(t)
	createTopics(t, b.Addr(), 2, "orders", "payments", "verdicts")
	state := t.TempDir()
	wl := workload{payments: map[string][]string{}}
	w := spawnWorker(t, b.Addr(), "shop-crash", state, flags...)
	const kills = 8
	working := 0  // incarnations killed after they had partitions and had committed
	threaded := 0 // incarnations in which every thread had partitions
	written := verdictsWritten(t, b.Addr())
	for round := range kills {
		wl.add(produceShop(t, b.Addr(), 4, 3, fmt.Sprintf("r%d", round)))
		// Kill at the pace the machine works at: once the incarnation has
		// written verdicts and all its threads have partitions (up to ten
		// seconds), however slowly it joined the group.
		deadline := time.Now().Add(10 * time.Second)
		written, _ = awaitVerdicts(t, b.Addr(), written, 10*time.Second)
		for w.threadsAssigned() < threads && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(time.Duration(200+rng.IntN(1300)) * time.Millisecond)
		w.kill()
		if strings.Contains(w.logs.String(), "partitions assigned") {
			working++
		}
		if w.threadsAssigned() == threads {
			threaded++
		}
		w = spawnWorker(t, b.Addr(), "shop-crash", state, flags...)
	}
	t.Logf("%d of %d killed workers had been assigned partitions", working, kills)
	assert.GreaterOrEqual(t, working, kills/2, "most kills must hit a working worker, or the test proves little")
	assert.Positive(t, threaded, "in some incarnation every one of the %d threads had partitions", threads)
	wl.add(produceShop(t, b.Addr(), 4, 3, "last"))
	want := wl.count()
	verdicts := readCommitted(t, b.Addr(), "verdicts", want, 90*time.Second)
	problems := checkVerdicts(wl, verdicts)
	assert.Empty(t, problems, "seed %d; worker log tail:\n%s", seed, w.tail())
	assert.Len(t, verdicts, want)
	require.NoError(t, w.stop(30*time.Second), w.tail())
}

// Rebalance test: a second and third worker join mid-run, then the first
// leaves; partitions move between processes and nothing is lost, duplicated
// or processed out of causal order.
//
// It runs with one stream thread per process and with two.
func TestRebalanceExactlyOnce(t *testing.T) {
	t.Parallel()
	eachClient(t, func(t *testing.T, client string) {
		for _, threads := range []string{"1", "2"} {
			t.Run(threads+" threads", func(t *testing.T) {
				t.Parallel()
				rebalance(t, "--client", client, "--threads", threads)
			})
		}
	})
}

func rebalance(t *testing.T, flags ...string) {
	b := startBroker(t)
	createTopics(t, b.Addr(), 3, "orders", "payments", "verdicts")
	wl := workload{payments: map[string][]string{}}
	// Dynamic membership, so that a leaving worker's partitions move at once.
	dyn := append([]string{"--static-membership=false"}, flags...)
	a := spawnWorker(t, b.Addr(), "shop-rebalance", t.TempDir(), dyn...)
	wl.add(produceShop(t, b.Addr(), 6, 3, "a"))
	time.Sleep(time.Second)
	bw := spawnWorker(t, b.Addr(), "shop-rebalance", t.TempDir(), dyn...)
	wl.add(produceShop(t, b.Addr(), 6, 3, "b"))
	time.Sleep(time.Second)
	c := spawnWorker(t, b.Addr(), "shop-rebalance", t.TempDir(), dyn...)
	wl.add(produceShop(t, b.Addr(), 6, 3, "c"))
	// The first worker gives partitions up once a newcomer has joined:
	// wait for that at the pace the machine works at (a loaded one starts
	// the newcomers slowly), up to 30 s, before it leaves.
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(a.logs.String(), "partitions revoked") && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Second)
	require.NoError(t, a.stop(30*time.Second), a.tail())
	wl.add(produceShop(t, b.Addr(), 6, 3, "d"))
	want := wl.count()
	verdicts := readCommitted(t, b.Addr(), "verdicts", want, 90*time.Second)
	assert.Empty(t, checkVerdicts(wl, verdicts), "logs:\n%s\n---\n%s", bw.tail(), c.tail())
	assert.Len(t, verdicts, want)
	require.NoError(t, bw.stop(30*time.Second), bw.tail())
	require.NoError(t, c.stop(30*time.Second), c.tail())
	assert.True(t, strings.Contains(a.logs.String(), "partitions revoked"), "the first worker never gave up partitions")
}
