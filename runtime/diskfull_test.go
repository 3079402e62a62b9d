package runtime_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/runtime"
)

// smallDisk mounts a tmpfs of size bytes for the test, unmounted when it
// ends. Mounting needs root, as CI and the development machines run.
func smallDisk(t *testing.T, size int) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small file system for a full disk needs root")
	}
	dir := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", size), "tmpfs", dir).CombinedOutput()
	require.NoError(t, err, "mount: %s", out)
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// A full state-dir disk fails the tasks whose stores cannot be written,
// within seconds, naming the path and the cause, and the worker says it
// is not ready; nothing blocks (the worker stops on request). Once space
// is freed, a restart of the task recovers it with nothing lost or done
// twice.
func TestAFullDiskFailsTheTaskAndARestartRecoversIt(t *testing.T) {
	t.Parallel()
	eachClient(t, func(t *testing.T, client string) {
		disk := smallDisk(t, 16<<20)
		b := startBroker(t)
		createTopics(t, b.Addr(), 1, "orders", "payments", "verdicts")
		cfg := testConfigFor(t, client, b.Addr(), "shop-disk-full")
		cfg.StateDir = filepath.Join(disk, client)
		w := startWorker(t, cfg)

		// Leave about 2 MiB free on the disk, then write more than that
		// into the orders store.
		filler := filepath.Join(disk, "filler")
		var st syscallStatfs
		require.NoError(t, statfs(disk, &st))
		free := int(st.Bavail) * int(st.Bsize)
		require.NoError(t, os.WriteFile(filler, make([]byte, max(0, free-2<<20)), 0o644))
		p := newProducer(t, b.Addr(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		wl := workload{payments: map[string][]string{}}
		sent := 0
		send := func() {
			s := &causal.Session{}
			id := fmt.Sprintf("o%03d", sent)
			value := randomBytes(64<<10, byte(sent))
			sendRecord(t, p, &kgo.Record{Topic: "orders", Key: []byte(id), Value: value}, s)
			sendRecord(t, p, &kgo.Record{Topic: "payments", Key: []byte(id), Value: []byte(id + "-p0")}, s)
			wl.payments[id] = []string{id + "-p0"}
			sent++
		}
		for range 160 {
			send()
		}
		var failed runtime.TaskStatus
		var last runtime.Status
		if !assert.Eventually(t, func() bool {
			// A store learns of its failed flush at its next commit, so
			// the orders go on until a task failed: on a loaded machine the
			// first 160 can all be committed before the flush has failed.
			if sent < 400 {
				send()
			}
			last = w.Status()
			for _, ts := range last.Tasks {
				if ts.State == runtime.StateFailed {
					failed = ts
					return true
				}
			}
			return false
		}, 30*time.Second, 100*time.Millisecond, "no task failed on the full disk") {
			require.NoError(t, statfs(disk, &st))
			t.Fatalf("status: %+v; %d bytes free on the disk", last, int(st.Bavail)*int(st.Bsize))
		}
		assert.Contains(t, failed.LastError, "no space left on device")
		assert.Contains(t, failed.LastError, cfg.StateDir)
		assert.False(t, w.Status().Ready)

		require.NoError(t, os.Remove(filler))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(t, w.RestartTask(ctx, failed.ID))
		verdicts := readCommitted(t, b.Addr(), "verdicts", wl.count(), 90*time.Second)
		assert.Empty(t, checkVerdicts(wl, verdicts), "every payment once, after its order")
		for _, ts := range w.Status().Tasks {
			assert.Equal(t, runtime.StateRunning, ts.State, ts.LastError)
		}
		assert.False(t, strings.Contains(w.Status().Reason, "FAILED"))
	})
}
