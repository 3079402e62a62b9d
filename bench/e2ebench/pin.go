//go:build cgo

package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// cpuSplit is how -pin divides the machine: the pipeline's process gets the
// first half of the CPUs this process may use, the broker and the output
// reader the rest, so the pipeline's own CPU alone sets its throughput.
func cpuSplit() (pipeline, helpers []int, err error) {
	cpus, err := allowedCPUs()
	if err != nil {
		return nil, nil, err
	}
	if len(cpus) < 2 {
		return nil, nil, fmt.Errorf("-pin needs at least 2 CPUs, this process may use %d", len(cpus))
	}
	return cpus[:len(cpus)/2], cpus[len(cpus)/2:], nil
}

// allowedCPUs lists the CPUs the calling thread may run on.
func allowedCPUs() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("read CPU affinity: %w", err)
	}
	var cpus []int
	for c := range 1024 {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

// pinTo restricts every thread of this process to cpus. Threads inherit
// their creator's affinity, so the threads started later (the Go runtime's,
// librdkafka's) are restricted too; the second pass catches any thread
// started while the first one ran.
func pinTo(cpus []int) error {
	var set unix.CPUSet
	set.Zero()
	for _, c := range cpus {
		set.Set(c)
	}
	for range 2 {
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return fmt.Errorf("list threads: %w", err)
		}
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil {
				continue
			}
			if err := unix.SchedSetaffinity(tid, &set); err != nil && err != unix.ESRCH { // ESRCH: the thread has exited
				return fmt.Errorf("pin thread %d to CPUs %v: %w", tid, cpus, err)
			}
		}
	}
	return nil
}

// formatCPUs and parseCPUs carry a CPU list on a helper's command line.
func formatCPUs(cpus []int) string {
	s := make([]string, len(cpus))
	for i, c := range cpus {
		s[i] = strconv.Itoa(c)
	}
	return strings.Join(s, ",")
}

func parseCPUs(s string) ([]int, error) {
	var cpus []int
	for _, f := range strings.Split(s, ",") {
		c, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || c < 0 {
			return nil, fmt.Errorf("bad CPU %q in %q", f, s)
		}
		cpus = append(cpus, c)
	}
	return cpus, nil
}
