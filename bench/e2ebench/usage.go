//go:build cgo

package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// usage is what a process has used so far: user and system CPU time, all
// threads included, and page faults.
type usage struct {
	cpu    time.Duration
	faults int64
}

// processUsage reads a process's usage; pid 0 is this process. Other
// processes are read from /proc; where that fails the usage is zero.
func processUsage(pid int) usage {
	if pid == 0 {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			return usage{}
		}
		return usage{cpu: time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), faults: ru.Minflt + ru.Majflt}
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return usage{}
	}
	// Fields after the command name, which is in parentheses and may hold
	// spaces: state is field 3, minflt 10, majflt 12, utime 14 and stime
	// 15 (in clock ticks).
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return usage{}
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return usage{}
	}
	var n [4]int64
	for k, field := range []int{7, 9, 11, 12} {
		if n[k], err = strconv.ParseInt(f[field], 10, 64); err != nil {
			return usage{}
		}
	}
	const ticksPerSecond = 100 // USER_HZ on Linux
	return usage{cpu: time.Duration(n[2]+n[3]) * time.Second / ticksPerSecond, faults: n[0] + n[1]}
}

// brokerGODEBUG is the broker process's GODEBUG: the caller's, with the Go
// runtime told to hand freed memory back lazily (MADV_FREE). The broker's
// heap swings by hundreds of megabytes as each run's topics come and go;
// handed back at once, the memory has to be faulted in again by the next
// run, which on a virtual machine where a fault is dear lands on whichever
// configuration comes next.
func brokerGODEBUG() string {
	if cur := os.Getenv("GODEBUG"); cur != "" {
		return cur + ",madvdontneed=0"
	}
	return "madvdontneed=0"
}

// pageFaultMicros is what the first touch of a page of fresh memory costs
// on this machine, in microseconds: 64 MiB mapped and written one byte a
// page. It is reported with the results because it says how much of
// their spread the machine's memory handling can explain.
func pageFaultMicros() (float64, error) {
	const size = 64 << 20
	page := os.Getpagesize()
	b, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return 0, fmt.Errorf("map memory: %w", err)
	}
	defer func() { _ = syscall.Munmap(b) }()
	began := time.Now()
	for i := 0; i < size; i += page {
		b[i] = 1
	}
	return time.Since(began).Seconds() * 1e6 / float64(size/page), nil
}
