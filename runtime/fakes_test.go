package runtime

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/causeway-stream/causeway/runtime/internal/restore"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/taskmgr"
	"github.com/causeway-stream/causeway/runtime/internal/transport"
)

// fakeKafka is an in-process stand-in for what the worker's parts ask of
// Kafka: a consumer that hands out queued messages, a transactional
// producer whose committed records and offsets become visible only on
// commit, and the changelog read back from what was committed. It lets the
// task manager and the failure policy run in milliseconds without a broker.
type fakeKafka struct {
	t *testing.T
	// queue is what Poll hands out next.
	queue []transport.Event
	// seeks records every Seek; log is every message sent, per channel, for
	// a seek to hand out again.
	seeks []causal.Entry
	log   map[causal.Channel][]*transport.Message
	// lagging channels are written but not fetched until catchUp.
	lagging map[causal.Channel][]*transport.Message
	// high is every partition's high watermark; partitions is every
	// topic's partition count (a topic not in it does not exist).
	high       map[causal.Channel]int64
	partitions map[string]int32
	// queries counts QueryWatermarkOffsets calls.
	queries int

	open      []*transport.Message
	offsets   map[causal.Channel]int64
	committed []*transport.Message
	groupOffs map[causal.Channel]int64
	// produceErr, when set, is what Produce returns for a message it
	// refuses.
	produceErr func(*transport.Message) error
	// commitErr, when set, fails the next CommitTransaction, and the
	// failCommits after it.
	commitErr   error
	failCommits int
	aborts      int
	// committedTimeouts fails the next reads of the group's committed
	// offsets, as librdkafka's do while a dead member's transaction holds
	// them, and committedReads counts the reads.
	committedTimeouts int
	committedReads    int
	// restoreReads counts the changelog partitions restores read.
	restoreReads int
	// holdRestore, when set (before the worker is made), makes restores
	// run on a goroutine of their own, and holds the read of each channel
	// it names until its channel is closed. The read takes what it reads
	// from the fake before it waits, so the test may send meanwhile.
	holdRestore map[causal.Channel]chan struct{}
	// settleLate makes the fake hold on to the bytes of committed records
	// until the next commit or abort (as kgo may, until it has run every
	// record's promise): Released stays false until then. Only for
	// topologies whose outputs no task reads: what a task reads of them is
	// handed out before they are copied.
	settleLate bool
	unsettled  []*transport.Message
}

func newFakeKafka(t *testing.T) *fakeKafka {
	return &fakeKafka{t: t, high: map[causal.Channel]int64{}, groupOffs: map[causal.Channel]int64{}, log: map[causal.Channel][]*transport.Message{}}
}

var (
	_ transport.Consumer = (*fakeKafka)(nil)
	_ transport.Producer = (*fakeKafka)(nil)
)

func (f *fakeKafka) Poll(_ time.Duration, max int, batch *[]transport.Event) int {
	n := min(max, len(f.queue))
	*batch = append(*batch, f.queue[:n]...)
	f.queue = f.queue[n:]
	return n
}
func (f *fakeKafka) Subscribe([]string, transport.RebalanceHandler) error { return nil }
func (f *fakeKafka) Assign(map[causal.Channel]int64) error                { return nil }
func (f *fakeKafka) Standbys() transport.StandbyAssignment                { return transport.StandbyAssignment{} }
func (f *fakeKafka) Probe()                                               {}

// Seek drops what is queued of the partition and queues it again from the
// offset, as librdkafka discards what it fetched before a seek.
func (f *fakeKafka) Seek(ch causal.Channel, offset int64) error {
	f.seeks = append(f.seeks, causal.Entry{Channel: ch, Offset: offset})
	kept := f.queue[:0]
	for _, ev := range f.queue {
		if ev.Kind != transport.EventRecord || ev.Msg.Channel() != ch {
			kept = append(kept, ev)
		}
	}
	f.queue = kept
	for _, m := range f.log[ch][offset:] {
		f.queue = append(f.queue, transport.Event{Kind: transport.EventRecord, Msg: *m})
	}
	return nil
}
func (f *fakeKafka) Pause([]causal.Channel) error  { return nil }
func (f *fakeKafka) Resume([]causal.Channel) error { return nil }
func (f *fakeKafka) Position([]causal.Channel) (map[causal.Channel]int64, error) {
	return nil, nil
}
func (f *fakeKafka) GroupMetadata() (transport.GroupMetadata, error) { return nil, nil }
func (f *fakeKafka) Close() error                                    { return nil }
func (f *fakeKafka) Committed(chs []causal.Channel) (map[causal.Channel]int64, error) {
	f.committedReads++
	if f.committedTimeouts > 0 {
		f.committedTimeouts--
		return nil, &transport.ClientError{Class: transport.ClassRetriable, Err: errors.New("Local: Timed out")}
	}
	out := map[causal.Channel]int64{}
	for _, ch := range chs {
		if off, ok := f.groupOffs[ch]; ok {
			out[ch] = off
		}
	}
	return out, nil
}
func (f *fakeKafka) Watermarks(ch causal.Channel) (int64, int64, error) {
	f.queries++
	if n, ok := f.partitions[ch.Topic]; !ok || ch.Partition >= n {
		return 0, 0, &transport.ClientError{Class: transport.ClassRecord, Kind: transport.KindUnknownPartition, Err: errors.New("Broker: Unknown topic or partition")}
	}
	return 0, f.high[ch], nil
}

// CachedWatermarks knows nothing the broker was not asked: every claim
// check goes to Watermarks.
func (f *fakeKafka) CachedWatermarks(causal.Channel) (int64, int64, bool) { return 0, 0, false }

func (f *fakeKafka) InitTransactions(context.Context) error { return nil }

func (f *fakeKafka) Produce(msg *transport.Message) error {
	if f.produceErr != nil {
		if err := f.produceErr(msg); err != nil {
			return err
		}
	}
	cp := *msg
	cp.Headers = slices.Clone(msg.Headers) // the producer reuses its message, as the clients let it
	f.open = append(f.open, &cp)
	return nil
}
func (f *fakeKafka) Flush(context.Context) error        { return nil } // the stream worker does not flush
func (f *fakeKafka) Watch()                             {}
func (f *fakeKafka) Unwatch()                           {}
func (f *fakeKafka) Refused() []transport.RefusedRecord { return nil }
func (f *fakeKafka) BeginTransaction() error            { return nil }
func (f *fakeKafka) SendOffsetsToTransaction(_ context.Context, offs map[causal.Channel]int64, _ transport.GroupMetadata) error {
	if f.offsets == nil {
		f.offsets = map[causal.Channel]int64{}
	}
	maps.Copy(f.offsets, offs)
	return nil
}
func (f *fakeKafka) CommitTransaction(context.Context) error {
	if err := f.commitErr; err != nil {
		if f.failCommits == 0 {
			f.commitErr = nil
		}
		f.failCommits--
		return err
	}
	f.settle()
	if f.settleLate {
		f.unsettled = f.open
	} else {
		settle(f.open)
	}
	f.committed = append(f.committed, f.open...)
	// Committed records become readable, at the next offsets of their
	// partitions, for whatever reads them (a task downstream).
	for _, m := range f.open {
		ch := m.Channel()
		m.Offset = f.high[ch]
		f.high[ch]++
		f.log[ch] = append(f.log[ch], m)
		if held, ok := f.lagging[ch]; ok {
			f.lagging[ch] = append(held, m)
		} else {
			f.queue = append(f.queue, transport.Event{Kind: transport.EventRecord, Msg: *m})
		}
	}
	maps.Copy(f.groupOffs, f.offsets)
	f.open, f.offsets = nil, nil
	return nil
}
func (f *fakeKafka) AbortTransaction(context.Context) error {
	f.settle()
	f.open, f.offsets = nil, nil
	f.aborts++
	return nil
}
func (f *fakeKafka) FatalError() error { return nil }

// Released is true once the fake holds on to no record it was handed:
// until a commit copies them (or with settleLate the one after), they
// point into the producer's memory.
func (f *fakeKafka) Released() bool { return len(f.open) == 0 && len(f.unsettled) == 0 }

// settle copies the records committed with settleLate.
func (f *fakeKafka) settle() {
	settle(f.unsettled)
	f.unsettled = nil
}

// settle gives the records ms bytes of their own, as the broker has: the
// producer's memory may be written over from then on (Released).
func settle(ms []*transport.Message) {
	for _, m := range ms {
		m.Key, m.Value = bytes.Clone(m.Key), bytes.Clone(m.Value)
		for i := range m.Headers {
			m.Headers[i].Value = bytes.Clone(m.Headers[i].Value)
		}
	}
}

// Bounds and read make the fake a changelog source: what was committed
// to a partition, at its offsets.
func (f *fakeKafka) Bounds(ch causal.Channel) (low, high int64, err error) { return 0, f.high[ch], nil }

func (f *fakeKafka) Read(stop <-chan struct{}, from map[causal.Channel]int64, apply func(ch causal.Channel, key, value []byte) error,
	done func(ch causal.Channel, end int64) error) error {
	type part struct {
		ch   causal.Channel
		msgs []*transport.Message
		end  int64
	}
	var now, held []part
	for ch, off := range from {
		f.restoreReads++
		p := part{ch: ch, end: max(off, f.high[ch])}
		for _, m := range f.log[ch] {
			if m.Offset >= off {
				p.msgs = append(p.msgs, m)
			}
		}
		if f.holdRestore[ch] != nil {
			held = append(held, p)
		} else {
			now = append(now, p)
		}
	}
	for _, p := range append(now, held...) {
		if release := f.holdRestore[p.ch]; release != nil {
			select {
			case <-release:
			case <-stop:
				return ErrStopped
			}
		}
		for _, m := range p.msgs {
			if err := apply(p.ch, m.Key, m.Value); err != nil {
				return err
			}
		}
		if err := done(p.ch, p.end); err != nil {
			return err
		}
	}
	return nil
}

// outputs returns the committed records of topic, in order.
func (f *fakeKafka) outputs(topic string) []*transport.Message {
	var out []*transport.Message
	for _, m := range f.committed {
		if m.Topic == topic {
			out = append(out, m)
		}
	}
	return out
}

// send queues a record on ch for the consumer, with clock header when
// given, and moves the partition's high watermark past it.
func (f *fakeKafka) send(ch causal.Channel, value string, clock ...causal.Entry) int64 {
	return f.sendAt(ch, value, time.Time{}, clock...)
}

// sendAt is send with the record's timestamp.
func (f *fakeKafka) sendAt(ch causal.Channel, value string, ts time.Time, clock ...causal.Entry) int64 {
	off := f.high[ch]
	f.high[ch] = off + 1
	m := &transport.Message{Topic: ch.Topic, Partition: ch.Partition, Offset: off, Key: []byte(value), Value: []byte(value), Timestamp: ts}
	if len(clock) > 0 {
		c, err := causal.NewClock(clock...)
		require.NoError(f.t, err)
		m.Headers = []framework.Header{{Key: causal.HeaderKey, Value: causal.EncodeClock(c)}}
	}
	f.log[ch] = append(f.log[ch], m)
	if held, ok := f.lagging[ch]; ok {
		f.lagging[ch] = append(held, m)
		return off
	}
	f.queue = append(f.queue, transport.Event{Kind: transport.EventRecord, Msg: *m})
	return off
}

// lag makes the consumer fall behind on ch: what is sent there is not
// fetched until catchUp.
func (f *fakeKafka) lag(ch causal.Channel) {
	if f.lagging == nil {
		f.lagging = map[causal.Channel][]*transport.Message{}
	}
	f.lagging[ch] = nil
}

// catchUp fetches what ch held back.
func (f *fakeKafka) catchUp(ch causal.Channel) {
	for _, m := range f.lagging[ch] {
		f.queue = append(f.queue, transport.Event{Kind: transport.EventRecord, Msg: *m})
	}
	delete(f.lagging, ch)
}

// newFakeWorker returns a worker wired to fake, assigned every partition
// of the topology's inputs, with its tasks built, configured by
// DefaultConfig and then configure. It is driven by calling the pump's
// steps directly; nothing runs in the background.
func newFakeWorker(t *testing.T, fake *fakeKafka, topo *framework.Topology, counts map[string]int32, configure ...func(*Config)) *StreamThread {
	t.Helper()
	cfg := DefaultConfig()
	cfg.ApplicationID = "fake"
	cfg.StateDir = t.TempDir()
	for _, c := range configure {
		c(&cfg)
	}
	w, err := NewStreamThread(cfg, topo, zaptest.NewLogger(t), nil)
	require.NoError(t, err)
	w.now = func() time.Time { return time.Unix(1_700_000_000, 0) }
	if fake.partitions == nil {
		fake.partitions = maps.Clone(counts)
		// The state topics the topic manager would create.
		for _, p := range topo.Processors() {
			fake.partitions[restore.CheckpointTopic(cfg.ApplicationID, p.Name)] = counts[p.Inputs[0]]
			for _, s := range p.Stores {
				fake.partitions[restore.StoreChangelogTopic(cfg.ApplicationID, s.Name)] = counts[p.Inputs[0]]
			}
		}
	}
	w.consumer = fake
	w.producer = newProducer(fake, w.log, w.metrics, w.stop)
	w.tasks, err = w.newTaskManager(counts, fake, fake)
	require.NoError(t, err)
	w.pump.attach(w.tasks, w.producer, w.consumer, w.cfg.MaxHeldPerChannel)
	t.Cleanup(func() { closeTasks(w.tasks, w.metrics, w.tasks.Tasks()) }) // and their stores on disk
	w.pump.poll = fake.Poll
	if fake.holdRestore == nil {
		w.restores.start = func(f func()) { f() }
	}
	t.Cleanup(w.restores.cancelAll) // before the stores close
	var parts []causal.Channel
	for _, pi := range topo.Processors() {
		for _, in := range pi.Inputs {
			for p := range counts[in] {
				parts = append(parts, causal.Channel{Topic: in, Partition: p})
			}
		}
	}
	require.NoError(t, w.assign(parts))
	return w
}

// pollAndHandle polls once, hands what came to the pump, and returns how
// many events came.
func pollAndHandle(w *StreamThread) int {
	n := w.loop.Poll()
	w.loop.Handle(&w.pump)
	return n
}

// pollAll polls and hands to the pump until nothing comes.
func pollAll(w *StreamThread) {
	for pollAndHandle(w) > 0 {
	}
}

// withoutStreaming is the pump, but it leaves the tasks' outputs for the
// commit to send.
type withoutStreaming struct{ *pump }

func (withoutStreaming) Handled() {}

// drain polls and handles everything queued, then commits.
func drainAndCommit(t *testing.T, w *StreamThread) {
	t.Helper()
	pollAll(w)
	if err := w.commits.commit(); err != nil {
		w.commits.onError(err)
	}
	require.NoError(t, w.fate.Fatal())
}

// taskObject returns the task behind id, to compare instances.
func taskObject(t *testing.T, w *StreamThread, id string) *taskmgr.Task {
	t.Helper()
	rt, ok := w.tasks.Find(id)
	require.True(t, ok, id)
	return rt
}

// restart serves a restart request for id, as the pump does.
func restart(w *StreamThread, id string) error { return w.serve(taskRequest{id: id}).err }

// skipRecord serves a skip request for id, as the pump does.
func skipRecord(w *StreamThread, id string) (causal.Entry, error) {
	r := w.serve(taskRequest{id: id, skip: true})
	return r.skipped, r.err
}
