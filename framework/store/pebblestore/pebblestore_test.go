package pebblestore_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/framework/store"
	"github.com/causeway-stream/causeway/framework/store/pebblestore"
	"github.com/causeway-stream/causeway/framework/store/storetest"
)

func TestBehaviour(t *testing.T) {
	dirs := map[store.Set]string{}
	storetest.Run(t, storetest.Backend{
		Open: func(t *testing.T) store.Set {
			dir := t.TempDir()
			s, err := pebblestore.Open(dir)
			require.NoError(t, err)
			dirs[s] = dir
			return s
		},
		Reopen: func(t *testing.T, s store.Set) store.Set {
			dir := dirs[s]
			require.NoError(t, s.Close())
			again, err := pebblestore.Open(dir)
			require.NoError(t, err)
			dirs[again] = dir
			return again
		},
	})
}

// crashEnv makes the test binary the crashing child of
// TestCrashInTheMiddleLeavesACommittedState.
const crashEnv = "PEBBLESTORE_CRASH_DIR"

// The child commits commits, each writing the commit's number to every
// key of a range that moves with the number and to "last", making the
// first synced of them durable; then it writes more without committing,
// and kills itself.
const commits, synced = 50, 25

func TestMain(m *testing.M) {
	if dir := os.Getenv(crashEnv); dir != "" {
		crashChild(dir)
		return
	}
	os.Exit(m.Run())
}

func crashChild(dir string) {
	s, err := pebblestore.Open(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	kv, err := s.Store("s")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	write := func(n int) {
		for k := range 100 {
			if err := kv.Put(fmt.Appendf(nil, "k%03d", (n+k)%300), []byte(strconv.Itoa(n))); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
		}
		if err := kv.Put([]byte("last"), []byte(strconv.Itoa(n))); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
	for n := 1; n <= commits; n++ {
		write(n)
		if err := s.Commit([]byte(strconv.Itoa(n))); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		if n == synced {
			if err := s.Sync(); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
		}
	}
	write(commits + 1) // pending, never committed
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
}

// A process killed with writes pending leaves a committed state behind,
// with the checkpoint of that very state: each key holds what the commit
// the checkpoint names (or an earlier one) wrote there, and nothing of the
// writes never committed. Commits after the last sync may be lost, whole.
func TestCrashInTheMiddleLeavesACommittedState(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashEnv+"="+dir)
	err := cmd.Run()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "the child was to kill itself")
	require.Equal(t, syscall.SIGKILL, exit.Sys().(syscall.WaitStatus).Signal(), "child: %v", err)

	s, err := pebblestore.Open(dir)
	require.NoError(t, err)
	defer func() { assert.NoError(t, s.Close()) }()
	cp, err := s.Checkpoint()
	require.NoError(t, err)
	n, err := strconv.Atoi(string(cp))
	require.NoError(t, err, "checkpoint %q", cp)
	require.GreaterOrEqual(t, n, synced, "a synced commit was lost")
	kv, err := s.Store("s")
	require.NoError(t, err)
	// What commit n leaves: each key holds the last commit <= n that wrote
	// it.
	want := map[string]string{"last": strconv.Itoa(n)}
	for c := 1; c <= n; c++ {
		for k := range 100 {
			want[fmt.Sprintf("k%03d", (c+k)%300)] = strconv.Itoa(c)
		}
	}
	got := map[string]string{}
	for k, v := range kv.Range(nil, nil) {
		got[string(k)] = string(v)
	}
	assert.Equal(t, want, got, "state after the crash is not the state of commit %d", n)
	t.Logf("found commit %d of %d after the kill", n, commits)
}

func TestOpenRefusesAnotherLayout(t *testing.T) {
	dir := t.TempDir()
	s, err := pebblestore.Open(dir)
	require.NoError(t, err)
	require.NoError(t, pebblestore.SetVersionForTest(s, 99))
	require.NoError(t, s.Close())
	_, err = pebblestore.Open(dir)
	assert.ErrorIs(t, err, pebblestore.ErrIncompatible)
}

// A split set passes the suite with one store in memory and the others on
// disk.
func TestSplitBehaviour(t *testing.T) {
	storetest.Run(t, storetest.Backend{Open: func(t *testing.T) store.Set {
		s, err := pebblestore.Open(t.TempDir())
		require.NoError(t, err)
		return store.Split(s, map[string]bool{"two": true})
	}})
}

// A flush that fails in Pebble's background (here every write to the
// disk fails from some point on) fails the set's next commits, instead of
// leaving them in memory until writes stall.
func TestAFailedFlushFailsTheNextCommit(t *testing.T) {
	var failing atomic.Bool
	fs := failingFS(&failing)
	s, err := pebblestore.Open("db", pebblestore.FS(fs))
	require.NoError(t, err)
	t.Cleanup(func() { failing.Store(false); _ = s.Close() })
	kv, err := s.Store("counts")
	require.NoError(t, err)
	require.NoError(t, kv.Put([]byte("before"), []byte("1")))
	require.NoError(t, s.Commit([]byte("c1")))

	failing.Store(true)
	// More than a commit writes before the set asks for a flush.
	value := make([]byte, 1<<10)
	for i := range 5 << 10 {
		require.NoError(t, kv.Put([]byte(fmt.Sprint("k", i)), value))
	}
	require.NoError(t, s.Commit([]byte("c2")), "the commit itself lands in memory")
	deadline := time.Now().Add(10 * time.Second)
	for err == nil {
		require.True(t, time.Now().Before(deadline), "commits still go through 10 s after the flush failed")
		require.NoError(t, kv.Put([]byte("after"), []byte("1")))
		err = s.Commit([]byte("c3"))
		time.Sleep(10 * time.Millisecond)
	}
	assert.ErrorIs(t, err, errorfs.ErrInjected)
}

// A set whose flushes fail (a full disk) closes without waiting for one
// to succeed: Pebble's own Flush waits until one does, and a worker whose
// failed task closed its stores froze until space was freed. Once the
// disk takes writes again the set opens with its last flushed commit.
func TestASetWhoseFlushesFailClosesAtOnce(t *testing.T) {
	var failing atomic.Bool
	fs := failingFS(&failing)
	s, err := pebblestore.Open("db", pebblestore.FS(fs))
	require.NoError(t, err)
	kv, err := s.Store("counts")
	require.NoError(t, err)
	require.NoError(t, kv.Put([]byte("before"), []byte("1")))
	require.NoError(t, s.Commit([]byte("c1")))
	require.NoError(t, s.Sync())

	failing.Store(true)
	require.NoError(t, kv.Put([]byte("lost"), []byte("1")))
	require.NoError(t, s.Commit([]byte("c2")), "the commit itself lands in memory")
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		assert.ErrorIs(t, err, errorfs.ErrInjected, "Close says the flush failed")
	case <-time.After(10 * time.Second):
		failing.Store(false) // let the flush succeed, so that Close returns
		<-closed
		t.Fatal("Close waited for a flush that kept failing")
	}

	failing.Store(false)
	again, err := pebblestore.Open("db", pebblestore.FS(fs))
	require.NoError(t, err)
	defer again.Close()
	cp, err := again.Checkpoint()
	require.NoError(t, err)
	assert.Equal(t, "c1", string(cp), "the last commit flushed; the changelog has the rest")
	kv, err = again.Store("counts")
	require.NoError(t, err)
	_, found, err := kv.Get([]byte("before"))
	require.NoError(t, err)
	assert.True(t, found)
}

// failingFS is a file system in memory whose every write fails while
// failing is set, as on a full disk.
func failingFS(failing *atomic.Bool) vfs.FS {
	return errorfs.Wrap(vfs.NewMem(), errorfs.InjectorFunc(func(op errorfs.Op) error {
		if failing.Load() && op.Kind.ReadOrWrite() == errorfs.OpIsWrite {
			return errorfs.ErrInjected
		}
		return nil
	}))
}
