// Package storetest is the behaviour suite every store.Set backend passes:
// reads and scans, change capture, transactions (abort-then-read,
// commit-then-read) and, for backends that keep state across a restart,
// restart-then-read.
package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/framework/store"
)

// Backend opens sets of one kind for the suite.
type Backend struct {
	// Open returns a new, empty set. Required.
	Open func(t *testing.T) store.Set
	// Reopen, for backends that keep state across a restart, closes s and
	// opens the same set again. Nil for in-memory backends.
	Reopen func(t *testing.T, s store.Set) store.Set
}

// Run runs the suite against b.
func Run(t *testing.T, b Backend) {
	t.Run("ReadsAndScans", func(t *testing.T) { readsAndScans(t, b) })
	t.Run("ChangeCapture", func(t *testing.T) { changeCapture(t, b) })
	t.Run("AbortThenRead", func(t *testing.T) { abortThenRead(t, b) })
	t.Run("CommitThenRead", func(t *testing.T) { commitThenRead(t, b) })
	t.Run("CommittedView", func(t *testing.T) { committedView(t, b) })
	t.Run("Restore", func(t *testing.T) { restore(t, b) })
	t.Run("StoresAreSeparate", func(t *testing.T) { storesAreSeparate(t, b) })
	t.Run("WindowSegments", func(t *testing.T) { windowSegments(t, b) })
	t.Run("WindowMeta", func(t *testing.T) { windowMeta(t, b) })
	t.Run("WindowFarBounds", func(t *testing.T) { windowFarBounds(t, b) })
	if b.Reopen != nil {
		t.Run("RestartThenRead", func(t *testing.T) { restartThenRead(t, b) })
	}
}

func open(t *testing.T, b Backend, name string) (store.Set, store.Logged) {
	t.Helper()
	s := b.Open(t)
	t.Cleanup(func() { assert.NoError(t, s.Close()) })
	kv, err := s.Store(name)
	require.NoError(t, err)
	return s, kv
}

// Dump returns every key and value of kv in [from, to) as "k=v" strings.
func Dump(kv store.KeyValue, from, to string) []string {
	var f, e []byte
	if from != "" {
		f = []byte(from)
	}
	if to != "" {
		e = []byte(to)
	}
	var out []string
	for k, v := range kv.Range(f, e) {
		out = append(out, string(k)+"="+string(v))
	}
	return out
}

func put(t *testing.T, kv store.KeyValue, kvs ...string) {
	t.Helper()
	for i := 0; i+1 < len(kvs); i += 2 {
		require.NoError(t, kv.Put([]byte(kvs[i]), []byte(kvs[i+1])))
	}
}

func get(t *testing.T, kv store.KeyValue, key string) string {
	t.Helper()
	v, ok, err := kv.Get([]byte(key))
	require.NoError(t, err)
	if !ok {
		return "<none>"
	}
	return string(v)
}

func readsAndScans(t *testing.T, b Backend) {
	_, kv := open(t, b, "s")
	put(t, kv, "b", "bb", "a", "aa", "d", "dd", "c", "cc", "ab", "x", "ac", "y", "b\xff", "z")
	for _, tc := range []struct {
		from, to string
		want     []string
	}{
		{"", "", []string{"a=aa", "ab=x", "ac=y", "b=bb", "b\xff=z", "c=cc", "d=dd"}},
		{"b", "", []string{"b=bb", "b\xff=z", "c=cc", "d=dd"}},
		{"", "b", []string{"a=aa", "ab=x", "ac=y"}},
		{"ab", "c", []string{"ab=x", "ac=y", "b=bb", "b\xff=z"}},
		{"bb", "bc", nil},
	} {
		assert.Equal(t, tc.want, Dump(kv, tc.from, tc.to), "[%q, %q)", tc.from, tc.to)
	}
	var prefixed []string
	for k, v := range store.Prefix(kv, []byte("a")) {
		prefixed = append(prefixed, string(k)+"="+string(v))
	}
	assert.Equal(t, []string{"a=aa", "ab=x", "ac=y"}, prefixed)
	prefixed = nil
	for k := range store.Prefix(kv, []byte("b\xff")) {
		prefixed = append(prefixed, string(k))
	}
	assert.Equal(t, []string{"b\xff"}, prefixed)

	require.NoError(t, kv.Delete([]byte("c")))
	require.NoError(t, kv.Delete([]byte("never")))
	assert.Equal(t, "<none>", get(t, kv, "c"))
	assert.Equal(t, "dd", get(t, kv, "d"))

	// Inputs are copied: the caller may reuse its buffers.
	k, v := []byte("k"), []byte("v")
	require.NoError(t, kv.Put(k, v))
	k[0], v[0] = 'x', 'x'
	assert.Equal(t, "v", get(t, kv, "k"))
	assert.Equal(t, "<none>", get(t, kv, "x"))

	// An empty value is a value, not a delete.
	require.NoError(t, kv.Put([]byte("empty"), nil))
	assert.Equal(t, "", get(t, kv, "empty"))
}

func changeCapture(t *testing.T, b Backend) {
	s, kv := open(t, b, "s")
	put(t, kv, "a", "1", "b", "1", "a", "2")
	require.NoError(t, kv.Delete([]byte("b")))
	put(t, kv, "c", "3")
	assert.Equal(t, []store.Change{{Key: []byte("a"), Value: []byte("2")}, {Key: []byte("b")}, {Key: []byte("c"), Value: []byte("3")}}, kv.Changes())
	require.NoError(t, s.Commit([]byte("cp")))
	assert.Empty(t, kv.Changes(), "a commit settles the changes")
	put(t, kv, "d", "4")
	require.NoError(t, s.Abort())
	assert.Empty(t, kv.Changes(), "an abort discards the changes")
}

func abortThenRead(t *testing.T, b Backend) {
	s, kv := open(t, b, "s")
	put(t, kv, "a", "1", "c", "3")
	require.NoError(t, s.Commit([]byte("first")))

	put(t, kv, "a", "2", "b", "new", "a", "3")
	require.NoError(t, kv.Delete([]byte("c")))
	assert.Equal(t, []string{"a=3", "b=new"}, Dump(kv, "", ""), "reads see pending writes")
	require.NoError(t, s.Abort())

	assert.Equal(t, []string{"a=1", "c=3"}, Dump(kv, "", ""), "the abort left pending writes behind")
	assert.Equal(t, "1", get(t, kv, "a"))
	assert.Equal(t, "<none>", get(t, kv, "b"))
	cp, err := s.Checkpoint()
	require.NoError(t, err)
	assert.Equal(t, "first", string(cp))

	// The set goes on after an abort.
	put(t, kv, "b", "again")
	require.NoError(t, s.Commit([]byte("second")))
	assert.Equal(t, []string{"a=1", "b=again", "c=3"}, Dump(kv, "", ""))
}

func commitThenRead(t *testing.T, b Backend) {
	s, kv := open(t, b, "s")
	cp, err := s.Checkpoint()
	require.NoError(t, err)
	assert.Nil(t, cp, "a new set has no checkpoint")
	for i := range 3 {
		put(t, kv, fmt.Sprint("k", i), fmt.Sprint(i))
		require.NoError(t, s.Commit(fmt.Appendf(nil, "cp%d", i)))
	}
	require.NoError(t, s.Abort())
	assert.Equal(t, []string{"k0=0", "k1=1", "k2=2"}, Dump(kv, "", ""))
	cp, err = s.Checkpoint()
	require.NoError(t, err)
	assert.Equal(t, "cp2", string(cp))
}

func restore(t *testing.T, b Backend) {
	s, kv := open(t, b, "s")
	put(t, kv, "stale", "x")
	require.NoError(t, s.Commit(nil))
	require.NoError(t, kv.Restore([]store.Change{{Key: []byte("a"), Value: []byte("1")}, {Key: []byte("stale")}, {Key: []byte("a"), Value: []byte("2")}}))
	assert.Equal(t, []string{"a=2"}, Dump(kv, "", ""))
	assert.Empty(t, kv.Changes(), "a restore records no changes")
	put(t, kv, "p", "1")
	assert.Error(t, kv.Restore([]store.Change{{Key: []byte("b"), Value: []byte("1")}}), "restore under pending writes")
}

func storesAreSeparate(t *testing.T, b Backend) {
	s, one := open(t, b, "one")
	two, err := s.Store("two")
	require.NoError(t, err)
	// "o" is a prefix of "one": its keys must not show in one's scans.
	o, err := s.Store("o")
	require.NoError(t, err)
	put(t, one, "k", "1")
	put(t, two, "k", "2")
	put(t, o, "nek", "3")
	assert.Equal(t, []string{"k=1"}, Dump(one, "", ""))
	assert.Equal(t, []string{"k=2"}, Dump(two, "", ""))
	assert.Equal(t, []string{"nek=3"}, Dump(o, "", ""))
	again, err := s.Store("one")
	require.NoError(t, err)
	assert.Equal(t, "1", get(t, again, "k"))
}

func restartThenRead(t *testing.T, b Backend) {
	s := b.Open(t)
	kv, err := s.Store("s")
	require.NoError(t, err)
	put(t, kv, "a", "1", "b", "2")
	require.NoError(t, s.Commit([]byte("cp1")))
	put(t, kv, "a", "pending", "c", "pending")
	s = b.Reopen(t, s)
	t.Cleanup(func() { assert.NoError(t, s.Close()) })
	kv, err = s.Store("s")
	require.NoError(t, err)
	assert.Equal(t, []string{"a=1", "b=2"}, Dump(kv, "", ""), "a restart kept writes that were never committed")
	cp, err := s.Checkpoint()
	require.NoError(t, err)
	assert.Equal(t, "cp1", string(cp))
	assert.Empty(t, kv.Changes())
}

func windowSegments(t *testing.T, b Backend) {
	s, kv := open(t, b, "w")
	w := store.NewWindow(kv, time.Minute)
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	// Windows every 20 s for 4 minutes: 4 segments of a minute.
	for d := time.Duration(0); d < 4*time.Minute; d += 20 * time.Second {
		require.NoError(t, w.Put([]byte("k"), at(d), []byte(d.String())))
	}
	require.NoError(t, w.Put([]byte("k2"), at(0), []byte("other")))
	// A key that is a prefix of another must not leak into its fetches.
	require.NoError(t, w.Put([]byte("k\x00"), at(0), []byte("prefix")))
	require.NoError(t, s.Commit(nil))
	fetch := func(from, to time.Duration) []string {
		var got []string
		for start, v := range w.Fetch([]byte("k"), at(from), at(to)) {
			got = append(got, start.Sub(t0).String()+"="+string(v))
		}
		return got
	}
	assert.Equal(t, []string{"40s=40s", "1m0s=1m0s", "1m20s=1m20s", "1m40s=1m40s", "2m0s=2m0s"}, fetch(40*time.Second, 2*time.Minute),
		"a fetch across segments")
	fetchAll := func(from, to time.Duration) []string {
		var got []string
		for wk, v := range w.FetchAll(at(from), at(to)) {
			got = append(got, string(wk.Key)+"@"+wk.Start.Sub(t0).String()+"="+string(v))
		}
		return got
	}
	assert.Equal(t, []string{"k@0s=0s", "k@20s=20s", "k\x00@0s=prefix", "k2@0s=other"}, fetchAll(0, 20*time.Second),
		"every key's windows in a span, in (segment, key, start) order")
	assert.Equal(t, []string{"k@40s=40s", "k@1m0s=1m0s"}, fetchAll(40*time.Second, time.Minute), "a span across segments")
	assert.Empty(t, fetchAll(time.Minute, 0), "an empty span")
	require.NoError(t, w.Delete([]byte("k"), at(20*time.Second)))
	require.NoError(t, w.Delete([]byte("k"), at(21*time.Second)), "deleting a missing window")
	assert.Equal(t, []string{"0s=0s", "40s=40s"}, fetch(0, 40*time.Second), "a deleted window")
	require.NoError(t, w.Put([]byte("k"), at(20*time.Second), []byte("20s")))
	require.NoError(t, s.Commit(nil))

	// Dropping before 2m30s drops the segments [0, 1m) and [1m, 2m) whole,
	// and keeps [2m, 3m), windows before 2m30s included.
	require.NoError(t, w.DropBefore(at(150*time.Second)))
	assert.Empty(t, kv.Changes(), "a drop is no change for the changelog")
	assert.Equal(t, []string{"2m0s=2m0s", "2m20s=2m20s"}, fetch(0, 150*time.Second))
	require.NoError(t, s.Abort())
	assert.Len(t, fetch(0, 4*time.Minute), 12, "an aborted drop is undone")
	_, ok, err := w.Get([]byte("k2"), at(0))
	require.NoError(t, err)
	assert.True(t, ok)

	w = store.NewWindow(kv, time.Minute) // as a rebuilt task would
	require.NoError(t, w.DropBefore(at(150*time.Second)))
	require.NoError(t, s.Commit(nil))
	n := 0
	for wk := range w.All() {
		assert.False(t, wk.Start.Before(at(2*time.Minute)), "window %s of %q survived its segment", wk.Start.Sub(t0), wk.Key)
		n++
	}
	assert.Equal(t, 6, n)
}

// committedView: the committed view of a store sets pending writes aside
// (puts, overwrites and deletes, also in ranges), follows commits, and
// refuses writes.
func committedView(t *testing.T, b Backend) {
	s, kv := open(t, b, "s")
	put(t, kv, "a", "1", "b", "2", "c", "3")
	require.NoError(t, s.Commit(nil))
	view := kv.Committed()
	put(t, kv, "a", "changed", "d", "new")
	require.NoError(t, kv.Delete([]byte("b")))
	assert.Equal(t, []string{"a=changed", "c=3", "d=new"}, Dump(kv, "", ""), "the store itself reads its pending writes")
	assert.Equal(t, []string{"a=1", "b=2", "c=3"}, Dump(view, "", ""), "the view sets them aside")
	assert.Equal(t, []string{"b=2"}, Dump(view, "b", "c"))
	v, ok, err := view.Get([]byte("b"))
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, "2", string(v))
	_, ok, err = view.Get([]byte("d"))
	require.NoError(t, err)
	assert.False(t, ok, "a key written since the commit")
	assert.ErrorIs(t, view.Put([]byte("x"), []byte("y")), store.ErrReadOnly)
	assert.ErrorIs(t, view.Delete([]byte("a")), store.ErrReadOnly)

	require.NoError(t, s.Abort())
	assert.Equal(t, []string{"a=1", "b=2", "c=3"}, Dump(view, "", ""), "after an abort")
	put(t, kv, "a", "again")
	require.NoError(t, s.Commit(nil))
	assert.Equal(t, []string{"a=again", "b=2", "c=3"}, Dump(view, "", ""), "the view follows commits")
}

// windowMeta: a window store's operator value is a write like the
// windows (pending until committed, undone by an abort, in the changes,
// restored from them), and lives beside the windows without being one:
// scans do not meet it and dropping segments keeps it.
func windowMeta(t *testing.T, b Backend) {
	s, kv := open(t, b, "w")
	w := store.NewWindow(kv, time.Minute)
	t0 := time.Unix(0, 0).UTC()
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	got, err := w.Meta()
	require.NoError(t, err)
	assert.Nil(t, got, "a new store has no value")

	require.NoError(t, w.SetMeta([]byte("aborted")))
	require.NoError(t, s.Abort())
	got, err = w.Meta()
	require.NoError(t, err)
	assert.Nil(t, got, "an aborted value is undone")

	for _, d := range []time.Duration{10 * time.Second, 70 * time.Second, 130 * time.Second} {
		require.NoError(t, w.Put([]byte("k"), at(d), []byte(d.String())))
	}
	require.NoError(t, w.SetMeta([]byte("kept")))
	changes := kv.Changes()
	require.NoError(t, s.Commit(nil))
	assert.Len(t, changes, 4, "three windows and the value")

	n := 0
	for range w.All() {
		n++
	}
	assert.Equal(t, 3, n, "All lists windows only")
	n = 0
	for range w.FetchAll(at(-time.Hour), at(time.Hour)) {
		n++
	}
	assert.Equal(t, 3, n, "FetchAll lists windows only")

	// The value sorts before every segment: a drop that looks for the
	// lowest segment must not stop at it.
	w = store.NewWindow(kv, time.Minute) // as a rebuilt task would
	require.NoError(t, w.DropBefore(at(2*time.Minute)))
	require.NoError(t, s.Commit(nil))
	var left []string
	for wk := range w.All() {
		left = append(left, wk.Start.Sub(t0).String())
	}
	assert.Equal(t, []string{"2m10s"}, left, "the segments before 2m are dropped")
	got, err = w.Meta()
	require.NoError(t, err)
	assert.Equal(t, "kept", string(got), "a drop keeps the value")

	// Restored from its changes, a store has the same value.
	s2, kv2 := open(t, b, "w")
	require.NoError(t, kv2.Restore(changes))
	require.NoError(t, s2.Commit(nil))
	got, err = store.NewWindow(kv2, time.Minute).Meta()
	require.NoError(t, err)
	assert.Equal(t, "kept", string(got), "restored from the changelog")
}

// windowFarBounds: a fetch bounded by times a window start cannot be
// (before 1677, after 2262: nanoseconds since 1970 overflow) reads every
// window in between, as an open bound would.
func windowFarBounds(t *testing.T, b Backend) {
	_, kv := open(t, b, "w")
	w := store.NewWindow(kv, time.Minute)
	start := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	require.NoError(t, w.Put([]byte("k"), start, []byte("v")))
	farPast, farFuture := time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)
	var got []time.Time
	for s := range w.Fetch([]byte("k"), farPast, farFuture) {
		got = append(got, s.UTC())
	}
	assert.Equal(t, []time.Time{start}, got, "Fetch")
	n := 0
	for range w.FetchAll(farPast, farFuture) {
		n++
	}
	assert.Equal(t, 1, n, "FetchAll")
}
