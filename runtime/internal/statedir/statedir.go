// Package statedir guards a worker's state dir: one worker process at a
// time holds it, and one refused is told who holds it.
package statedir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// ErrInUse is returned by Lock when another live process holds the state
// dir. The error names the holder as it wrote itself down.
var ErrInUse = errors.New("state dir in use by another worker")

// lockFile is the file in a state dir that a worker holds an
// exclusive lock on while it runs; it says who holds it.
const lockFile = "causeway.lock"

// A Lock is a held lock on a state dir.
//
//causeway:owned
type Lock struct {
	f *os.File
}

// Take takes the state dir's lock, or returns ErrInUse
// naming the process that has it. The lock goes with the process: a worker
// killed with SIGKILL leaves nothing to clean up. what describes the
// holder (its instance id), written into the file for whoever is refused.
func Take(dir, what string) (*Lock, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("state dir: %w", err)
	}
	path := filepath.Join(dir, lockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("state dir lock: %w", err)
	}
	held, err := tryLock(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("state dir lock %s: %w", path, err)
	}
	if !held {
		holder, _ := os.ReadFile(path) // best effort: the error stands without it
		f.Close()
		who := strings.TrimSpace(string(holder))
		if who == "" {
			who = "a process that has not said who it is"
		}
		return nil, fmt.Errorf("%w: %s is held by %s; give each worker its own --state-dir", ErrInUse, dir, who)
	}
	host, _ := os.Hostname()
	info := fmt.Sprintf("pid %d on host %s (%s), since %s\n", os.Getpid(), host, what, time.Now().UTC().Format(time.RFC3339))
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(info), 0) // who holds it is for the error above, not for the lock
	}
	return &Lock{f: f}, nil
}

// Release gives the lock up; a nil Lock has nothing to give up.
func (l *Lock) Release() error {
	if l == nil {
		return nil
	}
	return l.f.Close()
}
