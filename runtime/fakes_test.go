package runtime

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/internal/taskmgr"
)

// fakeKafka is an in-process stand-in for what the worker's parts ask of
// Kafka: a consumer that hands out queued messages, a transactional
// producer whose committed records and offsets become visible only on
// commit, and the changelog read back from what was committed. It lets the
// task manager and the failure policy run in milliseconds without a broker.
type fakeKafka struct {
	t *testing.T
	// queue is what Poll hands out next.
	queue []kafka.Event
	// seeks records every Seek; log is every message sent, per channel, for
	// a seek to hand out again.
	seeks []kafka.TopicPartition
	log   map[causal.Channel][]*kafka.Message
	// lagging channels are written but not fetched until catchUp.
	lagging map[causal.Channel][]*kafka.Message
	// high is every partition's high watermark; partitions is every
	// topic's partition count (a topic not in it does not exist).
	high       map[causal.Channel]int64
	partitions map[string]int32
	// queries counts QueryWatermarkOffsets calls.
	queries int

	open      []*kafka.Message
	offsets   []kafka.TopicPartition
	committed []*kafka.Message
	groupOffs map[causal.Channel]int64
	// produceErr, when set, is what Produce returns for a message it
	// refuses.
	produceErr func(*kafka.Message) error
	// commitErr, when set, fails the next CommitTransaction, and the
	// failCommits after it.
	commitErr   error
	failCommits int
	aborts      int
	// restoreReads counts the changelog partitions restores read.
	restoreReads int
	// holdRestore, when set (before the worker is made), makes restores
	// run on a goroutine of their own, and holds the read of each channel
	// it names until its channel is closed. The read takes what it reads
	// from the fake before it waits, so the test may send meanwhile.
	holdRestore map[causal.Channel]chan struct{}
}

func newFakeKafka(t *testing.T) *fakeKafka {
	return &fakeKafka{t: t, high: map[causal.Channel]int64{}, groupOffs: map[causal.Channel]int64{}, log: map[causal.Channel][]*kafka.Message{}}
}

var (
	_ groupConsumer  = (*fakeKafka)(nil)
	_ producerClient = (*fakeKafka)(nil)
)

func (f *fakeKafka) Poll(int) kafka.Event {
	if len(f.queue) == 0 {
		return nil
	}
	ev := f.queue[0]
	f.queue = f.queue[1:]
	return ev
}
func (f *fakeKafka) Assign([]kafka.TopicPartition) error { return nil }
func (f *fakeKafka) Unassign() error                     { return nil }

// Seek drops what is queued of the partition and queues it again from the
// offset, as librdkafka discards what it fetched before a seek.
func (f *fakeKafka) Seek(tp kafka.TopicPartition, _ int) error {
	f.seeks = append(f.seeks, tp)
	ch := causal.Channel{Topic: *tp.Topic, Partition: tp.Partition}
	kept := f.queue[:0]
	for _, ev := range f.queue {
		if m, ok := ev.(*kafka.Message); !ok || *m.TopicPartition.Topic != ch.Topic || m.TopicPartition.Partition != ch.Partition {
			kept = append(kept, ev)
		}
	}
	f.queue = kept
	for _, m := range f.log[ch][tp.Offset:] {
		f.queue = append(f.queue, m)
	}
	return nil
}
func (f *fakeKafka) Pause([]kafka.TopicPartition) error  { return nil }
func (f *fakeKafka) Resume([]kafka.TopicPartition) error { return nil }
func (f *fakeKafka) Position(tps []kafka.TopicPartition) ([]kafka.TopicPartition, error) {
	return nil, nil
}
func (f *fakeKafka) GetConsumerGroupMetadata() (*kafka.ConsumerGroupMetadata, error) {
	return &kafka.ConsumerGroupMetadata{}, nil
}
func (f *fakeKafka) AssignmentLost() bool { return false }
func (f *fakeKafka) Close() error         { return nil }
func (f *fakeKafka) Committed(tps []kafka.TopicPartition, _ int) ([]kafka.TopicPartition, error) {
	out := make([]kafka.TopicPartition, len(tps))
	for i, tp := range tps {
		out[i] = tp
		out[i].Offset = kafka.OffsetInvalid
		if off, ok := f.groupOffs[causal.Channel{Topic: *tp.Topic, Partition: tp.Partition}]; ok {
			out[i].Offset = kafka.Offset(off)
		}
	}
	return out, nil
}
func (f *fakeKafka) QueryWatermarkOffsets(topic string, p int32, _ int) (int64, int64, error) {
	f.queries++
	if n, ok := f.partitions[topic]; !ok || p >= n {
		return 0, 0, kafka.NewError(kafka.ErrUnknownTopicOrPart, "Broker: Unknown topic or partition", false)
	}
	return 0, f.high[causal.Channel{Topic: topic, Partition: p}], nil
}

// GetWatermarkOffsets knows nothing the broker was not asked: every
// claim check goes to QueryWatermarkOffsets.
func (f *fakeKafka) GetWatermarkOffsets(string, int32) (int64, int64, error) {
	return 0, 0, kafka.NewError(kafka.ErrState, "no cached watermarks", false)
}

func (f *fakeKafka) Produce(msg *kafka.Message, _ chan kafka.Event) error {
	if f.produceErr != nil {
		if err := f.produceErr(msg); err != nil {
			return err
		}
	}
	cp := *msg
	cp.Headers = slices.Clone(msg.Headers) // the producer reuses its header list, as librdkafka lets it
	topic := *msg.TopicPartition.Topic
	cp.TopicPartition.Topic = &topic
	f.open = append(f.open, &cp)
	return nil
}
func (f *fakeKafka) Flush(int) int           { return 0 }
func (f *fakeKafka) BeginTransaction() error { return nil }
func (f *fakeKafka) SendOffsetsToTransaction(_ context.Context, offs []kafka.TopicPartition, _ *kafka.ConsumerGroupMetadata) error {
	f.offsets = append(f.offsets, offs...)
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
	f.committed = append(f.committed, f.open...)
	// Committed records become readable, at the next offsets of their
	// partitions, for whatever reads them (a task downstream).
	for _, m := range f.open {
		ch := causal.Channel{Topic: *m.TopicPartition.Topic, Partition: m.TopicPartition.Partition}
		m.TopicPartition.Offset = kafka.Offset(f.high[ch])
		f.high[ch]++
		f.log[ch] = append(f.log[ch], m)
		if held, ok := f.lagging[ch]; ok {
			f.lagging[ch] = append(held, m)
		} else {
			f.queue = append(f.queue, m)
		}
	}
	for _, tp := range f.offsets {
		f.groupOffs[causal.Channel{Topic: *tp.Topic, Partition: tp.Partition}] = int64(tp.Offset)
	}
	f.open, f.offsets = nil, nil
	return nil
}
func (f *fakeKafka) AbortTransaction(context.Context) error {
	f.open, f.offsets = nil, nil
	f.aborts++
	return nil
}
func (f *fakeKafka) GetFatalError() error { return nil }

// bounds and read make the fake a changelog source: what was committed
// to a partition, at its offsets.
func (f *fakeKafka) bounds(ch causal.Channel) (low, high int64, err error) { return 0, f.high[ch], nil }

func (f *fakeKafka) read(stop <-chan struct{}, from map[causal.Channel]int64, apply func(ch causal.Channel, key, value []byte) error,
	done func(ch causal.Channel, end int64) error) error {
	type part struct {
		ch   causal.Channel
		msgs []*kafka.Message
		end  int64
	}
	var now, held []part
	for ch, off := range from {
		f.restoreReads++
		p := part{ch: ch, end: max(off, f.high[ch])}
		for _, m := range f.log[ch] {
			if int64(m.TopicPartition.Offset) >= off {
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
func (f *fakeKafka) outputs(topic string) []*kafka.Message {
	var out []*kafka.Message
	for _, m := range f.committed {
		if *m.TopicPartition.Topic == topic {
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
	topic := ch.Topic
	m := &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: ch.Partition, Offset: kafka.Offset(off)},
		Key: []byte(value), Value: []byte(value), Timestamp: ts}
	if len(clock) > 0 {
		c, err := causal.NewClock(clock...)
		require.NoError(f.t, err)
		m.Headers = []kafka.Header{{Key: causal.HeaderKey, Value: causal.EncodeClock(c)}}
	}
	f.log[ch] = append(f.log[ch], m)
	if held, ok := f.lagging[ch]; ok {
		f.lagging[ch] = append(held, m)
		return off
	}
	f.queue = append(f.queue, m)
	return off
}

// lag makes the consumer fall behind on ch: what is sent there is not
// fetched until catchUp.
func (f *fakeKafka) lag(ch causal.Channel) {
	if f.lagging == nil {
		f.lagging = map[causal.Channel][]*kafka.Message{}
	}
	f.lagging[ch] = nil
}

// catchUp fetches what ch held back.
func (f *fakeKafka) catchUp(ch causal.Channel) {
	for _, m := range f.lagging[ch] {
		f.queue = append(f.queue, m)
	}
	delete(f.lagging, ch)
}

// newFakeWorker returns a worker wired to fake, assigned every partition
// of the topology's inputs, with its tasks built, configured by
// DefaultConfig and then configure. It is driven by calling the pump's
// steps directly; nothing runs in the background.
func newFakeWorker(t *testing.T, fake *fakeKafka, topo *framework.Topology, counts map[string]int32, configure ...func(*Config)) *Worker {
	t.Helper()
	cfg := DefaultConfig()
	cfg.ApplicationID = "fake"
	cfg.StateDir = t.TempDir()
	for _, c := range configure {
		c(&cfg)
	}
	w, err := NewWorker(cfg, topo, zaptest.NewLogger(t), nil)
	require.NoError(t, err)
	w.now = func() time.Time { return time.Unix(1_700_000_000, 0) }
	if fake.partitions == nil {
		fake.partitions = maps.Clone(counts)
		// The state topics the topic manager would create.
		for _, p := range topo.Processors() {
			fake.partitions[checkpointTopic(cfg.ApplicationID, p.Name)] = counts[p.Inputs[0]]
			for _, s := range p.Stores {
				fake.partitions[storeChangelogTopic(cfg.ApplicationID, s.Name)] = counts[p.Inputs[0]]
			}
		}
	}
	w.consumer = fake
	w.producer = newTxnProducer(fake, w.log, w.metrics, w.stop)
	t.Cleanup(w.producer.refusals.close)
	w.tasks, err = w.newTaskManager(counts, fake, fake)
	require.NoError(t, err)
	t.Cleanup(w.closeTasks) // and their stores on disk
	w.pump.poll = fake.Poll
	if fake.holdRestore == nil {
		w.restores.start = func(f func()) { f() }
	}
	t.Cleanup(w.cancelRestores) // before the stores close
	var parts []kafka.TopicPartition
	for _, pi := range topo.Processors() {
		for _, in := range pi.Inputs {
			for p := range counts[in] {
				topic := in
				parts = append(parts, kafka.TopicPartition{Topic: &topic, Partition: p})
			}
		}
	}
	require.NoError(t, w.assign(parts))
	return w
}

// drain polls and handles everything queued, then commits.
func (w *Worker) drainAndCommit(t *testing.T) {
	t.Helper()
	for w.poll() > 0 {
		w.handlePolled()
	}
	if err := w.commit(); err != nil {
		w.onCommitError(err)
	}
	require.NoError(t, w.fatalErr)
}

// taskObject returns the task behind id, to compare instances.
func (w *Worker) taskObject(t *testing.T, id string) *taskmgr.Task {
	t.Helper()
	rt, ok := w.tasks.Find(id)
	require.True(t, ok, id)
	return rt
}

// restart serves a restart request for id, as the pump does.
func (w *Worker) restart(id string) error { return w.serve(taskRequest{id: id}).err }

// skipRecord serves a skip request for id, as the pump does.
func (w *Worker) skipRecord(id string) (causal.Entry, error) {
	r := w.serve(taskRequest{id: id, skip: true})
	return r.skipped, r.err
}
