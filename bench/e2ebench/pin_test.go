//go:build cgo

package main

import (
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCPUListRoundTrip(t *testing.T) {
	tests := []struct {
		in   string
		want []int
		bad  bool
	}{
		{"0", []int{0}, false},
		{"2,3", []int{2, 3}, false},
		{" 1 , 4", []int{1, 4}, false},
		{"", nil, true},
		{"1,x", nil, true},
		{"-1", nil, true},
	}
	for _, tt := range tests {
		got, err := parseCPUs(tt.in)
		if tt.bad {
			assert.Error(t, err, tt.in)
			continue
		}
		require.NoError(t, err, tt.in)
		assert.Equal(t, tt.want, got)
		back, err := parseCPUs(formatCPUs(got))
		require.NoError(t, err)
		assert.Equal(t, got, back)
	}
}

// threadCPUs reads the allowed-CPU list of every thread of this process.
func threadCPUs(t *testing.T) map[string]string {
	t.Helper()
	tasks, err := os.ReadDir("/proc/self/task")
	require.NoError(t, err)
	out := map[string]string{}
	for _, task := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + task.Name() + "/status")
		if err != nil {
			continue // exited meanwhile
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
				out[task.Name()] = strings.TrimSpace(v)
			}
		}
	}
	return out
}

// pinTo must reach every thread of the process, not just the calling one,
// and the threads started after it.
func TestPinToReachesEveryThread(t *testing.T) {
	allowed, err := allowedCPUs()
	require.NoError(t, err)
	// With one CPU a pinned thread looks like an unpinned one; -pin itself
	// refuses to run there, and CI has two.
	require.GreaterOrEqual(t, len(allowed), 2, "telling a pinned thread from an unpinned one needs 2 CPUs")
	defer func() { require.NoError(t, pinTo(allowed)) }()

	require.NoError(t, pinTo(allowed[:1]))
	// Start threads after pinning: goroutines locked to their threads make
	// the runtime start new ones.
	done := make(chan struct{})
	started := make(chan struct{})
	for range 4 {
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			started <- struct{}{}
			<-done
		}()
	}
	for range 4 {
		<-started
	}
	defer close(done)
	want := formatCPUs(allowed[:1])
	for tid, cpus := range threadCPUs(t) {
		assert.Equal(t, want, cpus, "thread %s", tid)
	}
}
