package task

import (
	"errors"
	"fmt"
	"time"

	"github.com/causeway-stream/causeway/framework/store"
)

// Committed is what was committed for one task: the changes of each of its
// stores in the order they were made, the gate checkpoint, the stream time,
// and the next offset of each input (the topic's partition Partition).
type Committed struct {
	Stores     map[string][]store.Change
	Checkpoint []byte // nil: the task never committed a checkpoint
	StreamTime time.Time
	Next       map[string]int64
}

// Rebuild builds a task from what was committed for it, and starts it: the
// one way a task comes back after a restart, an aborted transaction or a
// reassignment, in the runtime and in the test driver alike. Nothing of a
// previous instance is patched; an input missing from c.Next starts at
// offset 0. On an error the task is closed.
func Rebuild(cfg Config, c Committed) (*Task, error) {
	t, err := New(cfg)
	if err != nil {
		return nil, err
	}
	if err := t.restore(c); err != nil {
		return nil, errors.Join(err, t.Close())
	}
	return t, nil
}

func (t *Task) restore(c Committed) error {
	for name, changes := range c.Stores {
		if err := t.RestoreStore(name, changes); err != nil {
			return err
		}
	}
	if c.Checkpoint != nil {
		if err := t.RestoreGate(c.Checkpoint); err != nil {
			return err
		}
	}
	t.RestoreStreamTime(c.StreamTime)
	for _, in := range t.info.Inputs {
		if err := t.Seed(in, c.Next[in]); err != nil {
			return fmt.Errorf("seed %s: %w", in, err)
		}
	}
	if err := t.SeedGlobals(); err != nil {
		return err
	}
	return t.Start()
}
