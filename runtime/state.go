package runtime

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"

	"go.uber.org/zap"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/store"
	"github.com/causeway-stream/causeway/framework/store/pebblestore"
	"github.com/causeway-stream/causeway/internal/taskmgr"
)

// Where a task's stores live. With Config.Stores "pebble" (the default),
// each task keeps the stores not declared InMemory in one Pebble database
// of its own, under <state-dir>/tasks/<application-id>/<processor>/<p>,
// with the positions of their changelogs that the local copy reflects; a
// restore reads only what the changelogs hold past those positions. With
// "memory", or for stores declared InMemory, stores are kept in memory and
// restored in full whenever their task starts on a worker.

// Store backends (Config.Stores).
const (
	StoresPebble = "pebble"
	StoresMemory = "memory"
)

// onDisk reports whether the worker keeps store spec on disk.
func (w *Worker) onDisk(spec framework.StoreSpec) bool {
	return w.cfg.Stores == StoresPebble && !spec.Memory
}

// taskDir is the directory of a task's stores on disk.
func (w *Worker) taskDir(t *taskmgr.Task) string {
	return filepath.Join(w.cfg.StateDir, "tasks", url.PathEscape(w.cfg.ApplicationID), url.PathEscape(t.Processor),
		strconv.FormatInt(int64(t.Partition), 10))
}

// openStores opens the store set of a task: on disk, in memory, or split
// between the two by each store's declaration. Local state that cannot be
// opened (corrupt, or in another layout) is wiped and opened empty, for
// the restore to fill from the changelog.
func (w *Worker) openStores(t *taskmgr.Task) (store.Set, error) {
	info, ok := w.topo.Processor(t.Processor)
	if !ok {
		return nil, fmt.Errorf("no processor %q", t.Processor)
	}
	inMemory := map[string]bool{}
	disk := false
	for _, s := range info.Stores {
		if w.onDisk(s) {
			disk = true
		} else {
			inMemory[s.Name] = true
		}
	}
	if !disk {
		return store.NewMemorySet(), nil
	}
	dir := w.taskDir(t)
	set, err := pebblestore.Open(dir)
	if err != nil {
		w.log.Warn("local state cannot be opened: wiping it and restoring from the changelog", zap.String("task", t.ID), zap.String("dir", dir), zap.Error(err))
		if err := os.RemoveAll(dir); err != nil {
			return nil, fmt.Errorf("wipe %s: %w", dir, err)
		}
		if set, err = pebblestore.Open(dir); err != nil {
			return nil, err
		}
	}
	if len(inMemory) == 0 {
		return set, nil
	}
	return store.Split(set, inMemory), nil
}

// wipeStores throws a task's local stores away and opens them empty.
func (w *Worker) wipeStores(t *taskmgr.Task, why error) error {
	if t.Stores != nil {
		if err := t.Stores.Close(); err != nil {
			w.log.Warn("close stores before wiping them", zap.String("task", t.ID), zap.Error(err))
		}
		t.Stores = nil
	}
	dir := w.taskDir(t)
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("wipe %s (%v): %w", dir, why, err)
	}
	set, err := w.openStores(t)
	if err != nil {
		return err
	}
	t.Stores = set
	return nil
}

// savePositions records, for each task's stores on disk, that they hold
// every committed change of their changelogs: to be called on a clean
// close, when the worker still owns the tasks and their stores hold the
// last committed state, so that the next restore reads nothing. Pending
// writes, which no transaction holds, are discarded first. A task whose
// positions cannot be read keeps the ones it has (a later restore replays
// more).
func (w *Worker) savePositions() {
	for _, t := range w.tasks.Tasks() {
		if t.Stores == nil || t.Last == nil {
			continue
		}
		info, _ := w.topo.Processor(t.Processor)
		pos := storePositions{}
		var err error
		for _, s := range info.Stores {
			if !w.onDisk(s) {
				continue
			}
			ch := causal.Channel{Topic: storeChangelogTopic(w.cfg.ApplicationID, s.Name), Partition: t.Partition}
			var high int64
			if _, high, err = w.consumer.QueryWatermarkOffsets(ch.Topic, ch.Partition, 5000); err != nil {
				break
			}
			pos[s.Name] = high
		}
		if len(pos) == 0 || err != nil {
			if err != nil {
				w.log.Warn("changelog positions not saved; the next restore of the task replays more", zap.String("task", t.ID), zap.Error(err))
			}
			continue
		}
		if err := errors.Join(t.Stores.Abort(), t.Stores.Commit(pos.encode())); err != nil {
			w.log.Warn("changelog positions not saved; the next restore of the task replays more", zap.String("task", t.ID), zap.Error(err))
			continue
		}
		w.positions[t.ID] = pos
	}
}
