// Package transporttest is an in-process Kafka behind the transport
// interfaces, for tests of the workers that need Kafka's semantics but
// not a broker's start-up, group joins and timeouts. A Cluster holds
// topics, committed records and the groups' committed offsets; New
// registers a transport on it under a name of its own, and a sink or
// connect worker given that name as its client runs on it.
//
// What it keeps of Kafka, because the workers rely on it:
//   - read committed: a transaction's records become readable all at
//     once when it commits, each partition it wrote followed by a marker
//     that takes an offset, as a commit marker does; an aborted
//     transaction leaves nothing readable;
//   - records flushed in an open transaction (Producer.Flush) take their
//     offsets at once: a partition's end counts them, and a reader stops
//     before them until the transaction ends (the last stable offset);
//     aborted, they stay, skipped, with a marker after them;
//   - offsets sent with a transaction become the group's committed
//     offsets at its commit, not before;
//   - a producer is fenced when another initialises transactions with its
//     transactional id (the application and instance ids), and what it
//     flushed into a transaction it left open is aborted;
//   - a topic's max.message.bytes: a larger record fails its transaction
//     at the commit, and the producer reports the refusal once watched;
//   - groups rebalance eagerly: every member gives its partitions up
//     before any member gets its new ones.
//
// What it leaves out: brokers, replication, compaction, timestamps other
// than the producer's, standbys and the cooperative protocol.
package transporttest

import (
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/runtime/internal/transport"
)

// Cluster is the in-process Kafka. Its methods may be called from any
// goroutine.
type Cluster struct {
	name string
	// listener is the cluster's address (Bootstrap).
	listener net.Listener

	mu sync.Mutex
	// changed is closed, and replaced, whenever records, offsets or a
	// group change: pollers wait on it.
	changed chan struct{}
	topics  map[string]*topic
	// offsets are the groups' committed offsets.
	offsets map[string]map[causal.Channel]int64
	groups  map[string]*group
	// epochs are the transactional ids' producer epochs, and holders
	// the producers that hold them.
	epochs  map[string]int
	holders map[string]*producer
	// failCommits fails the next commits with a retriable error.
	failCommits int
}

// topic is one topic's partitions and its limit on a record's size.
type topic struct {
	partitions [][]entry
	maxBytes   int
}

// entry is one offset of a partition: a record, or a transaction's
// marker.
type entry struct {
	msg    transport.Message
	marker bool
	state  entryState
}

// entryState is whether a record's transaction is committed, open or
// aborted.
type entryState int8

const (
	committed entryState = iota
	open
	aborted
)

// names numbers the clusters of a test binary.
var names atomic.Int64

// New returns an empty cluster whose transport is registered, until t
// ends, under the name Client returns.
func New(t testing.TB) *Cluster {
	t.Helper()
	c := &Cluster{name: "fake-" + strconv.FormatInt(names.Add(1), 10), changed: make(chan struct{}),
		topics: map[string]*topic{}, offsets: map[string]map[causal.Channel]int64{}, groups: map[string]*group{}, epochs: map[string]int{},
		holders: map[string]*producer{}}
	remove, err := transport.Register(c.name, supplier{c: c})
	if err != nil {
		t.Fatalf("transporttest: %v", err)
	}
	t.Cleanup(remove)
	if c.listener, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		t.Fatalf("transporttest: %v", err)
	}
	done := make(chan struct{})
	go c.answer(done)
	t.Cleanup(func() {
		c.listener.Close()
		<-done
	})
	return c
}

// answer accepts connections to the cluster's address, and closes them:
// a worker's start-up check dials its bootstrap servers (package reach)
// before it asks its admin client. It returns, closing done, once the
// listener is closed.
func (c *Cluster) answer(done chan<- struct{}) {
	defer close(done)
	for {
		conn, err := c.listener.Accept()
		if err != nil {
			return
		}
		conn.Close()
	}
}

// InProcess names the in-process Kafka among the clients Kafkas returns.
const InProcess = "in-process"

// Kafkas are what a test that runs its workers in the test's process
// runs them on: the in-process Kafka; with CAUSEWAY_TEST_BROKER=1 (make
// test-all) also a broker, through each client built in.
func Kafkas() []string {
	if os.Getenv("CAUSEWAY_TEST_BROKER") == "1" {
		return append([]string{InProcess}, transport.Clients()...)
	}
	return []string{InProcess}
}

// ID is the cluster's id, as its admin clients report it: its name, unique
// in the process.
func (c *Cluster) ID() string { return c.name }

// Client is the name the cluster's transport is registered under: a
// worker's client setting.
func (c *Cluster) Client() string { return c.name }

// Bootstrap is an address for a worker's bootstrap setting: it accepts
// connections, and closes them. The clients talk to the cluster in the
// process.
func (c *Cluster) Bootstrap() string { return c.listener.Addr().String() }

// CreateTopic makes a topic of partitions partitions; configs may set
// max.message.bytes. A topic that exists is left as it is.
func (c *Cluster) CreateTopic(name string, partitions int32, configs map[string]string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.createLocked(transport.TopicSpec{Name: name, Partitions: partitions, Configs: configs})
}

func (c *Cluster) createLocked(spec transport.TopicSpec) error {
	if _, ok := c.topics[spec.Name]; ok {
		return nil
	}
	if spec.Partitions < 1 {
		return fmt.Errorf("transporttest: topic %q with %d partitions", spec.Name, spec.Partitions)
	}
	t := &topic{partitions: make([][]entry, spec.Partitions), maxBytes: 1 << 20}
	if v, ok := spec.Configs["max.message.bytes"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("transporttest: topic %q: max.message.bytes %q: %w", spec.Name, v, err)
		}
		t.maxBytes = n
	}
	c.topics[spec.Name] = t
	c.broadcastLocked()
	return nil
}

// Produce appends m to its partition outside any transaction, as an
// idempotent producer's send does, and returns its offset.
func (c *Cluster) Produce(m transport.Message) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	log, err := c.partitionLocked(m.Channel())
	if err != nil {
		return 0, err
	}
	m = copyMessage(m)
	m.Offset = int64(len(*log))
	*log = append(*log, entry{msg: m})
	c.broadcastLocked()
	return m.Offset, nil
}

// Records returns the committed records of a partition, with their
// offsets; markers are left out.
func (c *Cluster) Records(ch causal.Channel) []transport.Message {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []transport.Message
	if t, ok := c.topics[ch.Topic]; ok && int(ch.Partition) < len(t.partitions) {
		for _, e := range t.partitions[ch.Partition] {
			if !e.marker && e.state == committed {
				out = append(out, copyMessage(e.msg))
			}
		}
	}
	return out
}

// End returns a partition's end: the offset its next record will have,
// past the markers of the transactions written to it.
func (c *Cluster) End(ch causal.Channel) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.topics[ch.Topic]; ok && int(ch.Partition) < len(t.partitions) {
		return int64(len(t.partitions[ch.Partition]))
	}
	return 0
}

// Partitions returns every topic's partition count.
func (c *Cluster) Partitions() map[string]int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.countsLocked()
}

// Members returns how many members group has.
func (c *Cluster) Members(group string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if g := c.groups[group]; g != nil {
		return len(g.members)
	}
	return 0
}

// FailCommits makes the next n commits of any producer fail with a
// retriable error, as a commit does while a broker moves.
func (c *Cluster) FailCommits(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failCommits = n
}

// GroupOffsets returns the committed offsets of group.
func (c *Cluster) GroupOffsets(group string) map[causal.Channel]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[causal.Channel]int64{}
	for ch, o := range c.offsets[group] {
		out[ch] = o
	}
	return out
}

// partitionLocked is ch's log, or the error a client gets for a
// partition that does not exist.
func (c *Cluster) partitionLocked(ch causal.Channel) (*[]entry, error) {
	t, ok := c.topics[ch.Topic]
	if !ok || ch.Partition < 0 || int(ch.Partition) >= len(t.partitions) {
		return nil, &transport.ClientError{Class: transport.ClassRecord, Kind: transport.KindUnknownPartition,
			Err: fmt.Errorf("unknown topic or partition %s", transport.PartitionString(ch.Topic, ch.Partition))}
	}
	return &t.partitions[ch.Partition], nil
}

// endLocked is the offset the next entry of ch gets; 0 for a partition
// that does not exist.
func (c *Cluster) endLocked(ch causal.Channel) int64 {
	if log, err := c.partitionLocked(ch); err == nil {
		return int64(len(*log))
	}
	return 0
}

// broadcastLocked wakes whoever waits for a change.
func (c *Cluster) broadcastLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// wait returns after the next change, or after d.
func (c *Cluster) wait(d time.Duration) {
	c.mu.Lock()
	ch := c.changed
	c.mu.Unlock()
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
	}
}

// countsLocked are every topic's partition counts.
func (c *Cluster) countsLocked() map[string]int32 {
	out := make(map[string]int32, len(c.topics))
	for name, t := range c.topics {
		out[name] = int32(len(t.partitions))
	}
	return out
}

// sortedChannels returns the keys of m in order.
func sortedChannels[V any](m map[causal.Channel]V) []causal.Channel {
	out := make([]causal.Channel, 0, len(m))
	for ch := range m {
		out = append(out, ch)
	}
	slices.SortFunc(out, compareChannels)
	return out
}

// copyMessage is a deep copy of m: the caller may reuse its bytes.
func copyMessage(m transport.Message) transport.Message {
	m.Key = slices.Clone(m.Key)
	m.Value = slices.Clone(m.Value)
	hs := slices.Clone(m.Headers)
	for i := range hs {
		hs[i].Value = slices.Clone(hs[i].Value)
	}
	m.Headers = hs
	return m
}

// supplier makes clients on its cluster.
type supplier struct{ c *Cluster }

func (s supplier) Producer(set transport.Settings) (transport.Producer, transport.Admin, error) {
	return &producer{c: s.c, id: set.ApplicationID + "-" + set.InstanceID}, admin{c: s.c, group: set.ApplicationID}, nil
}

func (s supplier) Consumer(set transport.Settings) (transport.Consumer, error) {
	return &consumer{c: s.c, group: set.ApplicationID, positions: map[causal.Channel]int64{}, paused: map[causal.Channel]bool{}}, nil
}

func (s supplier) PollBatch() int { return 500 }

// compareChannels orders channels by topic, then partition.
func compareChannels(a, b causal.Channel) int {
	if a.Topic != b.Topic {
		if a.Topic < b.Topic {
			return -1
		}
		return 1
	}
	return int(a.Partition) - int(b.Partition)
}
