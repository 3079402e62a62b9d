package runtime_test

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// servingAddr waits for the worker process to log the address its HTTP
// server listens on.
func (w *workerProcess) servingAddr(within time.Duration) string {
	w.t.Helper()
	re := regexp.MustCompile(`"serving status and metrics".*"addr":"([^"]+)"`)
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if m := re.FindStringSubmatch(w.logs.String()); m != nil {
			return m[1]
		}
		time.Sleep(20 * time.Millisecond)
	}
	w.t.Fatalf("the worker never said where it serves HTTP:\n%s", w.tail())
	return ""
}

// get answers the status code of GET url, or 0 when nothing answers.
func get(url string) int {
	c := http.Client{Timeout: time.Second}
	res, err := c.Get(url)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode
}

// exited waits for the process to exit on its own and returns its exit
// code, or -1 when it is still running after within.
func (w *workerProcess) exited(within time.Duration) int {
	select {
	case <-w.done:
		return w.cmd.ProcessState.ExitCode()
	case <-time.After(within):
		return -1
	}
}

// A second worker with the same instance id (here: a copy of the first
// one's deployment on another machine) fences the first: the first stops
// within a bound with exit code 1, its /readyz answering 503 before it
// goes, and the second carries on exactly once.
func TestAFencedWorkerExitsWithCode1(t *testing.T) {
	t.Parallel()
	eachClient(t, func(t *testing.T, client string) {
		b := startBroker(t)
		createTopics(t, b.Addr(), 2, "orders", "payments", "verdicts")
		wl := workload{payments: map[string][]string{}}
		wl.add(produceShop(t, b.Addr(), 4, 3, "a"))
		flags := []string{"--client", client, "--instance-id", "twin", "--http-addr", "127.0.0.1:0"}
		first := spawnWorker(t, b.Addr(), "shop-fenced", t.TempDir(), flags...)
		ready := "http://" + first.servingAddr(30*time.Second) + "/readyz"
		deadline := time.Now().Add(30 * time.Second)
		for get(ready) != http.StatusOK {
			require.True(t, time.Now().Before(deadline), "the first worker never got ready:\n%s", first.tail())
			time.Sleep(50 * time.Millisecond)
		}
		// Watch the first worker's readiness from here on.
		seen := make(chan []int, 1)
		go func() {
			var codes []int
			for {
				select {
				case <-first.done:
					seen <- codes
					return
				default:
				}
				if c := get(ready); len(codes) == 0 || codes[len(codes)-1] != c {
					codes = append(codes, c)
				}
				time.Sleep(5 * time.Millisecond)
			}
		}()

		second := spawnWorker(t, b.Addr(), "shop-fenced", t.TempDir(), flags...)
		const bound = 45 * time.Second // the second's start, the fencing, then at most the shutdown timeout
		code := first.exited(bound)
		require.NotEqual(t, -1, code, "the fenced worker was still running %v after the second started:\n%s", bound, first.tail())
		assert.Equal(t, 1, code, "exit code of the fenced worker:\n%s", first.tail())
		codes := <-seen
		assert.Contains(t, codes, http.StatusServiceUnavailable, "readiness over time %v: never 503 before it exited:\n%s", codes, first.tail())
		assert.Regexp(t, `(?i)fenc`, first.logs.String(), "the log names the fencing")

		wl.add(produceShop(t, b.Addr(), 4, 3, "b"))
		want := wl.count()
		verdicts := readCommitted(t, b.Addr(), "verdicts", want, 60*time.Second)
		assert.Empty(t, checkVerdicts(wl, verdicts), second.tail())
		assert.Len(t, verdicts, want)
		require.NoError(t, second.stop(30*time.Second), second.tail())
	})
}

// A second worker pointed at a state dir a live worker holds refuses to
// start, naming the holder, and touches none of the first one's stores;
// the first goes on.
func TestAStateDirInUseIsRefused(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	createTopics(t, b.Addr(), 2, "orders", "payments", "verdicts")
	wl := workload{payments: map[string][]string{}}
	wl.add(produceShop(t, b.Addr(), 4, 3, "a"))
	state := t.TempDir()
	first := spawnWorker(t, b.Addr(), "shop-shared-dir", state)
	verdicts := readCommitted(t, b.Addr(), "verdicts", wl.count(), 60*time.Second)
	require.Len(t, verdicts, wl.count())
	stores := storeFiles(t, state)
	require.NotEmpty(t, stores, "the first worker keeps its stores on disk")

	second := spawnWorker(t, b.Addr(), "shop-shared-dir", state)
	code := second.exited(30 * time.Second)
	require.NotEqual(t, -1, code, "the second worker started on a state dir in use:\n%s", second.tail())
	assert.Equal(t, 1, code, second.tail())
	assert.Contains(t, second.logs.String(), "state dir in use by another worker", second.tail())
	assert.Regexp(t, `held by pid \d+ on host`, second.logs.String())
	for _, f := range stores {
		_, err := os.Stat(f)
		assert.NoError(t, err, "the refused worker removed %s", f)
	}

	wl.add(produceShop(t, b.Addr(), 4, 3, "b"))
	verdicts = readCommitted(t, b.Addr(), "verdicts", wl.count(), 60*time.Second)
	assert.Empty(t, checkVerdicts(wl, verdicts), first.tail())
	require.NoError(t, first.stop(30*time.Second), first.tail())
}

// storeFiles lists the files of the tasks' stores under a state dir.
func storeFiles(t *testing.T, state string) []string {
	t.Helper()
	var files []string
	require.NoError(t, filepath.WalkDir(filepath.Join(state, "tasks"), func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".sst") || err == nil && !d.IsDir() && strings.Contains(d.Name(), "MANIFEST") {
			files = append(files, path)
		}
		return err
	}))
	return files
}
