package task

import (
	"errors"
	"fmt"

	"github.com/causeway-stream/causeway/framework/store"
)

// Committed is what was committed for one task: the changes of each of its
// stores in the order they were made, and its checkpoint (nil: none was
// found; the task then starts every input at offset 0, with no stream
// time and an empty gate).
type Committed struct {
	Stores     map[string][]store.Change
	Checkpoint *Checkpoint
}

// Rebuild builds a task from what was committed for it, and starts it: the
// one way a task comes back after a restart, an aborted transaction or a
// reassignment, in the runtime and in the test driver alike. Nothing of a
// previous instance is patched; an input missing from the checkpoint's
// Next starts at offset 0. On an error the task is closed.
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
	var cp Checkpoint
	if c.Checkpoint != nil {
		cp = *c.Checkpoint
	}
	if cp.Gate != nil {
		if err := t.RestoreGate(cp.Gate); err != nil {
			return err
		}
	}
	t.RestoreStreamTime(cp.StreamTime)
	for _, in := range t.info.Inputs {
		if err := t.Seed(in, cp.Next[in]); err != nil {
			return fmt.Errorf("seed %s: %w", in, err)
		}
	}
	if err := t.SeedGlobals(); err != nil {
		return err
	}
	return t.Start()
}
