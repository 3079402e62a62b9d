package runtime

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/causeway-stream/causeway/runtime/internal/restore"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"go.uber.org/zap"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/store"
	"github.com/causeway-stream/causeway/framework/store/pebblestore"
	"github.com/causeway-stream/causeway/framework/taskmgr"
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

// blockCacheBytes is the size of the block cache the worker's stores on
// disk share.
const blockCacheBytes = 64 << 20

// onDisk reports whether the worker keeps store spec on disk.
func (w *StreamThread) onDisk(spec framework.StoreSpec) bool {
	return w.cfg.Stores == StoresPebble && !spec.Memory
}

// taskDir is the directory of a task's stores on disk.
func (w *StreamThread) taskDir(t *taskmgr.Task) string {
	return filepath.Join(w.cfg.StateDir, "tasks", url.PathEscape(w.cfg.ApplicationID), url.PathEscape(t.Processor()),
		strconv.FormatInt(int64(t.Partition()), 10))
}

// openStores opens the store set of a task: on disk, in memory, or split
// between the two by each store's declaration. Local state that cannot be
// opened (corrupt, or in another layout) is wiped and opened empty, for
// the restore to fill from the changelog.
func (w *StreamThread) openStores(t *taskmgr.Task) (store.Set, error) {
	info, ok := w.topo.Processor(t.Processor())
	if !ok {
		return nil, fmt.Errorf("no processor %q", t.Processor())
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
	cache := w.sharedCache()
	set, err := pebblestore.Open(dir, pebblestore.SharedCache(cache))
	if err != nil {
		// Stores another process has open are not corrupt: never wipe
		// those (the state dir's own lock should have kept it away).
		lock, lockErr := pebble.LockDirectory(dir, vfs.Default)
		switch {
		case lockErr == nil:
			if err := lock.Close(); err != nil {
				return nil, fmt.Errorf("stores of task %s: %w", t.ID(), err)
			}
		case !errors.Is(lockErr, fs.ErrNotExist):
			return nil, fmt.Errorf("%w: the stores of task %s in %s are open elsewhere: %w", ErrStateDirInUse, t.ID(), dir, err)
		}
		w.log.Warn("local state cannot be opened: wiping it and restoring from the changelog", zap.String("task", t.ID()), zap.String("dir", dir), zap.Error(err))
		if err := os.RemoveAll(dir); err != nil {
			return nil, fmt.Errorf("wipe %s: %w", dir, err)
		}
		if set, err = pebblestore.Open(dir, pebblestore.SharedCache(cache)); err != nil {
			return nil, err
		}
	}
	if len(inMemory) == 0 {
		return set, nil
	}
	return store.Split(set, inMemory), nil
}

// sharedCache returns the block cache the worker's stores on disk share,
// made on first use.
func (w *StreamThread) sharedCache() *pebble.Cache {
	w.cacheMu.Lock()
	defer w.cacheMu.Unlock()
	if w.blockCache == nil {
		w.blockCache = pebble.NewCache(blockCacheBytes)
	}
	return w.blockCache
}

// wipeStores throws a task's local stores away and opens them empty.
func (w *StreamThread) wipeStores(t *taskmgr.Task, why error) error {
	if err := t.ReplaceStores(nil); err != nil {
		w.log.Warn("close stores before wiping them", zap.String("task", t.ID()), zap.Error(err))
	}
	dir := w.taskDir(t)
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("wipe %s (%v): %w", dir, why, err)
	}
	set, err := w.openStores(t)
	if err != nil {
		return err
	}
	return t.ReplaceStores(set) // closes nothing: the stores were let go above
}

// savePositions records, for each of the tasks' stores on disk, that they hold
// every committed change of their changelogs: to be called on a clean
// close, when the worker still owns the tasks and their stores hold the
// last committed state, so that the next restore reads nothing. Pending
// writes, which no transaction holds, are discarded first. A task whose
// positions cannot be read keeps the ones it has (a later restore replays
// more).
func (w *StreamThread) savePositions(ts []*taskmgr.Task) {
	for _, t := range ts {
		if t.State() == StateRestoring || t.Stores() == nil || t.Last() == nil {
			continue
		}
		chs := restore.DiskChangelogs(w.cfg.ApplicationID, w.topo, w.onDisk, t)
		if len(chs) == 0 {
			continue
		}
		pos, err := restore.EndPositions(w.consumer, chs)
		if err == nil {
			err = errors.Join(t.Stores().Abort(), t.Stores().Commit(pos.Encode()))
		}
		if err != nil {
			w.log.Warn("changelog positions not saved; the next restore of the task replays more", zap.String("task", t.ID()), zap.Error(err))
			continue
		}
		w.positions[t.ID()] = pos
	}
}

// positionsEvery is how often the worker learns where its stores on disk
// stand in their changelogs while it runs, which bounds what a restart
// after a crash replays to what was written since.
const positionsEvery = 10 * time.Second

// positionRefresh is one look at the changelogs' ends, made off the pump
// (the queries go to the broker) and handed back to it.
//
//causeway:owned
type positionRefresh struct {
	// pending is set while a look is under way; due is when the next one
	// starts.
	pending bool
	due     time.Time
	results chan refreshed
	wg      sync.WaitGroup
	// start runs a look; tests run it in place.
	start func(func())
}

// refreshed is what one look found: where each task's stores on disk
// stand in their changelogs, and how many records a full restore of them
// would read.
type refreshed struct {
	positions map[string]restore.Positions
	sizes     map[string]int64
}

// received notes that the look under way brought its positions back.
func (r *positionRefresh) received() { r.pending = false }

// schedule makes the next look due a while after now.
func (r *positionRefresh) schedule(now time.Time) { r.due = now.Add(positionsEvery) }

// looking notes that a look is under way.
func (r *positionRefresh) looking() { r.pending = true }

// refreshPositions takes what a finished look learned, and starts the next
// one when it is due. A position read at any moment after a task's stores
// last committed is one below which they hold every committed change once
// they commit again, so the next commit of their stores carries it.
func (w *StreamThread) refreshPositions(now time.Time) {
	r := &w.refresh
	select {
	case got := <-r.results:
		r.received()
		w.sizes = got.sizes
		for id, pos := range got.positions {
			if t, ok := w.tasks.Find(id); ok && t.State() != StateRestoring && t.Stores() != nil {
				w.positions[id] = pos
			}
		}
	default:
	}
	if r.pending || now.Before(r.due) || w.cfg.Stores != StoresPebble {
		return
	}
	r.schedule(now)
	want := map[string]map[string]causal.Channel{}
	for _, t := range w.tasks.Tasks() {
		if t.State() == StateRestoring || t.Stores() == nil || t.Last() == nil {
			continue
		}
		if chs := restore.DiskChangelogs(w.cfg.ApplicationID, w.topo, w.onDisk, t); len(chs) > 0 {
			want[t.ID()] = chs
		}
	}
	if len(want) == 0 {
		return
	}
	r.looking()
	offsets := w.consumer
	r.wg.Add(1)
	r.start(func() {
		defer r.wg.Done()
		got := refreshed{positions: map[string]restore.Positions{}, sizes: map[string]int64{}}
		for id, chs := range want {
			if pos, err := restore.EndPositions(offsets, chs); err == nil {
				got.positions[id] = pos
			}
			for _, ch := range chs {
				if low, high, err := offsets.Watermarks(ch); err == nil {
					got.sizes[id] += high - low
				}
			}
		}
		r.results <- got
	})
}
