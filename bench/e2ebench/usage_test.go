//go:build cgo

package main

import (
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// touchFresh maps n pages of fresh memory and writes one byte to each, so
// that each costs the process one page fault.
func touchFresh(t *testing.T, n int) {
	t.Helper()
	page := os.Getpagesize()
	b, err := syscall.Mmap(-1, 0, n*page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	require.NoError(t, err)
	defer func() { require.NoError(t, syscall.Munmap(b)) }()
	for i := 0; i < n; i++ {
		b[i*page] = 1
	}
}

// The /proc reading (used for the broker and the reader) and the rusage
// reading (used for this process) both count the faults of touching fresh
// pages, and the CPU used so far.
func TestProcessUsageCountsFaults(t *testing.T) {
	const pages = 2048
	for _, tc := range []struct {
		name string
		pid  int
	}{
		{"rusage", 0},
		{"proc", os.Getpid()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := processUsage(tc.pid)
			touchFresh(t, pages)
			after := processUsage(tc.pid)
			require.GreaterOrEqual(t, after.faults-before.faults, int64(pages), "faults counted")
			require.Positive(t, after.cpu, "CPU used so far")
		})
	}
}
