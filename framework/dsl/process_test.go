package dsl_test

import (
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/driver"
	"github.com/causeway-stream/causeway/framework/dsl"
	"github.com/causeway-stream/causeway/framework/serde"
	"github.com/causeway-stream/causeway/framework/store"
)

// Repartition writes the stream by key to its named topic, of the
// partitions given, and the steps after read it there: each record sits
// in the partition its key falls in among 4, though the source has 3.
func TestRepartitionPlacesRecordsByKeyInTheCountGiven(t *testing.T) {
	b := dsl.NewBuilder("shop")
	byUser := dsl.Map(dsl.From(b, "views", text), func(page, user string) (string, string, error) { return user, page, nil })
	byUser.Repartition("by-user", 4).To("views-by-user")
	topo, err := b.Build()
	require.NoError(t, err)
	assert.Equal(t, []string{"by-user-repartition"}, internalTopics(topo))
	info, ok := topo.Topic("by-user-repartition")
	require.True(t, ok)
	assert.Equal(t, int32(4), info.Partitions)
	require.Len(t, topo.Processors(), 2, "the steps after the repartition run in a processor of their own")

	d, err := driver.New(topo, driver.DefaultPartitions(3))
	require.NoError(t, err)
	views := driver.NewInput(d, "views", serde.String(), serde.String())
	users := []string{"ann", "bob", "cy", "dee", "eve", "fay", "gus", "hal"}
	for i, u := range users {
		_, _, err := views.Pipe(fmt.Sprintf("/p%d", i), u)
		require.NoError(t, err)
	}
	require.NoError(t, d.Run())
	repartitioned, err := d.Records("by-user-repartition")
	require.NoError(t, err)
	require.Len(t, repartitioned, len(users))
	seen := map[int32]bool{}
	for _, r := range repartitioned {
		assert.Equal(t, framework.PartitionFor(r.Key, 4), r.Partition, "%s", r.Key)
		seen[r.Partition] = true
	}
	assert.Greater(t, len(seen), 1)
	out, err := d.Records("views-by-user")
	require.NoError(t, err)
	assert.Len(t, out, len(users))
}

// A repartition needs a name, and a count that is not negative.
func TestRepartitionRefusesABadNameOrCount(t *testing.T) {
	for _, tt := range []struct {
		name       string
		partitions int32
		want       string
	}{{"", 2, "name it"}, {"by user", 2, "name it"}, {"by-user", -1, "-1 partitions"}} {
		b := dsl.NewBuilder("shop")
		dsl.From(b, "views", text).Repartition(tt.name, tt.partitions).To("out")
		_, err := b.Build()
		assert.ErrorContains(t, err, tt.want)
	}
}

// totals is a processor of the Processor API that keeps a running total
// per key in its own store, forwards it under the key "<key>-total", and
// at each second of stream time forwards how many records it has seen.
type totals struct {
	kv          store.KeyValue
	seen        int
	inits, ends *atomic.Int32
}

func (p *totals) Init(ctx framework.Context) error {
	p.inits.Add(1)
	var err error
	if p.kv, err = ctx.KeyValueStore("totals"); err != nil {
		return err
	}
	_, err = ctx.Schedule(time.Second, framework.StreamTime, func(ctx framework.Context, now time.Time) error {
		return ctx.Forward(framework.Record{Key: []byte("seen"), Value: []byte(strconv.Itoa(p.seen)), Timestamp: now})
	})
	return err
}

func (p *totals) Process(ctx framework.Context, rec framework.Record) error {
	p.seen++
	n, _ := strconv.Atoi(string(rec.Value))
	old, _, err := p.kv.Get(rec.Key)
	if err != nil {
		return err
	}
	sum, _ := strconv.Atoi(string(old))
	sum += n
	if err := p.kv.Put(rec.Key, []byte(strconv.Itoa(sum))); err != nil {
		return err
	}
	if err := ctx.Emit("elsewhere", rec); err == nil {
		return fmt.Errorf("emit to an output of its own was taken")
	}
	return ctx.Forward(framework.Record{Key: append(rec.Key, "-total"...), Value: []byte(strconv.Itoa(sum)), Timestamp: rec.Timestamp})
}

func (p *totals) Close() error {
	p.ends.Add(1)
	return nil
}

// A processor of the Processor API in a chain: it gets each record with
// its key and value as written, keeps state in the store it owns, and
// what it forwards (from Process and from a punctuation) goes on down the
// chain, read with the codec given; a count after it repartitions its
// records, since it may change keys. A task that restarts closes its
// processor and makes another, which finds its store as committed.
func TestProcessPutsAProcessorInTheChain(t *testing.T) {
	inits, ends := new(atomic.Int32), new(atomic.Int32)
	b := dsl.NewBuilder("shop")
	amounts := dsl.From(b, "amounts", text)
	out := dsl.Process(amounts, "totals", func() framework.Processor { return &totals{inits: inits, ends: ends} },
		serde.Codec[string, string]{Key: serde.String(), Value: serde.String()}, framework.KeyValueStore("totals"))
	out.To("totals-out")
	out.GroupByKey().Count("per-key").ToStream().To("counts")
	topo, err := b.Build()
	require.NoError(t, err)
	assert.Equal(t, []string{"per-key-repartition"}, internalTopics(topo), "a count after Process repartitions")

	d, err := driver.New(topo, driver.DefaultPartitions(1))
	require.NoError(t, err)
	in := driver.NewInput(d, "amounts", serde.String(), serde.String())
	pipe := func(k, v string, ms int64) {
		_, _, err := in.PipeAt(k, v, time.UnixMilli(ms))
		require.NoError(t, err)
		require.NoError(t, d.Run())
	}
	pipe("a", "5", 0)
	pipe("b", "2", 10)
	pipe("a", "1", 20)
	for _, st := range d.Tasks() {
		require.NoError(t, d.RestartTask(st.ID))
	}
	pipe("a", "4", 1500) // a second of stream time: the punctuation
	got, err := driver.NewOutput(d, "totals-out", serde.String(), serde.String()).All()
	require.NoError(t, err)
	var lines []string
	for _, kv := range got {
		lines = append(lines, kv.Key+"="+kv.Value)
	}
	assert.Equal(t, []string{"a-total=5", "b-total=2", "a-total=6", "a-total=10", "seen=1"}, lines,
		"running totals across the restart (its store), and the punctuation's count since the restart")
	counts, err := driver.NewOutput(d, "counts", serde.String(), serde.Int64()).All()
	require.NoError(t, err)
	last := map[string]int64{}
	for _, kv := range counts {
		last[kv.Key] = kv.Value
	}
	assert.Equal(t, map[string]int64{"a-total": 3, "b-total": 1, "seen": 1}, last)
	assert.Greater(t, inits.Load(), int32(1), "the restarted task made a new processor")
	assert.Equal(t, inits.Load()-1, ends.Load(), "every processor but the running one closed")
}

// A suppression whose buffer is bounded with ShutDownWhenFull fails its
// task on the record that overfills it, naming the bound.
func TestSuppressShutsDownWhenFull(t *testing.T) {
	for _, buffer := range []dsl.SuppressBuffer{dsl.BufferMaxRecords(1).ShutDownWhenFull(), dsl.BufferMaxBytes(60).ShutDownWhenFull()} {
		b := dsl.NewBuilder("shop")
		dsl.TableFrom(b, "rows", "rows", text).SuppressUntilTimeLimit("buffer", 100*24*time.Hour, buffer).ToStream().To("out")
		topo, err := b.Build()
		require.NoError(t, err)
		d, err := driver.New(topo, driver.DefaultPartitions(1))
		require.NoError(t, err)
		in := driver.NewInput(d, "rows", serde.String(), serde.String())
		_, _, err = in.PipeAt("hey", "12345678", time.UnixMilli(100))
		require.NoError(t, err)
		require.NoError(t, d.Run())
		assert.Empty(t, d.Failed())
		_, _, err = in.PipeAt("dummyKey", "12345678", time.UnixMilli(100))
		require.NoError(t, err)
		_ = d.Run()
		failed := d.Failed()
		require.Len(t, failed, 1)
		for _, err := range failed {
			assert.ErrorIs(t, err, dsl.ErrSuppressBufferFull)
			assert.ErrorContains(t, err, "buffer exceeded its max capacity")
		}
	}
}

// A grace period needs a versioned table that keeps at least that much
// history (KStreamKTableJoinTest.shouldFailIfTableIsNotVersioned and
// shouldFailIfGracePeriodIsLongerThanHistoryRetention), and a table-table
// join of a versioned table is refused.
func TestAJoinWithGraceNeedsAVersionedTable(t *testing.T) {
	joiner := func(_ string, v, row string) (string, error) { return v + row, nil }
	for _, tt := range []struct {
		name  string
		build func(b *dsl.Builder)
		want  string
	}{
		{"not versioned", func(b *dsl.Builder) {
			dsl.JoinWithGrace(dsl.From(b, "topic", text), dsl.TableFrom(b, "topic2", "tableB", text), 6*time.Millisecond, "first-join", joiner).To("out-one")
		}, "KTable must be versioned to use a grace period in a stream table join"},
		{"grace longer than history", func(b *dsl.Builder) {
			table := dsl.TableFrom(b, "topic2", "tableB", text, dsl.Versioned(5*time.Minute))
			dsl.JoinWithGrace(dsl.From(b, "topic", text), table, 6*time.Minute, "first-join", joiner).To("out-one")
		}, "History retention must be at least grace period"},
		{"table-table", func(b *dsl.Builder) {
			l := dsl.TableFrom(b, "topic", "tableA", text, dsl.Versioned(time.Minute))
			dsl.JoinTables(l, dsl.TableFrom(b, "topic2", "tableB", text), joiner).ToStream().To("out")
		}, "versioned table is not built"},
	} {
		b := dsl.NewBuilder("app")
		tt.build(b)
		_, err := b.Build()
		assert.ErrorContains(t, err, tt.want, tt.name)
	}
}
