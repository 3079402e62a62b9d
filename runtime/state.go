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
	"github.com/causeway-stream/causeway/runtime/internal/transport"

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

// localState is a stream thread's state on this machine: where its
// tasks' stores live and the block cache those on disk share, and where
// they stand in their changelogs (positions), learned while the thread
// runs by looks at the changelogs' ends off the pump (refresh). Owned by
// the pump, but for the block cache, which restores use too (under
// cacheMu).
//
//causeway:owned
type localState struct {
	app, dir, stores string
	topo             *framework.Topology
	log              *zap.Logger
	// offsets and tasks are the thread's consumer and tasks, given once
	// the thread is connected.
	offsets transport.OffsetSource
	tasks   *taskmgr.Manager
	// positions is, per task, where its stores on disk stand in their
	// changelogs, as last learned; sizes, how many changelog records a
	// full restore of its stores would read, as the last look found.
	positions map[string]restore.Positions
	sizes     map[string]int64
	refresh   positionRefresh
	// blockCache is made when the first store on disk opens.
	cacheMu    sync.Mutex
	blockCache *pebble.Cache
}

func newLocalState(cfg Config, topo *framework.Topology, log *zap.Logger) *localState {
	return &localState{app: cfg.ApplicationID, dir: cfg.StateDir, stores: cfg.Stores, topo: topo, log: log,
		positions: map[string]restore.Positions{}, sizes: map[string]int64{},
		refresh: positionRefresh{every: cfg.StatePositionsInterval, results: make(chan refreshed, 1), start: func(f func()) { go f() }}}
}

// connect gives the local state the thread's consumer, which asks the
// changelogs' ends, and its tasks.
func (l *localState) connect(offsets transport.OffsetSource, tasks *taskmgr.Manager) {
	l.offsets, l.tasks = offsets, tasks
}

// position is where the stores of task id stand in their changelogs, as
// last learned.
func (l *localState) position(id string) restore.Positions { return l.positions[id] }

// restored notes where a restore left the stores of task id.
func (l *localState) restored(id string, pos restore.Positions) { l.positions[id] = pos }

// size is how many records a full restore of task id's stores would
// read, and whether it is known.
func (l *localState) size(id string) (int64, bool) {
	n, ok := l.sizes[id]
	return n, ok
}

// close waits for the look at the changelogs under way, which uses the
// consumer, and lets the block cache go.
func (l *localState) close() {
	l.refresh.wg.Wait()
	l.cacheMu.Lock()
	defer l.cacheMu.Unlock()
	if l.blockCache != nil {
		l.blockCache.Unref()
		l.blockCache = nil
	}
}

// onDisk reports whether the thread keeps store spec on disk.
func (l *localState) onDisk(spec framework.StoreSpec) bool {
	return l.stores == StoresPebble && !spec.Memory
}

// taskDir is the directory of a task's stores on disk.
func (l *localState) taskDir(t *taskmgr.Task) string {
	return filepath.Join(l.dir, "tasks", url.PathEscape(l.app), url.PathEscape(t.Processor()),
		strconv.FormatInt(int64(t.Partition()), 10))
}

// openStores opens the store set of a task: on disk, in memory, or split
// between the two by each store's declaration. Local state that cannot be
// opened (corrupt, or in another layout) is wiped and opened empty, for
// the restore to fill from the changelog.
func (l *localState) openStores(t *taskmgr.Task) (store.Set, error) {
	info, ok := l.topo.Processor(t.Processor())
	if !ok {
		return nil, fmt.Errorf("no processor %q", t.Processor())
	}
	inMemory := map[string]bool{}
	disk := false
	for _, s := range info.Stores {
		if l.onDisk(s) {
			disk = true
		} else {
			inMemory[s.Name] = true
		}
	}
	if !disk {
		return store.NewMemorySet(), nil
	}
	dir := l.taskDir(t)
	cache := l.sharedCache()
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
		l.log.Warn("local state cannot be opened: wiping it and restoring from the changelog", zap.String("task", t.ID()), zap.String("dir", dir), zap.Error(err))
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
func (l *localState) sharedCache() *pebble.Cache {
	l.cacheMu.Lock()
	defer l.cacheMu.Unlock()
	if l.blockCache == nil {
		l.blockCache = pebble.NewCache(blockCacheBytes)
	}
	return l.blockCache
}

// wipe throws a task's local stores away and opens them empty.
func (l *localState) wipe(t *taskmgr.Task, why error) error {
	if err := t.ReplaceStores(nil); err != nil {
		l.log.Warn("close stores before wiping them", zap.String("task", t.ID()), zap.Error(err))
	}
	dir := l.taskDir(t)
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("wipe %s (%v): %w", dir, why, err)
	}
	set, err := l.openStores(t)
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
func (l *localState) savePositions(ts []*taskmgr.Task) {
	for _, t := range ts {
		if t.State() == StateRestoring || t.Stores() == nil || t.Last() == nil {
			continue
		}
		chs := restore.DiskChangelogs(l.app, l.topo, l.onDisk, t)
		if len(chs) == 0 {
			continue
		}
		pos, err := restore.EndPositions(l.offsets, chs)
		if err == nil {
			err = errors.Join(t.Stores().Abort(), t.Stores().Commit(pos.Encode()))
		}
		if err != nil {
			l.log.Warn("changelog positions not saved; the next restore of the task replays more", zap.String("task", t.ID()), zap.Error(err))
			continue
		}
		l.positions[t.ID()] = pos
	}
}

// positionRefresh is one look at the changelogs' ends, made off the pump
// (the queries go to the broker) and handed back to it.
//
//causeway:owned
type positionRefresh struct {
	// pending is set while a look is under way; due is when the next one
	// starts.
	pending bool
	due     time.Time
	// every is how long after a look the next is due
	// (Config.StatePositionsInterval).
	every   time.Duration
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
func (r *positionRefresh) schedule(now time.Time) { r.due = now.Add(r.every) }

// looking notes that a look is under way.
func (r *positionRefresh) looking() { r.pending = true }

// refreshPositions takes what a finished look learned, and starts the next
// one when it is due. A position read at any moment after a task's stores
// last committed is one below which they hold every committed change once
// they commit again, so the next commit of their stores carries it.
func (l *localState) refreshPositions(now time.Time) {
	r := &l.refresh
	select {
	case got := <-r.results:
		r.received()
		l.sizes = got.sizes
		for id, pos := range got.positions {
			if t, ok := l.tasks.Find(id); ok && t.State() != StateRestoring && t.Stores() != nil {
				l.positions[id] = pos
			}
		}
	default:
	}
	if r.pending || now.Before(r.due) || l.stores != StoresPebble {
		return
	}
	want := map[string]map[string]causal.Channel{}
	for _, t := range l.tasks.Tasks() {
		if t.State() == StateRestoring || t.Stores() == nil || t.Last() == nil {
			continue
		}
		if chs := restore.DiskChangelogs(l.app, l.topo, l.onDisk, t); len(chs) > 0 {
			want[t.ID()] = chs
		}
	}
	if len(want) == 0 {
		return // looked at again at the next tick: the first look comes with the first commit
	}
	r.schedule(now)
	r.looking()
	offsets := l.offsets
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

// openCold opens the stores of the tasks Prepare returned for a restore,
// and returns those it opened; a task whose stores cannot be opened fails
// (and is not restored), and abort says whether one of them had work in
// the open transaction.
func (l *localState) openCold(cold []*taskmgr.Task) (opened []*taskmgr.Task, abort bool) {
	opened = cold[:0:0]
	for _, rt := range cold {
		set, err := l.openStores(rt)
		if err != nil {
			abort = l.tasks.Fail(rt, fmt.Errorf("open stores: %w", err)) || abort
			continue
		}
		l.tasks.Opened(rt, set)
		opened = append(opened, rt)
	}
	return opened, abort
}
