package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
)

// The franz transport: franz-go's kgo, pure Go (--client franz).
//
// The group consumer and the transactional producer are two clients, as
// with librdkafka. kgo commits offsets inside a transaction only through
// GroupTransactSession, which commits the consumer's own positions; the
// worker commits offsets of its choosing (each channel's lowest next
// offset over the tasks reading it), so the producer adds them to the
// transaction itself: AddOffsetsToTxn, then TxnOffsetCommit carrying the
// consumer's generation, member id and instance id (KIP-447). The
// producer speaks the transaction protocol of Kafka before 4.0, where
// ending a transaction keeps the producer epoch, so that an EndTxn the
// transport sends itself (for a transaction that holds offsets and no
// record, which kgo would not end) leaves kgo's view of the producer
// right.
//
// kgo runs the rebalance callbacks on a goroutine of its own, at any
// moment. The consumer lets them run the worker's handler only while the
// pump waits inside kgo's poll: the pump holds the consumer's turn lock at
// every other moment, and a callback takes it. So the handler never runs
// beside the pump's own work, as inside librdkafka's Poll. kgo also holds
// a rebalance back until the pump has handled what it polled
// (BlockRebalanceOnPoll), so that the assignment does not change under
// records already taken.

func init() { transports[ClientFranz] = franzTransport{} }

type franzTransport struct{}

// pollBatch is how many events the pump takes at a time of what the
// consumer read ahead (see franzConsumer.Poll).
func (franzTransport) pollBatch() int { return 512 }

// kgo's record header and the framework's are the same struct: the
// conversion below compiles only while their fields are alike in name,
// type and order, which makes their layouts alike too. So a fetched
// record's header list is viewed as the framework's instead of copied,
// and goes to the task as it is (kgo does not write it). An output's
// headers go the other way by copy (recordSlab.copyHeaders).
var _ = framework.Header(kgo.RecordHeader{})

// frameworkHeaders views hs as the framework's headers.
func frameworkHeaders(hs []kgo.RecordHeader) []framework.Header {
	return unsafe.Slice((*framework.Header)(unsafe.Pointer(unsafe.SliceData(hs))), len(hs))
}

// franzRequestTimeout bounds the admin requests of the franz clients.
const franzRequestTimeout = 10 * time.Second

// franzBase is the options every franz client of w starts from: the
// brokers and what --kafka says about connecting and tuning.
func (s clientSettings) franzBase(role clientRole) ([]kgo.Opt, error) {
	conn, err := franzConnection(s.cfg.Kafka)
	if err != nil {
		return nil, err
	}
	tuning, err := franzTuning(s.cfg.Kafka, role)
	if err != nil {
		return nil, err
	}
	opts := []kgo.Opt{kgo.SeedBrokers(strings.Split(s.bootstrap, ",")...), kgo.ClientID(s.cfg.ApplicationID + "-" + s.instanceID),
		kgo.RetryBackoffFn(franzBackoff)}
	return append(append(opts, conn...), tuning...), nil
}

// franzBackoff is how long a franz client waits before retrying a request
// for the tries-th time: 100 ms doubling up to 1 s, as librdkafka's
// retry.backoff.ms and retry.backoff.max.ms do by default. kgo's own
// default grows to 5 s, and a few such waits inside one commit outlast the
// transaction's timeout.
func franzBackoff(tries int) time.Duration {
	return min(100*time.Millisecond<<min(max(tries-1, 0), 4), time.Second)
}

func (franzTransport) producer(s clientSettings) (producerClient, clusterAdmin, error) {
	base, err := s.franzBase(producerRole)
	if err != nil {
		return nil, nil, fmt.Errorf("producer: %w", err)
	}
	txnID := s.cfg.ApplicationID + "-" + s.instanceID
	opts := append([]kgo.Opt{
		kgo.TransactionalID(txnID), kgo.TransactionTimeout(10 * time.Second),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5 * time.Millisecond),
		kgo.MaxBufferedRecords(franzMaxBufferedRecords), kgo.ProducerBatchMaxBytes(1 << 20),
		// A produce error that asks for new metadata (not enough replicas,
		// a leader moving) is retried after it: kgo's default of 5 s
		// between refreshes would hold a transaction open for longer than
		// its timeout after a few retries, as librdkafka's 100 ms does not.
		kgo.MetadataMinAge(100 * time.Millisecond),
		// The transaction protocol before KIP-890 part 2: see the top of
		// this file.
		kgo.MaxVersions(kversion.V3_9_0()),
	}, base...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("producer: %w", err)
	}
	p := &franzProducer{cl: cl, txnID: txnID, group: s.cfg.ApplicationID}
	p.promise = p.delivered
	return p, &franzAdmin{adm: kadm.NewClient(cl), group: s.cfg.ApplicationID}, nil
}

func (franzTransport) consumer(s clientSettings) (groupConsumer, error) {
	base, err := s.franzBase(consumerRole)
	if err != nil {
		return nil, fmt.Errorf("consumer: %w", err)
	}
	// Offsets and watermarks are asked with a client outside the group.
	admin, err := kgo.NewClient(base...)
	if err != nil {
		return nil, fmt.Errorf("consumer: %w", err)
	}
	c := &franzConsumer{base: base, adm: kadm.NewClient(admin), group: s.cfg.ApplicationID,
		positions: map[causal.Channel]int64{}, highs: map[causal.Channel]int64{}, paused: map[causal.Channel]bool{}}
	if s.cfg.StaticMembership {
		c.instanceID = s.cfg.ApplicationID + "-" + s.instanceID
	}
	// Every assigned partition starts at an explicit offset; a fetch that
	// falls out of range is an error on that partition unless the
	// application opted into resets.
	c.reset = kgo.NoResetOffset()
	if s.cfg.AllowOffsetReset {
		c.reset = kgo.NewOffset().AtStart()
		if s.cfg.AutoOffsetReset == "latest" {
			c.reset = kgo.NewOffset().AtEnd()
		}
	}
	return c, nil
}

// franzGroup is the consumer's membership, for TxnOffsetCommit.
type franzGroup struct {
	memberID   string
	generation int32
	instanceID string
}

// franzConsumer is the group consumer on kgo.
type franzConsumer struct {
	base       []kgo.Opt
	cl         *kgo.Client // the group member, made by Subscribe
	adm        *kadm.Client
	group      string
	instanceID string
	reset      kgo.Offset
	handler    rebalanceHandler

	// turn is held by the pump, except while it waits inside kgo's poll,
	// and by a rebalance callback while it runs the handler.
	turn sync.Mutex
	// mu guards starts, which Assign sets in the assigned handler for
	// adjustOffsets to hand to kgo, and closing.
	mu      sync.Mutex
	starts  map[causal.Channel]int64
	closing bool

	// Owned by the pump: where each partition is read to, and its high
	// watermark as the last fetch of it said.
	positions map[causal.Channel]int64
	highs     map[causal.Channel]int64
	// ahead is what the consumer took from kgo and has not handed out
	// yet, partition by partition in the order fetched; paused is what
	// Pause holds back of it (and of kgo's fetches). See Poll.
	ahead  []franzAhead
	paused map[causal.Channel]bool
}

// franzAhead is what one partition of a fetch has left to hand out: an
// error first, then records.
type franzAhead struct {
	ch   causal.Channel
	err  error
	recs []*kgo.Record
}

func (c *franzConsumer) Subscribe(topics []string, h rebalanceHandler) error {
	c.handler = h
	opts := append([]kgo.Opt{
		kgo.ConsumerGroup(c.group), kgo.ConsumeTopics(topics...), kgo.Balancers(kgo.RangeBalancer()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords(),
		kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(), kgo.ConsumeResetOffset(c.reset),
		kgo.SessionTimeout(10 * time.Second), kgo.HeartbeatInterval(time.Second), kgo.FetchMaxWait(10 * time.Millisecond),
		kgo.OnPartitionsAssigned(c.onAssigned), kgo.OnPartitionsRevoked(c.onRevoked), kgo.OnPartitionsLost(c.onLost),
		kgo.AdjustFetchOffsetsFn(c.adjustOffsets),
	}, c.base...)
	if c.instanceID != "" {
		opts = append(opts, kgo.InstanceID(c.instanceID))
	}
	// From here on the pump holds the turn, but inside kgo's poll.
	c.turn.Lock()
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		c.turn.Unlock()
		return fmt.Errorf("consumer: %w", err)
	}
	c.cl = cl
	return nil
}

func franzChannels(m map[string][]int32) []causal.Channel {
	var chs []causal.Channel
	for topic, ps := range m {
		for _, p := range ps {
			chs = append(chs, causal.Channel{Topic: topic, Partition: p})
		}
	}
	return chs
}

func (c *franzConsumer) isClosing() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closing
}

// inTurn runs f on the callback's goroutine once the pump waits inside
// kgo's poll, unless the consumer is closing.
func (c *franzConsumer) inTurn(m map[string][]int32, f func(chs []causal.Channel)) {
	if len(m) == 0 {
		return
	}
	c.turn.Lock()
	defer c.turn.Unlock()
	if !c.isClosing() {
		f(franzChannels(m))
	}
}

func (c *franzConsumer) onAssigned(_ context.Context, _ *kgo.Client, m map[string][]int32) {
	c.inTurn(m, func(chs []causal.Channel) {
		// A failed assignment stops the worker (its fatal error), so
		// there is nothing more to do with the error here.
		_ = c.handler.assigned(chs)
	})
}

func (c *franzConsumer) onRevoked(_ context.Context, _ *kgo.Client, m map[string][]int32) {
	c.inTurn(m, func(chs []causal.Channel) {
		c.handler.revoked(chs, false)
		c.forget(chs)
	})
}

func (c *franzConsumer) onLost(_ context.Context, _ *kgo.Client, m map[string][]int32) {
	c.inTurn(m, func(chs []causal.Channel) {
		c.handler.revoked(chs, true)
		c.forget(chs)
	})
}

func (c *franzConsumer) forget(chs []causal.Channel) {
	for _, ch := range chs {
		delete(c.positions, ch)
		delete(c.highs, ch)
	}
	c.dropAhead(chs...)
}

// dropAhead forgets what the consumer read ahead of chs.
func (c *franzConsumer) dropAhead(chs ...causal.Channel) {
	c.ahead = slices.DeleteFunc(c.ahead, func(a franzAhead) bool { return slices.Contains(chs, a.ch) })
}

// adjustOffsets starts each assigned partition where the worker said.
func (c *franzConsumer) adjustOffsets(_ context.Context, offsets map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for topic, ps := range offsets {
		for p := range ps {
			if off, ok := c.starts[causal.Channel{Topic: topic, Partition: p}]; ok {
				ps[p] = kgo.NewOffset().At(off).WithEpoch(-1)
			}
		}
	}
	return offsets, nil
}

// Assign keeps starts for adjustOffsets, and as the partitions' positions
// until records move them: a partition with nothing new to read has its
// start as its position, as librdkafka's consumer reports it.
func (c *franzConsumer) Assign(starts map[causal.Channel]int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.starts = starts
	for ch, off := range starts {
		c.positions[ch] = off
		c.dropAhead(ch)
	}
	return nil
}

// Poll hands out up to max events the consumer read ahead; with none
// left to hand out, it lets a waiting rebalance run, then takes everything
// kgo has fetched. A control record (a transaction marker) becomes a
// position advance. The pump gives up its turn only while it waits inside
// kgo's poll.
//
// Taking all of kgo's buffered fetch at once is what lets kgo fetch again
// while the pump works: kgo sends a partition's next fetch only once the
// last one is taken in full, so polling it max records at a time would
// leave the broker idle while the pump handles a fetch, and the pump idle
// while the next one comes. A rebalance waits until what was read ahead
// is handed out, which is one fetch.
func (c *franzConsumer) Poll(timeout time.Duration, max int, batch *[]consumerEvent) int {
	if n := c.handOut(max, batch); n > 0 {
		return n
	}
	c.cl.AllowRebalance()
	ctx, cancel := context.WithTimeout(context.Background(), max1ms(timeout))
	c.turn.Unlock() // a rebalance callback may run the handler now
	fetches := c.cl.PollFetches(ctx)
	c.turn.Lock()
	cancel()
	for i := range fetches {
		for j := range fetches[i].Topics {
			t := &fetches[i].Topics[j]
			for k := range t.Partitions {
				c.readAhead(t.Topic, &t.Partitions[k])
			}
		}
	}
	return c.handOut(max, batch)
}

// max1ms is timeout, or a millisecond for none: kgo takes what it has
// buffered only with a context that is not done yet.
func max1ms(timeout time.Duration) time.Duration { return max(timeout, time.Millisecond) }

// readAhead keeps what kgo fetched of one partition to hand out.
func (c *franzConsumer) readAhead(topic string, p *kgo.FetchPartition) {
	ch := causal.Channel{Topic: topic, Partition: p.Partition}
	err := p.Err
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || errors.Is(err, kgo.ErrClientClosed) {
		err = nil
	}
	if p.HighWatermark > 0 {
		c.highs[ch] = p.HighWatermark
	}
	if err != nil || len(p.Records) > 0 {
		c.ahead = append(c.ahead, franzAhead{ch: ch, err: err, recs: p.Records})
	}
}

// handOut turns up to max of the events read ahead into batch, skipping
// paused partitions, and returns how many.
func (c *franzConsumer) handOut(max int, batch *[]consumerEvent) int {
	n := 0
	for i := range c.ahead {
		if n == max {
			break
		}
		if a := &c.ahead[i]; !c.paused[a.ch] {
			n += c.take(a, max-n, batch)
		}
	}
	c.ahead = slices.DeleteFunc(c.ahead, func(a franzAhead) bool { return a.err == nil && len(a.recs) == 0 })
	return n
}

// take turns up to max events of a into batch and returns how many.
func (c *franzConsumer) take(a *franzAhead, max int, batch *[]consumerEvent) int {
	topic, partition := a.ch.Topic, a.ch.Partition
	n := 0
	if a.err != nil {
		*batch = append(*batch, consumerEvent{kind: eventPartitionError, msg: message{Topic: topic, Partition: partition}, err: franzError(a.err)})
		a.err = nil
		n++
	}
	recs := a.recs[:min(len(a.recs), max-n)]
	a.recs = a.recs[len(recs):]
	if len(recs) > 0 {
		c.positions[a.ch] = recs[len(recs)-1].Offset + 1
	}
	for _, r := range recs {
		if r.Attrs.IsControl() {
			*batch = append(*batch, consumerEvent{kind: eventPosition, msg: message{Topic: topic, Partition: partition, Offset: r.Offset + 1}})
		} else {
			setRecordEvent(nextEvent(batch), topic, partition, r)
		}
	}
	return n + len(recs)
}

// nextEvent extends batch by one event and returns it. The event may hold
// one the pump handled before: set all of it.
func nextEvent(batch *[]consumerEvent) *consumerEvent {
	b := *batch
	if len(b) < cap(b) {
		b = b[:len(b)+1]
	} else {
		b = append(b, consumerEvent{})
	}
	*batch = b
	return &b[len(b)-1]
}

// setRecordEvent makes e the event of record r, fetched from topic and
// partition. Its fields are written one at a time, and those holding
// pointers only when they change (see franzProducer.Produce).
func setRecordEvent(e *consumerEvent, topic string, partition int32, r *kgo.Record) {
	e.kind = eventRecord
	if e.err != nil {
		e.err = nil
	}
	m := &e.msg
	if m.Topic != topic {
		m.Topic = topic
	}
	m.Partition, m.Offset, m.Key, m.Value = partition, r.Offset, r.Key, r.Value
	if m.Timestamp != r.Timestamp {
		m.Timestamp = r.Timestamp
	}
	var hs []framework.Header
	if len(r.Headers) > 0 {
		hs = frameworkHeaders(r.Headers)
	}
	m.Headers = hs
}

func franzOffsets(at map[causal.Channel]int64) map[string]map[int32]kgo.EpochOffset {
	out := map[string]map[int32]kgo.EpochOffset{}
	for ch, off := range at {
		if out[ch.Topic] == nil {
			out[ch.Topic] = map[int32]kgo.EpochOffset{}
		}
		out[ch.Topic][ch.Partition] = kgo.EpochOffset{Epoch: -1, Offset: off}
	}
	return out
}

func franzPartitions(chs []causal.Channel) map[string][]int32 {
	out := map[string][]int32{}
	for _, ch := range chs {
		out[ch.Topic] = append(out[ch.Topic], ch.Partition)
	}
	return out
}

func (c *franzConsumer) Seek(ch causal.Channel, offset int64) error {
	c.cl.SetOffsets(franzOffsets(map[causal.Channel]int64{ch: offset}))
	c.positions[ch] = offset
	c.dropAhead(ch)
	return nil
}

// Pause stops kgo fetching chs and holds back what was read ahead of
// them, to be handed out after Resume.
func (c *franzConsumer) Pause(chs []causal.Channel) error {
	c.cl.PauseFetchPartitions(franzPartitions(chs))
	for _, ch := range chs {
		c.paused[ch] = true
	}
	return nil
}

func (c *franzConsumer) Resume(chs []causal.Channel) error {
	c.cl.ResumeFetchPartitions(franzPartitions(chs))
	for _, ch := range chs {
		delete(c.paused, ch)
	}
	return nil
}

func (c *franzConsumer) Position(chs []causal.Channel) (map[causal.Channel]int64, error) {
	out := make(map[causal.Channel]int64, len(chs))
	for _, ch := range chs {
		if off, ok := c.positions[ch]; ok {
			out[ch] = off
		}
	}
	return out, nil
}

func (c *franzConsumer) CachedWatermarks(ch causal.Channel) (low, high int64, ok bool) {
	high, ok = c.highs[ch]
	return 0, high, ok
}

func (c *franzConsumer) GroupMetadata() (groupMetadata, error) {
	member, gen := c.cl.GroupMetadata()
	return franzGroup{memberID: member, generation: gen, instanceID: c.instanceID}, nil
}

func (c *franzConsumer) Committed(chs []causal.Channel) (map[causal.Channel]int64, error) {
	// Long enough for a transaction that a worker left open when it died
	// to time out (10 s, see the producer), which settles its offsets.
	ctx, cancel := context.WithTimeout(context.Background(), 3*franzRequestTimeout)
	defer cancel()
	return franzGroupOffsets(kadm.RequireStable(ctx), c.adm, c.group, chs)
}

// franzGroupOffsets returns group's committed offsets of chs. Offsets a
// transaction still holds open are waited for (UNSTABLE_OFFSET_COMMIT, the
// answer to a stable fetch while they are), as librdkafka does, within
// ctx.
func franzGroupOffsets(ctx context.Context, adm *kadm.Client, group string, chs []causal.Channel) (map[causal.Channel]int64, error) {
	var res kadm.OffsetResponses
	err := retryWhile(ctx, franzBackoff(1), time.Second, func() error {
		var err error
		if res, err = adm.FetchOffsets(ctx, group); err != nil {
			return err
		}
		return res.Error()
	}, kerr.UnstableOffsetCommit, kerr.CoordinatorLoadInProgress)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return map[causal.Channel]int64{}, nil // nothing committed yet
	}
	if err != nil {
		return nil, fmt.Errorf("committed offsets of group %s: %w", group, franzError(err))
	}
	out := make(map[causal.Channel]int64, len(chs))
	for _, ch := range chs {
		if o, ok := res.Lookup(ch.Topic, ch.Partition); ok && o.At >= 0 {
			out[ch] = o.At
		}
	}
	return out, nil
}

func (c *franzConsumer) Watermarks(ch causal.Channel) (low, high int64, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), franzRequestTimeout)
	defer cancel()
	starts, err := c.adm.ListStartOffsets(ctx, ch.Topic)
	if err != nil {
		return 0, 0, franzError(err)
	}
	ends, err := c.adm.ListEndOffsets(ctx, ch.Topic)
	if err != nil {
		return 0, 0, franzError(err)
	}
	if low, err = franzListed(starts, ch); err != nil {
		return 0, 0, fmt.Errorf("start offset of %s: %w", ch, err)
	}
	if high, err = franzListed(ends, ch); err != nil {
		return 0, 0, fmt.Errorf("end offset of %s: %w", ch, err)
	}
	return low, high, nil
}

// franzListed is ch's offset in a listing of start or end offsets.
func franzListed(l kadm.ListedOffsets, ch causal.Channel) (int64, error) {
	o, ok := l.Lookup(ch.Topic, ch.Partition)
	switch {
	case !ok:
		return 0, franzError(kerr.UnknownTopicOrPartition)
	case o.Err != nil:
		return 0, franzError(o.Err)
	}
	return o.Offset, nil
}

func (c *franzConsumer) Close() error {
	c.mu.Lock()
	c.closing = true
	c.mu.Unlock()
	if c.cl != nil {
		// A callback waiting for the turn must get it, see closing and
		// return: closing waits for the callbacks.
		c.turn.Unlock()
		c.cl.CloseAllowingRebalance()
	}
	c.adm.Close()
	return nil
}

// franzProducer is the transactional producer on kgo.
type franzProducer struct {
	cl      *kgo.Client
	txnID   string
	group   string
	promise func(*kgo.Record, error)

	// cur is the slab the records produced are carved from; kgo holds a
	// record until it has run its promise. A full slab is sealed and
	// comes back, through done, once the promises of all its records have
	// run, to be written over instead of allocated again: a record slab is
	// most of what the producer allocates, and one written over soon after
	// kgo let go of it is still in the processor's caches. taken counts
	// the slabs cur was given since the last commit or abort. produced
	// counts the records produced (the pump's alone), and finished those
	// whose promise ran (the promises' alone), so that a record costs the
	// pump no atomic operation.
	cur      *recordSlab
	taken    int
	produced int64
	finished atomic.Int64
	// doneMu guards done, the sealed slabs whose records kgo is done with,
	// which the promises add to.
	doneMu sync.Mutex
	done   []*recordSlab
	// sent counts the records of the open transaction, and offsetsAdded
	// says its offsets were added.
	sent         int
	offsetsAdded bool

	// mu guards what the promises write: the first record refused in the
	// open transaction, and, while watched, every one.
	mu       sync.Mutex
	failed   error
	watching bool
	refused  []refusedRecord
}

// franzMaxBufferedRecords is how many produced records the franz producer
// holds at most before Produce waits for kgo to finish some: franz-go's
// own default. Each record held keeps its slab slot and the fetch its key
// and value came from; with no bound the pump ran a whole fetch ahead of
// the broker, and the worker's heap, and the fresh memory every burst
// faulted in, grew with it (docs/benchmarks.md). Ten thousand records keep
// a local broker busy; against a distant cluster, raise it with
// --kafka queue.buffering.max.messages.
const franzMaxBufferedRecords = 10000

// recordSlabLen is how many records one slab of produced records holds
// (about 160 KB), and maxSpareSlabs how many slabs the producer keeps for
// reuse at most: about 16 MB, a transaction of 100,000 records, what a
// thread producing a million records a second sends between two commits
// at the default interval, should kgo hold on to all of them.
const (
	recordSlabLen = 1024
	maxSpareSlabs = 96
)

// recordSlab is a slab of produced records, and the context each of them
// carries: kgo hands a record's Context through untouched (it fills in
// only a nil one), so the promise finds the slab of the record it
// finishes without a lookup, and a slot keeps it from one use to the
// next. As a context it is context.Background().
type recordSlab struct {
	context.Context
	records []kgo.Record
	// headers and values hold copies of the records' header lists and
	// header values, reused with the slab.
	headers []kgo.RecordHeader
	values  []byte
	// pending is how many of the records carved from the slab kgo has not
	// run the promise of, less the number carved until the slab is sealed:
	// each promise subtracts one, and sealing adds the number carved. The
	// promise or the seal that brings it to zero hands the slab back.
	pending atomic.Int64
}

func (p *franzProducer) InitTransactions(ctx context.Context) error {
	// kgo initialises the producer id on first use: ask for it now, so
	// that a previous incarnation is fenced before the worker reads.
	if _, _, err := p.cl.ProducerID(ctx); err != nil {
		return franzError(err)
	}
	return nil
}

func (p *franzProducer) BeginTransaction() error {
	p.mu.Lock()
	p.failed = nil
	p.mu.Unlock()
	p.sent, p.offsetsAdded = 0, false
	return franzError(p.cl.BeginTransaction())
}

func (p *franzProducer) Produce(m *message) error {
	if p.cur == nil || len(p.cur.records) == cap(p.cur.records) {
		p.nextSlab()
	}
	s := p.cur
	s.records = s.records[:len(s.records)+1]
	r := &s.records[len(s.records)-1]
	// Every field, as the slot may hold a record kgo finished with
	// (TestFranzRecordFields fails when kgo adds one). One at a time, and
	// those holding pointers only when they change: copying a whole
	// record into the slab costs a barrier on each of its pointers while
	// the collector marks.
	r.Key, r.Value, r.Headers = m.Key, m.Value, s.copyHeaders(m.Headers)
	if r.Timestamp != m.Timestamp {
		r.Timestamp = m.Timestamp
	}
	if r.Topic != m.Topic {
		r.Topic = m.Topic
	}
	if r.Context != context.Context(s) {
		r.Context = s
	}
	r.Partition, r.Attrs, r.ProducerEpoch, r.ProducerID, r.LeaderEpoch, r.Offset = m.Partition, kgo.RecordAttrs{}, 0, 0, 0, 0
	p.produced++
	p.sent++
	p.cl.Produce(context.Background(), r, p.promise)
	return nil
}

// copyHeaders copies hs, and the values they hold, into the slab, and
// returns the copy: kgo reads a record's headers until its promise runs,
// and the task writes over the memory of the headers it emitted once they
// are produced (task.Task.ReuseCarved). A nil value stays nil, an empty
// one empty.
func (s *recordSlab) copyHeaders(hs []framework.Header) []kgo.RecordHeader {
	if len(hs) == 0 {
		return nil
	}
	at := len(s.headers)
	for _, h := range hs {
		v := h.Value
		if len(v) > 0 { // an empty one, nil or not, has no bytes to copy
			from := len(s.values)
			// Growing the slice leaves the records carved before pointing
			// into the array it had: they keep it alive, and read it as it
			// was.
			s.values = append(s.values, v...)
			v = s.values[from:len(s.values):len(s.values)]
		}
		s.headers = append(s.headers, kgo.RecordHeader{Key: h.Key, Value: v})
	}
	return s.headers[at:len(s.headers):len(s.headers)]
}

// reset empties the slab for records to be carved from it again.
func (s *recordSlab) reset() {
	s.records, s.headers, s.values = s.records[:0], s.headers[:0], s.values[:0]
}

// nextSlab seals the full current slab and takes one kgo is done with, or
// a new one if none is. A sealed slab whose promises have all run already
// is taken again at once.
func (p *franzProducer) nextSlab() {
	p.taken++
	if s := p.cur; s != nil {
		if s.pending.Add(int64(len(s.records))) == 0 {
			s.reset()
			return
		}
	}
	p.doneMu.Lock()
	if n := len(p.done); n > 0 {
		p.cur = p.done[n-1]
		p.done[n-1] = nil
		p.done = p.done[:n-1]
		p.doneMu.Unlock()
		p.cur.reset()
		return
	}
	p.doneMu.Unlock()
	p.cur = &recordSlab{Context: context.Background(), records: make([]kgo.Record, 0, recordSlabLen)}
}

// Released is true: the producer keeps copies of the headers it is given,
// and nothing else of a task's outputs that the task writes over.
func (p *franzProducer) Released() bool { return true }

// outstanding is how many records produced kgo has not run the promise of.
func (p *franzProducer) outstanding() int64 { return p.produced - p.finished.Load() }

// recycle, once kgo has run the promise of every record produced, empties
// the current slab for the next transaction and lets go of the slabs done
// beyond what the last transaction took and maxSpareSlabs, so that a
// producer whose load fell does not keep what it no longer needs.
func (p *franzProducer) recycle() {
	if p.outstanding() != 0 {
		return
	}
	if s := p.cur; s != nil {
		// Not sealed: its promises took its count below zero.
		s.pending.Store(0)
		s.reset()
	}
	p.doneMu.Lock()
	if n := min(p.taken+1, maxSpareSlabs); len(p.done) > n {
		clear(p.done[n:])
		p.done = p.done[:n]
	}
	p.doneMu.Unlock()
	p.taken = 0
}

// delivered is every record's promise. What it reads of r comes first:
// once r's slab is handed back, the pump may write over r.
func (p *franzProducer) delivered(r *kgo.Record, err error) {
	if err != nil {
		p.refuse(r, franzError(err))
	}
	if s, ok := r.Context.(*recordSlab); ok && s.pending.Add(-1) == 0 {
		p.doneMu.Lock()
		p.done = append(p.done, s)
		p.doneMu.Unlock()
	}
	// Counted last: recycle empties the current slab once every promise
	// has counted, and so is done with its record.
	p.finished.Add(1)
}

// refuse notes r, which Kafka refused with err.
func (p *franzProducer) refuse(r *kgo.Record, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.failed == nil {
		p.failed = fmt.Errorf("produce to %s: %w", partitionString(r.Topic, r.Partition), err)
	}
	if p.watching {
		p.refused = append(p.refused, refusedRecord{msg: message{Topic: r.Topic, Partition: r.Partition, Key: r.Key, Value: r.Value}, err: err})
	}
}

func (p *franzProducer) SendOffsetsToTransaction(ctx context.Context, offsets map[causal.Channel]int64, md groupMetadata) error {
	g, _ := md.(franzGroup)
	id, epoch, err := p.cl.ProducerID(ctx)
	if err != nil {
		return franzError(err)
	}
	if !p.offsetsAdded {
		req := kmsg.NewPtrAddOffsetsToTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = p.txnID, id, epoch, p.group
		if err := p.retryConcurrent(ctx, func() error {
			resp, err := req.RequestWith(ctx, p.cl)
			if err != nil {
				return err
			}
			return kerr.ErrorForCode(resp.ErrorCode)
		}); err != nil {
			return franzError(fmt.Errorf("add offsets to transaction: %w", err))
		}
		p.offsetsAdded = true
	}
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = p.txnID, p.group, id, epoch
	req.Generation, req.MemberID = g.generation, g.memberID
	if g.instanceID != "" {
		req.InstanceID = &g.instanceID
	}
	for topic, ps := range franzOffsets(offsets) {
		t := kmsg.NewTxnOffsetCommitRequestTopic()
		t.Topic = topic
		for part, eo := range ps {
			pt := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			pt.Partition, pt.Offset, pt.LeaderEpoch = part, eo.Offset, -1
			t.Partitions = append(t.Partitions, pt)
		}
		req.Topics = append(req.Topics, t)
	}
	err = p.retryConcurrent(ctx, func() error {
		resp, err := req.RequestWith(ctx, p.cl)
		if err != nil {
			return err
		}
		for _, t := range resp.Topics {
			for _, pt := range t.Partitions {
				if err := kerr.ErrorForCode(pt.ErrorCode); err != nil {
					return fmt.Errorf("%s: %w", partitionString(t.Topic, pt.Partition), err)
				}
			}
		}
		return nil
	})
	if err != nil {
		return franzError(fmt.Errorf("commit offsets in transaction: %w", err))
	}
	return nil
}

// retryConcurrent runs f again, until ctx is done, while the broker says
// another transaction of this producer is still ending (as it does for a
// while after a commit) or its coordinator is not there yet, as
// librdkafka's transactional calls do inside.
func (p *franzProducer) retryConcurrent(ctx context.Context, f func() error) error {
	return retryWhile(ctx, 10*time.Millisecond, 500*time.Millisecond, f, kerr.ConcurrentTransactions,
		kerr.CoordinatorNotAvailable, kerr.NotCoordinator, kerr.CoordinatorLoadInProgress)
}

// retryWhile runs f again while it fails with one of the errors in
// retry, until ctx is done, waiting first and then twice as long each
// time up to most; it returns f's last error.
func retryWhile(ctx context.Context, first, most time.Duration, f func() error, retry ...error) error {
	for wait := first; ; wait = min(2*wait, most) {
		err := f()
		if !slices.ContainsFunc(retry, func(r error) bool { return errors.Is(err, r) }) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
	}
}

// endTxn ends the open transaction with an EndTxn of the transport's own,
// for a transaction kgo holds nothing of: offsets and no record.
func (p *franzProducer) endTxn(ctx context.Context, commit bool) error {
	id, epoch, err := p.cl.ProducerID(ctx)
	if err != nil {
		return franzError(err)
	}
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = p.txnID, id, epoch, commit
	err = p.retryConcurrent(ctx, func() error {
		resp, err := req.RequestWith(ctx, p.cl)
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(resp.ErrorCode)
	})
	return franzError(err)
}

func (p *franzProducer) CommitTransaction(ctx context.Context) error {
	if err := p.cl.Flush(ctx); err != nil {
		return franzError(err)
	}
	p.mu.Lock()
	failed := p.failed
	p.mu.Unlock()
	if failed != nil {
		return failed
	}
	if err := p.cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return franzError(err)
	}
	if p.offsetsAdded && p.sent == 0 {
		if err := p.endTxn(ctx, true); err != nil {
			return err
		}
	}
	p.sent, p.offsetsAdded = 0, false
	p.recycle()
	return nil
}

func (p *franzProducer) AbortTransaction(ctx context.Context) error {
	if err := p.cl.AbortBufferedRecords(ctx); err != nil {
		return franzError(err)
	}
	if err := p.cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
		return franzError(err)
	}
	if p.offsetsAdded {
		// kgo ends only a transaction it added a partition to. Ending
		// one already ended again is no error worth reporting.
		if err := p.endTxn(ctx, false); err != nil && classify(err) == classFatal {
			return err
		}
	}
	p.sent, p.offsetsAdded = 0, false
	p.recycle()
	return nil
}

// FatalError is nil: kgo reports a fenced producer through the calls
// themselves, which classify sorts as fatal.
func (p *franzProducer) FatalError() error { return nil }

func (p *franzProducer) Watch() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.watching = true
}

func (p *franzProducer) Unwatch() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.watching = false
	p.refused = nil
}

func (p *franzProducer) Refused() []refusedRecord {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = p.cl.Flush(ctx) // every record's outcome is known after it
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.refused
	p.refused = nil
	return out
}

func (p *franzProducer) Close() error {
	p.cl.Close()
	return nil
}

// franzAdmin is the admin client on kgo.
type franzAdmin struct {
	adm   *kadm.Client
	group string
}

func (a *franzAdmin) PartitionCounts(ctx context.Context) (map[string]int32, error) {
	ctx, cancel := context.WithTimeout(ctx, franzRequestTimeout)
	defer cancel()
	details, err := a.adm.ListTopics(ctx)
	if err != nil {
		return nil, franzError(err)
	}
	counts := map[string]int32{}
	for name, t := range details {
		if t.Err == nil {
			counts[name] = int32(len(t.Partitions))
		}
	}
	return counts, nil
}

func (a *franzAdmin) CreateTopics(ctx context.Context, specs []topicSpec) error {
	for _, s := range specs {
		configs := map[string]*string{}
		for k, v := range s.configs {
			configs[k] = &v
		}
		res, err := a.adm.CreateTopic(ctx, s.partitions, -1, configs, s.name)
		if err == nil {
			err = res.Err
		}
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("create topic %q: %w", s.name, franzError(err))
		}
	}
	return nil
}

func (a *franzAdmin) GroupCommitted(ctx context.Context, chs []causal.Channel) (map[causal.Channel]int64, error) {
	return franzGroupOffsets(ctx, a.adm, a.group, chs)
}

func (a *franzAdmin) Ends(ctx context.Context, chs []causal.Channel) (map[causal.Channel]int64, error) {
	var topics []string
	for _, ch := range chs {
		topics = append(topics, ch.Topic)
	}
	ends, err := a.adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("end offsets: %w", franzError(err))
	}
	out := make(map[causal.Channel]int64, len(chs))
	for _, ch := range chs {
		end, err := franzListed(ends, ch)
		if err != nil {
			return nil, fmt.Errorf("end offset of %s: %w", ch, err)
		}
		out[ch] = end
	}
	return out, nil
}

func (a *franzAdmin) Close() {}

// franzError sorts a franz-go error into the worker's classes and kinds.
func franzError(err error) error {
	if err == nil {
		return nil
	}
	var ce *clientError
	if errors.As(err, &ce) {
		return err
	}
	kind := kindOther
	switch {
	case errors.Is(err, kerr.MessageTooLarge), errors.Is(err, kerr.RecordListTooLarge):
		kind = kindTooLarge
	case errors.Is(err, kerr.OffsetOutOfRange):
		kind = kindOffsetOutOfRange
	case errors.Is(err, kerr.UnknownTopicOrPartition):
		kind = kindUnknownPartition
	}
	return &clientError{class: classifyFranz(err), kind: kind, err: err}
}

// classifyFranz sorts a franz-go error into the worker's error classes, as
// classifyRdk does librdkafka's.
func classifyFranz(err error) errorClass {
	switch {
	case errors.Is(err, kerr.ProducerFenced), errors.Is(err, kerr.InvalidProducerEpoch), errors.Is(err, kerr.FencedInstanceID),
		errors.Is(err, kerr.TransactionalIDAuthorizationFailed), errors.Is(err, kerr.ClusterAuthorizationFailed),
		errors.Is(err, kerr.SaslAuthenticationFailed), errors.Is(err, kerr.InvalidProducerIDMapping):
		return classFatal
	case errors.Is(err, kerr.MessageTooLarge), errors.Is(err, kerr.RecordListTooLarge), errors.Is(err, kerr.InvalidRecord),
		errors.Is(err, kerr.CorruptMessage), errors.Is(err, kerr.UnknownTopicOrPartition), errors.Is(err, kerr.InvalidTopicException),
		errors.Is(err, kerr.TopicAuthorizationFailed), errors.Is(err, kerr.PolicyViolation):
		return classRecord
	case errors.Is(err, kerr.RequestTimedOut), errors.Is(err, kerr.NotEnoughReplicas), errors.Is(err, kerr.NotEnoughReplicasAfterAppend),
		errors.Is(err, kerr.LeaderNotAvailable), errors.Is(err, kerr.NotLeaderForPartition), errors.Is(err, kerr.CoordinatorNotAvailable),
		errors.Is(err, kerr.NotCoordinator), errors.Is(err, kerr.CoordinatorLoadInProgress), errors.Is(err, kerr.ConcurrentTransactions),
		errors.Is(err, context.DeadlineExceeded):
		return classRetriable
	}
	return classAbortable
}
