package transporttest

import (
	"slices"
	"time"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/runtime/internal/transport"
)

// group is a consumer group's members, in the order they joined, and
// its generation, which every join and leave moves on.
type group struct {
	members    []*consumer
	generation int
	// revoked are the members that gave their partitions up in this
	// generation; the new assignment is handed out once all have.
	revoked map[*consumer]bool
}

// consumer reads committed records of the partitions it was assigned.
// Its state is the cluster's, under the cluster's lock; the rebalance
// handler runs without it.
type consumer struct {
	c     *Cluster
	group string
	// topics and handler are set by Subscribe, for a group member.
	topics  []string
	handler transport.RebalanceHandler
	// generation is the group's generation the member holds an
	// assignment of; owned is that assignment.
	generation int
	owned      []causal.Channel
	// positions are the next offsets to read of the partitions assigned.
	positions map[causal.Channel]int64
	paused    map[causal.Channel]bool
	// next is where the next fetch starts among the partitions, so that
	// none is starved.
	next int
}

var _ transport.Consumer = (*consumer)(nil)

func (k *consumer) Subscribe(topics []string, h transport.RebalanceHandler) error {
	k.c.mu.Lock()
	defer k.c.mu.Unlock()
	k.topics, k.handler = slices.Clone(topics), h
	g := k.c.groups[k.group]
	if g == nil {
		g = &group{}
		k.c.groups[k.group] = g
	}
	g.members = append(g.members, k)
	g.moveOnLocked()
	k.c.broadcastLocked()
	return nil
}

// moveOnLocked starts the group's next generation.
func (g *group) moveOnLocked() {
	g.generation++
	g.revoked = map[*consumer]bool{}
}

// shareLocked is member k's part of the group's partitions: partition
// p of every topic goes to member p mod the members, so co-partitioned
// topics stay together.
func (g *group) shareLocked(c *Cluster, k *consumer) []causal.Channel {
	me := slices.Index(g.members, k)
	var out []causal.Channel
	for _, t := range k.topics {
		n := c.countsLocked()[t]
		for p := range n {
			if int(p)%len(g.members) == me {
				out = append(out, causal.Channel{Topic: t, Partition: p})
			}
		}
	}
	return out
}

// rebalance takes the member through a new generation of its group:
// it gives its partitions up, waits for every other member to have done
// so, then takes its share. It reports whether the member holds an
// assignment of the current generation.
func (k *consumer) rebalance() bool {
	k.c.mu.Lock()
	g := k.c.groups[k.group]
	if g == nil || k.generation == g.generation {
		k.c.mu.Unlock()
		return true
	}
	if !g.revoked[k] {
		held := k.owned
		k.c.mu.Unlock()
		if len(held) > 0 {
			k.handler.Revoked(held, false)
		}
		k.c.mu.Lock()
		for _, ch := range held {
			delete(k.positions, ch)
		}
		k.owned = nil
		g.revoked[k] = true
		k.c.broadcastLocked()
	}
	for _, m := range g.members {
		if !g.revoked[m] {
			k.c.mu.Unlock()
			return false
		}
	}
	share := g.shareLocked(k.c, k)
	k.generation, k.owned = g.generation, share
	k.c.mu.Unlock()
	if err := k.handler.Assigned(share); err != nil {
		return false
	}
	return true
}

func (k *consumer) Poll(timeout time.Duration, max int, batch *[]transport.Event) int {
	deadline := time.Now().Add(timeout)
	for {
		n := 0
		if k.handler == nil || k.rebalance() {
			n = k.fetch(max, batch)
		}
		left := time.Until(deadline)
		if n > 0 || left <= 0 {
			return n
		}
		k.c.wait(min(left, 50*time.Millisecond))
	}
}

// fetch appends up to max events to batch: the committed records past
// each assigned partition's position, and a position event where the
// read went past markers.
func (k *consumer) fetch(max int, batch *[]transport.Event) int {
	k.c.mu.Lock()
	defer k.c.mu.Unlock()
	chs := sortedChannels(k.positions)
	n := 0
	for i := range chs {
		ch := chs[(k.next+i)%len(chs)]
		if k.paused[ch] {
			continue
		}
		log, err := k.c.partitionLocked(ch)
		if err != nil {
			continue
		}
		p := max64(k.positions[ch], 0)
		// atRecord is where the read stood after its last record: markers
		// past it are told by a position event, when there is room for one.
		atRecord, moved := p, false
		for p < int64(len(*log)) && n < max {
			e := (*log)[p]
			if e.state == open {
				break // the last stable offset
			}
			p++
			if e.marker || e.state == aborted {
				moved = true
				continue
			}
			*batch = append(*batch, transport.Event{Kind: transport.EventRecord, Msg: copyMessage(e.msg)})
			n++
			atRecord, moved = p, false
		}
		switch {
		case moved && n < max:
			*batch = append(*batch, transport.Event{Kind: transport.EventPosition, Msg: transport.Message{Topic: ch.Topic, Partition: ch.Partition, Offset: p}})
			n++
		case moved:
			p = atRecord
		}
		k.positions[ch] = p
		if n >= max {
			k.next = (k.next + i + 1) % len(chs)
			break
		}
	}
	return n
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

func (k *consumer) Assign(starts map[causal.Channel]int64) error {
	k.c.mu.Lock()
	defer k.c.mu.Unlock()
	clear(k.positions)
	for ch, o := range starts {
		k.positions[ch] = o
	}
	return nil
}

func (k *consumer) Seek(ch causal.Channel, offset int64) error {
	k.c.mu.Lock()
	defer k.c.mu.Unlock()
	if _, ok := k.positions[ch]; ok {
		k.positions[ch] = offset
	}
	return nil
}

func (k *consumer) Pause(chs []causal.Channel) error {
	k.c.mu.Lock()
	defer k.c.mu.Unlock()
	for _, ch := range chs {
		k.paused[ch] = true
	}
	return nil
}

func (k *consumer) Resume(chs []causal.Channel) error {
	k.c.mu.Lock()
	defer k.c.mu.Unlock()
	for _, ch := range chs {
		delete(k.paused, ch)
	}
	return nil
}

func (k *consumer) Position(chs []causal.Channel) (map[causal.Channel]int64, error) {
	k.c.mu.Lock()
	defer k.c.mu.Unlock()
	out := map[causal.Channel]int64{}
	for _, ch := range chs {
		if o, ok := k.positions[ch]; ok {
			out[ch] = o
		}
	}
	return out, nil
}

func (k *consumer) Committed(chs []causal.Channel) (map[causal.Channel]int64, error) {
	k.c.mu.Lock()
	defer k.c.mu.Unlock()
	return committedLocked(k.c, k.group, chs), nil
}

func (k *consumer) Watermarks(ch causal.Channel) (int64, int64, error) {
	k.c.mu.Lock()
	defer k.c.mu.Unlock()
	if _, err := k.c.partitionLocked(ch); err != nil {
		return 0, 0, err
	}
	return 0, k.c.endLocked(ch), nil
}

func (k *consumer) CachedWatermarks(ch causal.Channel) (int64, int64, bool) {
	low, high, err := k.Watermarks(ch)
	return low, high, err == nil
}

// GroupMetadata is the group's name, which the producer's
// SendOffsetsToTransaction takes.
func (k *consumer) GroupMetadata() (transport.GroupMetadata, error) { return k.group, nil }

func (k *consumer) Standbys() transport.StandbyAssignment { return transport.StandbyAssignment{} }

func (k *consumer) Probe() {}

// Close leaves the group, whose other members then rebalance.
func (k *consumer) Close() error {
	k.c.mu.Lock()
	defer k.c.mu.Unlock()
	if g := k.c.groups[k.group]; g != nil {
		if i := slices.Index(g.members, k); i >= 0 {
			g.members = slices.Delete(g.members, i, i+1)
			g.moveOnLocked()
			k.c.broadcastLocked()
		}
	}
	clear(k.positions)
	return nil
}
