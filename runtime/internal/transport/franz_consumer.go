package transport

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/causeway-stream/causeway/causal"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// franzConsumer is the group consumer on kgo.
//
//causeway:owned
type franzConsumer struct {
	base       []kgo.Opt
	cl         *kgo.Client // the group member, made by Subscribe
	adm        *kadm.Client
	group      string
	instanceID string
	reset      kgo.Offset
	balancer   kgo.GroupBalancer
	handler    RebalanceHandler

	// turn is held by the pump, except while it waits inside kgo's poll,
	// and by a rebalance callback while it runs the handler.
	turn sync.Mutex
	// mu guards starts, which Assign adds to in the assigned handler for
	// adjustOffsets to hand to kgo (a partition's stays until it is
	// revoked), and closing.
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

// franzGroup is the consumer's membership, for TxnOffsetCommit.
type franzGroup struct {
	memberID   string
	generation int32
	instanceID string
}

// franzAhead is what one partition of a fetch has left to hand out: an
// error first, then records.
type franzAhead struct {
	ch   causal.Channel
	err  error
	recs []*kgo.Record
}

func (c *franzConsumer) Subscribe(topics []string, h RebalanceHandler) error {
	c.handler = h
	opts := append([]kgo.Opt{
		kgo.ConsumerGroup(c.group), kgo.ConsumeTopics(topics...), kgo.Balancers(c.balancer),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords(),
		kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(), kgo.ConsumeResetOffset(c.reset),
		kgo.SessionTimeout(10 * time.Second), kgo.HeartbeatInterval(time.Second), kgo.FetchMaxWait(10 * time.Millisecond),
		kgo.OnPartitionsAssigned(c.onAssigned), kgo.OnPartitionsRevoked(c.onRevoked), kgo.OnPartitionsLost(c.onLost),
		kgo.AdjustFetchOffsetsFn(c.adjustOffsets),
	}, c.base...)
	if c.instanceID != "" {
		opts = append(opts, kgo.InstanceID(c.instanceID))
	}
	return c.start(opts)
}

// start makes the client from opts. From here on the pump holds the
// turn, but inside kgo's poll.
func (c *franzConsumer) start(opts []kgo.Opt) error {
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
		_ = c.handler.Assigned(chs)
	})
}

func (c *franzConsumer) onRevoked(_ context.Context, _ *kgo.Client, m map[string][]int32) {
	c.inTurn(m, func(chs []causal.Channel) {
		c.handler.Revoked(chs, false)
		c.forget(chs)
	})
}

func (c *franzConsumer) onLost(_ context.Context, _ *kgo.Client, m map[string][]int32) {
	c.inTurn(m, func(chs []causal.Channel) {
		c.handler.Revoked(chs, true)
		c.forget(chs)
	})
}

func (c *franzConsumer) forget(chs []causal.Channel) {
	c.mu.Lock()
	for _, ch := range chs {
		delete(c.starts, ch)
	}
	c.mu.Unlock()
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
//
// Without Subscribe before, it reads starts as they are, in no group: its
// caller is the only reader of those channels.
func (c *franzConsumer) Assign(starts map[causal.Channel]int64) error {
	c.mu.Lock()
	// Kept until the partition goes: rebalancing cooperatively, kgo may
	// fetch a partition's offsets in a later session than the one that
	// added it (when a rebalance cut the first fetch short), after more
	// partitions were added.
	if c.starts == nil {
		c.starts = map[causal.Channel]int64{}
	}
	for ch, off := range starts {
		c.starts[ch] = off
	}
	for ch, off := range starts {
		c.positions[ch] = off
		c.dropAhead(ch)
	}
	c.mu.Unlock()
	if c.cl != nil {
		return nil
	}
	parts := map[string]map[int32]kgo.Offset{}
	for ch, off := range starts {
		if parts[ch.Topic] == nil {
			parts[ch.Topic] = map[int32]kgo.Offset{}
		}
		parts[ch.Topic][ch.Partition] = kgo.NewOffset().At(off)
	}
	return c.start(append([]kgo.Opt{kgo.ConsumePartitions(parts), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords(),
		kgo.FetchMaxWait(10 * time.Millisecond)}, c.base...))
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
func (c *franzConsumer) Poll(timeout time.Duration, max int, batch *[]Event) int {
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

// handOutSlice is how many events of one partition handOut takes before it
// turns to the next.
const handOutSlice = 64

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

func (c *franzConsumer) GroupMetadata() (GroupMetadata, error) {
	member, gen := c.cl.GroupMetadata()
	return franzGroup{memberID: member, generation: gen, instanceID: c.instanceID}, nil
}

func (c *franzConsumer) Standbys() StandbyAssignment {
	if b, ok := c.balancer.(*franzBalancer); ok {
		return b.standbys()
	}
	return StandbyAssignment{}
}

func (c *franzConsumer) Probe() {
	if _, ok := c.balancer.(*franzBalancer); ok && c.cl != nil {
		c.cl.ForceRebalance()
	}
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
