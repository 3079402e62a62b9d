package transport

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"go.uber.org/zap/zaptest"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/runtime/embedded"
)

// startAt is a rebalanceHandler that starts every assigned partition at
// one offset.
type startAt struct {
	c   *franzConsumer
	off int64
	// positions is what the consumer said of the partitions' positions
	// once they were assigned, before any record was read.
	positions *map[causal.Channel]int64
}

func (s startAt) Assigned(chs []causal.Channel) error {
	starts := map[causal.Channel]int64{}
	for _, ch := range chs {
		starts[ch] = s.off
	}
	if err := s.c.Assign(starts); err != nil {
		return err
	}
	var err error
	*s.positions, err = s.c.Position(chs)
	return err
}

func (startAt) Revoked([]causal.Channel, bool) {}

// startBroker starts an embedded broker for t, closed when t ends.
func startBroker(t *testing.T) *embedded.Broker {
	t.Helper()
	b, err := embedded.Start()
	require.NoError(t, err)
	t.Cleanup(b.Close)
	return b
}

// franzTestSettings are the settings of a worker with the default
// configuration (static membership, earliest reset), application id app,
// on the broker at addr: what the franz clients are made from.
func franzTestSettings(t *testing.T, addr, app string) *Settings {
	return &Settings{ApplicationID: app, StaticMembership: true, AutoOffsetReset: "earliest",
		Bootstrap: addr, InstanceID: "one", Log: zaptest.NewLogger(t)}
}

// franzTestConsumer is the franz consumer made from s, closed when the
// test ends.
func franzTestConsumer(t *testing.T, s *Settings) *franzConsumer {
	gc, err := franzTransport{}.Consumer(*s)
	require.NoError(t, err)
	c := gc.(*franzConsumer)
	t.Cleanup(func() { assert.NoError(t, c.Close()) })
	return c
}

// The franz consumer starts a partition where the worker says, not where
// the group committed, and reports that start as the partition's position
// before it has read anything (the worker's check of claims beyond a
// partition's end needs a position even for a partition with nothing new).
// It turns the commit marker a transactional producer wrote after its
// records into a position past it: the next offset the partition can
// hold, as librdkafka's end-of-partition event says. The record's headers
// come through.
func TestFranzConsumerStartsWhereToldAndReportsMarkers(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	p, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.TransactionalID("writer"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	defer p.Close()
	_, err = kadm.NewClient(p).CreateTopic(ctx, 1, -1, nil, "in")
	require.NoError(t, err)
	require.NoError(t, p.BeginTransaction())
	for _, v := range []string{"a", "b", "c"} {
		r := &kgo.Record{Topic: "in", Value: []byte(v), Headers: []kgo.RecordHeader{{Key: "h", Value: []byte(v)}}}
		require.NoError(t, p.ProduceSync(ctx, r).FirstErr())
	}
	require.NoError(t, p.EndTransaction(ctx, kgo.TryCommit)) // offsets 0-2, the marker at 3

	c := franzTestConsumer(t, franzTestSettings(t, b.Addr(), "reader"))
	var atAssign map[causal.Channel]int64
	require.NoError(t, c.Subscribe([]string{"in"}, startAt{c: c, off: 1, positions: &atAssign}))

	ch := causal.Channel{Topic: "in", Partition: 0}
	var values []string
	position := int64(-1)
	for position < 0 && ctx.Err() == nil {
		var batch []Event
		c.Poll(10*time.Millisecond, 64, &batch)
		for _, ev := range batch {
			switch ev.Kind {
			case EventRecord:
				values = append(values, string(ev.Msg.Value))
				require.Len(t, ev.Msg.Headers, 1)
				assert.Equal(t, string(ev.Msg.Value), string(ev.Msg.Headers[0].Value))
			case EventPosition:
				position = ev.Msg.Offset
			default:
				t.Fatalf("unexpected event %+v", ev)
			}
		}
	}
	assert.Equal(t, []string{"b", "c"}, values, "read from offset 1, where the handler said")
	assert.Equal(t, map[causal.Channel]int64{ch: 1}, atAssign, "the position before any record is the start")
	assert.Equal(t, int64(4), position, "the commit marker at 3 moves the position to 4")
	pos, err := c.Position([]causal.Channel{ch})
	require.NoError(t, err)
	assert.Equal(t, int64(4), pos[ch])
	_, high, ok := c.CachedWatermarks(ch)
	assert.True(t, ok)
	assert.Equal(t, int64(4), high)
}

// busyCheck is a rebalanceHandler that notes whether it ever ran while the
// pump was busy outside its poll.
type busyCheck struct {
	c              *franzConsumer
	busy, overlaps *atomic.Int32
	calls          *atomic.Int32
}

func (b busyCheck) Assigned(chs []causal.Channel) error {
	b.note()
	starts := map[causal.Channel]int64{}
	for _, ch := range chs {
		starts[ch] = 0
	}
	return b.c.Assign(starts)
}

func (b busyCheck) Revoked([]causal.Channel, bool) { b.note() }

func (b busyCheck) note() {
	b.calls.Add(1)
	if b.busy.Load() != 0 {
		b.overlaps.Add(1)
	}
}

// kgo runs rebalance callbacks on a goroutine of its own; the franz
// consumer runs the worker's handler only while the pump waits inside its
// poll, never while the pump works between polls or before its first
// poll, as inside librdkafka's Poll. Here the pump is busy for a second
// before it first polls (the group assigns meanwhile), then most of the
// time, and a second member joins and leaves the group twice, so the
// handler runs at least once for each.
func TestFranzRebalanceHandlerRunsOnlyInsidePoll(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()))
	require.NoError(t, err)
	defer admin.Close()
	_, err = kadm.NewClient(admin).CreateTopic(ctx, 4, -1, nil, "in")
	require.NoError(t, err)

	w := franzTestSettings(t, b.Addr(), "busy")
	w.Rebalance = RebalanceCooperative
	w.StaticMembership = false
	c := franzTestConsumer(t, w)
	var busy, overlaps, calls atomic.Int32
	busy.Store(1) // the pump's work before its first poll
	require.NoError(t, c.Subscribe([]string{"in"}, busyCheck{c: c, busy: &busy, overlaps: &overlaps, calls: &calls}))

	var stop atomic.Bool
	pumped := make(chan struct{})
	go func() {
		defer close(pumped)
		time.Sleep(time.Second)
		busy.Store(0)
		var batch []Event
		for !stop.Load() {
			c.Poll(time.Millisecond, 64, &batch)
			batch = batch[:0]
			busy.Store(1) // the pump's work between polls
			time.Sleep(20 * time.Millisecond)
			busy.Store(0)
		}
	}()
	// Each join and each leave reaches the handler: wait for it rather
	// than for a time, which a loaded machine may not keep.
	rebalanced := func(before int32, what string) {
		t.Helper()
		require.Eventually(t, func() bool { return calls.Load() > before }, 30*time.Second, 10*time.Millisecond,
			"the handler never ran after a member %s", what)
	}
	require.Eventually(t, func() bool { return calls.Load() > 0 }, 30*time.Second, 10*time.Millisecond, "never assigned")
	for range 2 {
		before := calls.Load()
		other, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.ConsumerGroup("busy"), kgo.ConsumeTopics("in"),
			kgo.Balancers(&franzBalancer{}))
		require.NoError(t, err)
		rebalanced(before, "joined")
		before = calls.Load()
		other.Close()
		rebalanced(before, "left")
	}
	stop.Store(true)
	<-pumped
	assert.GreaterOrEqual(t, calls.Load(), int32(4), "the group never rebalanced")
	assert.Zero(t, overlaps.Load(), "the handler ran while the pump was busy")
}

// The franz consumer takes all of a fetch from kgo at once, so that kgo
// fetches again while the pump works, and hands it out max events a poll.
// What it read ahead follows the pump's instructions as kgo's own buffer
// would: a paused partition's records wait until it is resumed, and a
// seek drops what was read ahead of that partition. Every record of
// both partitions is handed out once, in order, apart from those the
// seek asks for again.
func TestFranzConsumerReadsAheadOfThePump(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	const perPartition = 100
	p, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	defer p.Close()
	_, err = kadm.NewClient(p).CreateTopic(ctx, 2, -1, nil, "in")
	require.NoError(t, err)
	for i := range 2 * perPartition {
		p.Produce(ctx, &kgo.Record{Topic: "in", Partition: int32(i % 2), Value: []byte("v")}, nil)
	}
	require.NoError(t, p.Flush(ctx))

	c := franzTestConsumer(t, franzTestSettings(t, b.Addr(), "ahead"))
	var atAssign map[causal.Channel]int64
	require.NoError(t, c.Subscribe([]string{"in"}, startAt{c: c, off: 0, positions: &atAssign}))

	got := map[int32][]int64{}
	poll := func() int {
		var batch []Event
		c.Poll(10*time.Millisecond, 5, &batch)
		require.LessOrEqual(t, len(batch), 5)
		for _, ev := range batch {
			require.Equal(t, EventRecord, ev.Kind, "event %+v", ev)
			got[ev.Msg.Partition] = append(got[ev.Msg.Partition], ev.Msg.Offset)
		}
		return len(batch)
	}
	pollUntil := func(done func() bool) {
		for !done() && ctx.Err() == nil {
			poll()
		}
		require.NoError(t, ctx.Err(), "got %v", got)
	}
	pollUntil(func() bool { return len(got) > 0 })
	require.Len(t, got, 1, "a batch of 5 from the partition fetched first")
	var first int32
	for part := range got {
		first = part
	}
	other := 1 - first
	assert.Zero(t, c.cl.BufferedFetchRecords(), "the consumer left part of the fetch in kgo, which holds its next fetch back until it is taken")

	require.NoError(t, c.Seek(causal.Channel{Topic: "in", Partition: other}, perPartition/2))
	require.NoError(t, c.Pause([]causal.Channel{{Topic: "in", Partition: first}}))
	before := len(got[first])
	pollUntil(func() bool { return len(got[other]) > 0 && got[other][len(got[other])-1] == perPartition-1 })
	assert.Len(t, got[first], before, "records of a paused partition were handed out")
	assert.Equal(t, offsetsFrom(perPartition/2, perPartition), got[other], "after the seek the partition is read from there, once")

	require.NoError(t, c.Resume([]causal.Channel{{Topic: "in", Partition: first}}))
	pollUntil(func() bool { return len(got[first]) == perPartition })
	assert.Equal(t, offsetsFrom(0, perPartition), got[first])
	for range 5 {
		assert.Zero(t, poll(), "more than was produced")
	}
	pos, err := c.Position([]causal.Channel{{Topic: "in", Partition: 0}, {Topic: "in", Partition: 1}})
	require.NoError(t, err)
	assert.Equal(t, map[causal.Channel]int64{{Topic: "in", Partition: 0}: perPartition, {Topic: "in", Partition: 1}: perPartition}, pos)
}

// offsetsFrom is the offsets from up to end, end excluded.
func offsetsFrom(from, end int64) []int64 {
	var out []int64
	for o := from; o < end; o++ {
		out = append(out, o)
	}
	return out
}

// The header view reads the same headers as the list it views, without a
// copy, and keeps an empty list empty.
func TestFranzHeaderView(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		hs   []kgo.RecordHeader
	}{
		{"none", nil},
		{"one", []kgo.RecordHeader{{Key: causal.HeaderKey, Value: []byte{1, 2, 3}}}},
		{"several", []kgo.RecordHeader{{Key: "a", Value: []byte("x")}, {Key: "", Value: nil}, {Key: "c", Value: []byte("zz")}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fw := frameworkHeaders(tc.hs)
			require.Len(t, fw, len(tc.hs))
			for i, h := range tc.hs {
				assert.Equal(t, h.Key, fw[i].Key)
				assert.Equal(t, h.Value, fw[i].Value)
				assert.Same(t, &tc.hs[i], (*kgo.RecordHeader)(unsafe.Pointer(&fw[i])), "a copy, not a view")
			}
		})
	}
}

// A slab's copy of a header list holds the same keys and values, nil and
// empty values as they were, shares no memory with the list it copied,
// reaches no further than itself, and stays as it was while later copies
// grow the slab.
func TestRecordSlabCopiesHeaders(t *testing.T) {
	t.Parallel()
	s := &recordSlab{}
	type copied struct {
		want []framework.Header
		got  []kgo.RecordHeader
	}
	var all []copied
	for i := range 200 { // enough to grow the slab's arrays many times
		hs := []framework.Header{{Key: causal.HeaderKey, Value: []byte(strings.Repeat("v", i%70))}, {Key: "nil"}, {Key: "empty", Value: []byte{}}}
		want := []framework.Header{{Key: hs[0].Key, Value: bytes.Clone(hs[0].Value)}, {Key: "nil"}, {Key: "empty", Value: []byte{}}}
		got := s.copyHeaders(hs)
		hs[0].Value = append(hs[0].Value[:0], strings.Repeat("x", i%70)...) // the task writes over its own
		require.Len(t, got, len(want))
		assert.Equal(t, len(got), cap(got), "a copy reaches past its list")
		all = append(all, copied{want, got})
	}
	for i, c := range all {
		for j, h := range c.got {
			assert.Equal(t, c.want[j].Key, h.Key, "copy %d, header %d", i, j)
			assert.Equal(t, c.want[j].Value, h.Value, "copy %d, header %d", i, j)
		}
		assert.Nil(t, c.got[1].Value, "copy %d: a nil value", i)
		assert.NotNil(t, c.got[2].Value, "copy %d: an empty value", i)
	}
	assert.Nil(t, s.copyHeaders(nil))
}

// franzSlabTest is a franz producer on a fresh broker with a one-partition
// topic "out", and a read_committed reader of it.
func franzSlabTest(t *testing.T, name string) (context.Context, *franzProducer, *kgo.Client) {
	b := startBroker(t)
	return franzProducerOn(t, franzTestSettings(t, b.Addr(), name))
}

// franzProducerOn is franzSlabTest for the settings w.
func franzProducerOn(t *testing.T, w *Settings) (context.Context, *franzProducer, *kgo.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	rd, err := kgo.NewClient(kgo.SeedBrokers(w.Bootstrap), kgo.ConsumeTopics("out"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableClientMetrics())
	require.NoError(t, err)
	t.Cleanup(rd.Close)
	_, err = kadm.NewClient(rd).CreateTopic(ctx, 1, -1, nil, "out")
	require.NoError(t, err)

	pc, _, err := franzTransport{}.Producer(*w)
	require.NoError(t, err)
	p := pc.(*franzProducer)
	t.Cleanup(func() { assert.NoError(t, p.Close()) })
	require.NoError(t, p.InitTransactions(ctx))
	return ctx, p, rd
}

// readValues reads the values of n records from rd.
func readValues(ctx context.Context, rd *kgo.Client, n int) []string {
	var got []string
	for len(got) < n && ctx.Err() == nil {
		rd.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	return got
}

// The franz producer writes over the record slabs of a transaction once
// kgo is done with every record in them, not before: three transactions
// of two and a half slabs each use at most four slabs where they would
// take eight new ones, and every record reaches the topic as it was
// produced, once, in order.
func TestFranzProducerReusesRecordSlabsOnceKgoIsDone(t *testing.T) {
	t.Parallel()
	ctx, p, rd := franzSlabTest(t, "slabs")
	const perTxn = recordSlabLen*5/2 + 1
	var want []string
	slabs := map[*recordSlab]bool{}
	for txn := range 3 {
		require.NoError(t, p.BeginTransaction())
		for i := range perTxn {
			v := fmt.Sprintf("%d-%d", txn, i)
			want = append(want, v)
			require.NoError(t, p.Produce(&Message{Topic: "out", Value: []byte(v)}))
			slabs[p.cur] = true
		}
		require.NoError(t, p.CommitTransaction(ctx))
		assert.Zero(t, p.outstanding(), "a promise kgo has not run after the commit")
		assert.Empty(t, p.cur.records, "the current slab not emptied after a commit")
	}
	assert.LessOrEqual(t, len(slabs), 4, "slabs taken for %d records", len(want))
	// A light transaction after the heavy ones: the done slabs it did not
	// need are let go.
	require.NoError(t, p.BeginTransaction())
	want = append(want, "light")
	require.NoError(t, p.Produce(&Message{Topic: "out", Value: []byte("light")}))
	require.NoError(t, p.CommitTransaction(ctx))
	assert.LessOrEqual(t, len(p.done), 1, "done slabs kept after a transaction that filled none")

	assert.Equal(t, want, readValues(ctx, rd, len(want)))
}

// Within one transaction too, a slab comes back as soon as kgo has run the
// promises of its records: a transaction of eight slabs' worth, whose
// records kgo sends a slab at a time, is carved from two slabs, and its
// records reach the topic as they were produced.
func TestFranzProducerReusesRecordSlabsWithinATransaction(t *testing.T) {
	t.Parallel()
	ctx, p, rd := franzSlabTest(t, "inflight")
	var want []string
	slabs := map[*recordSlab]bool{}
	require.NoError(t, p.BeginTransaction())
	for i := range 8*recordSlabLen + 1 {
		if i%recordSlabLen == 1 {
			// The slab before is sealed: let kgo send what it holds.
			require.NoError(t, p.cl.Flush(ctx))
		}
		v := strconv.Itoa(i)
		want = append(want, v)
		require.NoError(t, p.Produce(&Message{Topic: "out", Value: []byte(v)}))
		slabs[p.cur] = true
	}
	require.NoError(t, p.CommitTransaction(ctx))
	assert.LessOrEqual(t, len(slabs), 2, "slabs taken for %d records", len(want))
	assert.Equal(t, want, readValues(ctx, rd, len(want)))
}

// The franz producer holds at most franzMaxBufferedRecords records that
// kgo has not finished, or what --kafka queue.buffering.max.messages
// says: with the broker holding every produce request, that many are
// taken at once, the next waits, and it goes on once the broker answers;
// every record reaches the topic once, in order.
func TestFranzProducerWaitsForRoomBeyondItsBound(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		kafka map[string]string
		bound int
	}{
		{"default", nil, franzMaxBufferedRecords},
		{"set", map[string]string{"queue.buffering.max.messages": "100"}, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := startBroker(t)
			w := franzTestSettings(t, b.Addr(), "bound")
			w.Kafka = tc.kafka
			ctx, p, rd := franzProducerOn(t, w)
			release := make(chan struct{})
			cluster := b.Cluster()
			cluster.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
				cluster.KeepControl()
				cluster.SleepControl(func() { <-release })
				return nil, nil, false // then handled as usual
			})

			require.NoError(t, p.BeginTransaction())
			var want []string
			produce := func(i int) error {
				v := strconv.Itoa(i)
				want = append(want, v)
				return p.Produce(&Message{Topic: "out", Value: []byte(v)})
			}
			for i := range tc.bound {
				require.NoError(t, produce(i))
			}
			returned := make(chan error, 1)
			go func() { returned <- produce(tc.bound) }()
			select {
			case err := <-returned:
				t.Fatalf("record %d taken while the broker held all %d before it (err %v)", tc.bound+1, tc.bound, err)
			case <-time.After(300 * time.Millisecond):
			}
			close(release)
			select {
			case err := <-returned:
				require.NoError(t, err)
			case <-ctx.Done():
				t.Fatal("Produce still waiting after the broker answered")
			}
			require.NoError(t, p.CommitTransaction(ctx))
			assert.Equal(t, want, readValues(ctx, rd, len(want)))
		})
	}
}

// The franz producer keeps copies of the header lists and values it is
// given, so that the task may write over its own as soon as Produce
// returns (Released): records produced with one header buffer, written
// over after each, reach the topic with the values it had when each was
// produced.
func TestFranzProducerCopiesHeaders(t *testing.T) {
	t.Parallel()
	ctx, p, rd := franzSlabTest(t, "copies")
	require.True(t, p.Released())
	buf := make([]byte, 8)
	require.NoError(t, p.BeginTransaction())
	const n = 100
	for i := range n {
		copy(buf, fmt.Sprintf("%08d", i))
		hs := []framework.Header{{Key: "h", Value: buf}}
		require.NoError(t, p.Produce(&Message{Topic: "out", Value: []byte(strconv.Itoa(i)), Headers: hs}))
		copy(buf, "written!") // what the task's next output does to its slab
		hs[0].Key = "gone"
	}
	require.NoError(t, p.CommitTransaction(ctx))
	var got int
	for got < n && ctx.Err() == nil {
		rd.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			i, err := strconv.Atoi(string(r.Value))
			require.NoError(t, err)
			require.Len(t, r.Headers, 1)
			assert.Equal(t, "h", r.Headers[0].Key)
			assert.Equal(t, fmt.Sprintf("%08d", i), string(r.Headers[0].Value), "the header of record %d", i)
			got++
		})
	}
	assert.Equal(t, n, got)
}

// The franz producer sets every field of a kgo record one at a time when
// it reuses a slab slot (franzProducer.Produce): a field kgo adds would be
// left as the slot's last record had it.
func TestFranzRecordFields(t *testing.T) {
	var names []string
	rt := reflect.TypeFor[kgo.Record]()
	for i := range rt.NumField() {
		names = append(names, rt.Field(i).Name)
	}
	assert.Equal(t, []string{"Key", "Value", "Headers", "Timestamp", "Topic", "Partition", "Attrs", "ProducerEpoch",
		"ProducerID", "LeaderEpoch", "Offset", "Context"}, names, "kgo.Record's fields changed: set the new ones in franzProducer.Produce")
}

// The events the franz consumer hands out keep their keys and values
// while it goes on to hand out later batches.
func TestFranzConsumerEventsOutliveLaterBatches(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	const batches, perBatch = 6, 20
	p, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	defer p.Close()
	_, err = kadm.NewClient(p).CreateTopic(ctx, 1, -1, nil, "in")
	require.NoError(t, err)
	var want []string
	for i := range batches {
		for j := range perBatch {
			v := fmt.Sprintf("b%d-r%d", i, j)
			want = append(want, v)
			p.Produce(ctx, &kgo.Record{Topic: "in", Key: []byte("k" + v), Value: []byte(v)}, nil)
		}
		require.NoError(t, p.Flush(ctx)) // one batch each
	}

	c := franzTestConsumer(t, franzTestSettings(t, b.Addr(), "recycler"))
	var atAssign map[causal.Channel]int64
	require.NoError(t, c.Subscribe([]string{"in"}, startAt{c: c, off: 0, positions: &atAssign}))

	var events []Event // kept across polls, as held records are
	for len(events) < len(want) && ctx.Err() == nil {
		var batch []Event
		c.Poll(10*time.Millisecond, 7, &batch)
		events = append(events, batch...)
	}
	require.NoError(t, ctx.Err())
	var got []string
	for _, ev := range events {
		require.Equal(t, EventRecord, ev.Kind, "event %+v", ev)
		assert.Equal(t, "k"+string(ev.Msg.Value), string(ev.Msg.Key))
		got = append(got, string(ev.Msg.Value))
	}
	assert.Equal(t, want, got)
}

// The franz clients push KIP-714 client metrics to the brokers only when
// enable.metrics.push=true, as the librdkafka clients do: each push
// compresses a rollup, and a client sends one more as it closes. (The
// transactional producer never does: it speaks Kafka 3.9's requests, which
// franz-go lists without the telemetry ones.)
func TestFranzClientsPushMetricsOnlyWhenAsked(t *testing.T) {
	tests := []struct {
		name   string
		kafka  map[string]string
		pushed bool
	}{
		{name: "by default", kafka: nil, pushed: false},
		{name: "asked for", kafka: map[string]string{"enable.metrics.push": "true"}, pushed: true},
		{name: "turned off by name", kafka: map[string]string{"enable.metrics.push": "false"}, pushed: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A broker that offers client metrics, as Kafka does from 3.7
			// when configured to; the embedded one does not.
			b, err := embedded.Start(embedded.KfakeOpts(kfake.MaxVersions(kversion.Stable())))
			require.NoError(t, err)
			defer b.Close()
			var asked atomic.Int64
			b.Cluster().ControlKey(int16(kmsg.GetTelemetrySubscriptions), func(kmsg.Request) (kmsg.Response, error, bool) {
				b.Cluster().KeepControl()
				asked.Add(1)
				return nil, nil, false
			})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			adm, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.DisableClientMetrics())
			require.NoError(t, err)
			defer adm.Close()
			_, err = kadm.NewClient(adm).CreateTopic(ctx, 1, -1, nil, "members")
			require.NoError(t, err)
			h, err := NewHelpers(b.Addr(), tt.kafka)
			require.NoError(t, err)
			f, err := h.FollowTopic("members")
			require.NoError(t, err)
			defer f.Close()
			// A request answered: franz-go starts its metrics after the
			// first one.
			require.NoError(t, f.ProduceSync(ctx, "members", nil, []byte("v")))
			if tt.pushed {
				require.Eventually(t, func() bool { return asked.Load() > 0 }, 10*time.Second, 10*time.Millisecond,
					"the client never asked for a telemetry subscription")
				return
			}
			f.Close()
			assert.Zero(t, asked.Load(), "a client asked for a telemetry subscription")
		})
	}
}
