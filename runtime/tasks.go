package runtime

import (
	"errors"
	"fmt"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/task"
)

// TaskState is where a task is in its life.
type TaskState string

// Task states, as /status reports them.
const (
	StateRestoring TaskState = "RESTORING"
	StateRunning   TaskState = "RUNNING"
	StateFailed    TaskState = "FAILED"
)

// runningTask is one task of the worker and what the worker knows of it
// besides the task itself.
type runningTask struct {
	id        string
	processor string
	partition int32
	inputs    []string
	t         *task.Task // nil for a failed task whose state was let go
	state     TaskState
	err       error
	// streamed counts outputs produced into the open transaction.
	streamed int
	// inTxn is set when the open transaction holds effects of the task:
	// outputs it streamed, or a snapshot taken for the commit under way. An
	// abort rebuilds exactly these tasks.
	inTxn bool
	// touched is set while the task is on the pump's touched list.
	touched bool
	// committed is the next offset per input topic as last committed (or
	// seeded), which is what the task resumes from.
	committed map[string]int64
	blocked   map[causal.Channel]blockedSince
	// skip lists the records an operator moved the task past; every build
	// of the task dead-letters them instead of processing them.
	skip []task.Skip
}

type blockedSince struct {
	head    int64 // offset of the waiting record
	on      causal.Channel
	off     int64
	since   time.Time
	checked time.Time // when the claim was last checked against the broker
}

// restoreFunc reads the changelog of the given tasks (see changelogReader).
type restoreFunc func(rts []*runningTask) (map[string]*restoredTask, error)

// taskManager owns the worker's tasks: which exist, building them from
// committed state, failing them one by one, the channel index the pump
// dispatches by, and the offsets a commit may send. It does no polling and
// no producing; what it asks of the cluster goes through offsetSource and
// restore.
type taskManager struct {
	topo    *framework.Topology
	cfg     Config
	log     *zap.Logger
	metrics *Metrics
	// counts is the partition count of every topic the topology uses.
	counts  map[string]int32
	offsets offsetSource
	restore restoreFunc
	// clock is the tasks' clock (the pump's time of its last poll).
	clock func() time.Time
	// deadLetter is where the tasks' dead letters go.
	deadLetter string

	tasks     []*runningTask
	routes    map[causal.Channel]*route
	recordsIn map[string]prometheus.Counter
}

func newTaskManager(topo *framework.Topology, cfg Config, log *zap.Logger, metrics *Metrics, counts map[string]int32,
	offsets offsetSource, restore restoreFunc, clock func() time.Time) *taskManager {
	return &taskManager{topo: topo, cfg: cfg, log: log, metrics: metrics, counts: counts, offsets: offsets, restore: restore,
		clock: clock, routes: map[causal.Channel]*route{}, recordsIn: map[string]prometheus.Counter{}}
}

// create adds a task, RESTORING, for every (processor, partition index)
// whose inputs parts holds completely, and returns them.
func (m *taskManager) create(parts []kafka.TopicPartition) []*runningTask {
	have := map[causal.Channel]bool{}
	for _, tp := range parts {
		have[causal.Channel{Topic: *tp.Topic, Partition: tp.Partition}] = true
	}
	var created []*runningTask
	for _, pi := range m.topo.Processors() {
		for p := range m.counts[pi.Inputs[0]] {
			complete := true
			for _, in := range pi.Inputs {
				complete = complete && have[causal.Channel{Topic: in, Partition: p}]
			}
			if !complete {
				continue
			}
			rt := &runningTask{id: task.ID(pi.Name, p), processor: pi.Name, partition: p, inputs: pi.Inputs,
				state: StateRestoring, committed: map[string]int64{}, blocked: map[causal.Channel]blockedSince{}}
			created = append(created, rt)
			m.tasks = append(m.tasks, rt)
		}
	}
	return created
}

// find returns the task named id.
func (m *taskManager) find(id string) (*runningTask, bool) {
	for _, rt := range m.tasks {
		if rt.id == id {
			return rt, true
		}
	}
	return nil, false
}

// build restores the given tasks from the changelog and committed offsets,
// seeds and starts them, and indexes them by channel. Each task it builds
// replaces its previous instance; no other task is touched. A task that
// cannot be built fails on its own; the error returned is one that stops
// the worker (the changelog or the offsets could not be read).
func (m *taskManager) build(rts []*runningTask) error {
	for _, rt := range rts {
		m.closeTask(rt)
		rt.state, rt.err = StateRestoring, nil
	}
	restored, err := m.restore(rts)
	if err != nil {
		return err
	}
	var tps []kafka.TopicPartition
	for _, rt := range rts {
		for _, in := range rt.inputs {
			topic := in
			tps = append(tps, kafka.TopicPartition{Topic: &topic, Partition: rt.partition})
		}
	}
	committed, err := m.offsets.Committed(tps, 10000)
	if err != nil {
		return fmt.Errorf("read committed offsets: %w", err)
	}
	group := map[causal.Channel]int64{}
	for _, tp := range committed {
		if tp.Offset >= 0 {
			group[causal.Channel{Topic: *tp.Topic, Partition: tp.Partition}] = int64(tp.Offset)
		}
	}
	for _, rt := range rts {
		if err := m.buildOne(rt, restored[rt.id], group); err != nil {
			m.closeTask(rt)
			m.fail(rt, err)
		}
	}
	m.index()
	return nil
}

func (m *taskManager) buildOne(rt *runningTask, r *restoredTask, group map[causal.Channel]int64) error {
	m.closeTask(rt)
	rt.state, rt.err = StateRestoring, nil
	rt.streamed, rt.inTxn = 0, false
	rt.blocked = map[causal.Channel]blockedSince{}
	if err := m.seedOffsets(rt, r, group); err != nil {
		return err
	}
	c := task.Committed{Next: rt.committed}
	if r != nil {
		c.Stores = r.stores
		if r.checkpoint != nil {
			c.Checkpoint, c.StreamTime = r.checkpoint.gate, r.checkpoint.stream
		}
	}
	t, err := task.Rebuild(task.Config{
		Topology: m.topo, Processor: rt.processor, Partition: rt.partition,
		OutputPartitions: m.partitionCount, GateOff: m.cfg.GateOff, Now: m.clock,
		DeadLetterTopic: m.deadLetter, Skip: rt.skip, CheckClaims: m.cfg.CheckClaims,
		Observer: taskObserver{m: m, deliveries: m.metrics.Deliveries.WithLabelValues(rt.id)},
	}, c)
	if err != nil {
		return err
	}
	rt.t, rt.state = t, StateRunning
	return nil
}

// seedOffsets sets, for each input of rt, the offset it resumes from.
func (m *taskManager) seedOffsets(rt *runningTask, r *restoredTask, group map[causal.Channel]int64) error {
	for _, in := range rt.inputs {
		next, err := m.startOffset(causal.Channel{Topic: in, Partition: rt.partition}, r, group)
		if err != nil {
			return err
		}
		rt.committed[in] = next
	}
	return nil
}

// startOffset is where a task resumes a channel: its own checkpointed
// position, else the group's committed offset, else where the reset policy
// starts. A committed position outside the log fails the task unless resets
// are allowed.
func (m *taskManager) startOffset(ch causal.Channel, r *restoredTask, group map[causal.Channel]int64) (int64, error) {
	low, high, err := m.offsets.QueryWatermarkOffsets(ch.Topic, ch.Partition, 10000)
	if err != nil {
		return 0, fmt.Errorf("watermarks of %s: %w", ch, err)
	}
	next, known := int64(-1), false
	if r != nil && r.checkpoint != nil {
		next, known = r.checkpoint.next[ch.Topic]
	}
	if !known {
		next, known = group[ch]
	}
	if !known {
		if m.cfg.AutoOffsetReset == "latest" {
			return high, nil
		}
		return low, nil
	}
	if next < low || next > high {
		if !m.cfg.AllowOffsetReset {
			return 0, fmt.Errorf("committed offset %d of %s is outside the log [%d, %d]: records were lost before they were processed "+
				"(retention or truncation); restart with --allow-offset-reset to skip them", next, ch, low, high)
		}
		m.log.Warn("committed offset out of range; resetting as allowed", zap.Stringer("channel", ch), zap.Int64("offset", next))
		if next < low {
			return low, nil
		}
		return high, nil
	}
	return next, nil
}

// starts is, per input channel of the given tasks, the lowest offset any
// of them resumes from: where the consumer must fetch from.
func (m *taskManager) starts(rts []*runningTask) map[causal.Channel]int64 {
	start := map[causal.Channel]int64{}
	for _, rt := range rts {
		for in, next := range rt.committed {
			ch := causal.Channel{Topic: in, Partition: rt.partition}
			if cur, ok := start[ch]; !ok || next < cur {
				start[ch] = next
			}
		}
	}
	return start
}

// failedRecord returns the input record a task failure names, if any.
func failedRecord(err error) (causal.Entry, bool) {
	var re *task.RecordError
	if errors.As(err, &re) && re.Record.Channel.Topic != "" {
		return re.Record, true
	}
	var ce *causal.ClockError
	if errors.As(err, &ce) {
		return causal.Entry{Channel: ce.Channel, Offset: ce.Offset}, true
	}
	var de *framework.DeserializeError
	if errors.As(err, &de) {
		return causal.Entry{Channel: causal.Channel{Topic: de.Topic, Partition: de.Partition}, Offset: de.Offset}, true
	}
	var ue *UnsatisfiableClaimError
	if errors.As(err, &ue) {
		return ue.Record, true
	}
	return causal.Entry{}, false
}

// fail marks rt failed with err (the first failure sticks) and logs it
// with the record it names. It reports whether the open transaction must
// abort: the task failed part-way through a record after streaming
// outputs into it.
func (m *taskManager) fail(rt *runningTask, err error) (mustAbort bool) {
	if rt.state == StateFailed {
		return false
	}
	rt.state, rt.err = StateFailed, err
	fields := []zap.Field{zap.String("task", rt.id), zap.Error(err)}
	if rec, ok := failedRecord(err); ok {
		fields = append(fields, zap.Stringer("channel", rec.Channel), zap.Int64("offset", rec.Offset))
	}
	m.log.Error("task failed; its offsets stay at the last commit (POST /tasks/"+rt.id+"/restart to retry, /skip to move past the record)", fields...)
	return rt.t != nil && rt.t.Broken() && rt.streamed > 0
}

// closeTask closes rt's task, if it has one, and lets it go.
func (m *taskManager) closeTask(rt *runningTask) {
	if rt.t == nil {
		return
	}
	if err := rt.t.Close(); err != nil {
		m.log.Warn("close task", zap.String("task", rt.id), zap.Error(err))
	}
	rt.t = nil
}

// closeAll closes every task and forgets them.
func (m *taskManager) closeAll() {
	for _, rt := range m.tasks {
		m.closeTask(rt)
		m.metrics.TaskState.DeletePartialMatch(map[string]string{"task": rt.id})
		m.metrics.Held.DeletePartialMatch(map[string]string{"task": rt.id})
	}
	m.tasks = nil
	m.routes = map[causal.Channel]*route{}
}

func (m *taskManager) partitionCount(topic string) (int32, error) {
	n, ok := m.counts[topic]
	if !ok {
		return 0, fmt.Errorf("unknown topic %q", topic)
	}
	return n, nil
}

// groupOffsets is, per assigned channel, the smallest next offset of any
// task reading it: a channel shared by several processors resumes where the
// furthest-behind one must, and the others drop the replay. fresh holds the
// offsets of the tasks committing now; the others count with what they last
// committed.
func (m *taskManager) groupOffsets(fresh map[*runningTask][]causal.Entry) []kafka.TopicPartition {
	low := map[causal.Channel]int64{}
	lower := func(ch causal.Channel, next int64) {
		if cur, ok := low[ch]; !ok || next < cur {
			low[ch] = next
		}
	}
	for _, rt := range m.tasks {
		if es, ok := fresh[rt]; ok {
			for _, e := range es {
				lower(e.Channel, e.Offset)
			}
			continue
		}
		for in, next := range rt.committed {
			lower(causal.Channel{Topic: in, Partition: rt.partition}, next)
		}
	}
	out := make([]kafka.TopicPartition, 0, len(low))
	for ch, off := range low {
		topic := ch.Topic
		out = append(out, kafka.TopicPartition{Topic: &topic, Partition: ch.Partition, Offset: kafka.Offset(off)})
	}
	return out
}

// taskObserver turns one task's events into logs and metrics.
type taskObserver struct {
	m          *taskManager
	deliveries prometheus.Counter // of this task
}

func (o taskObserver) Dropped(id string, ev framework.DropEvent) {
	o.m.metrics.Dropped.WithLabelValues(id, ev.Reason).Inc()
	o.m.log.Warn("record dropped", zap.String("task", id), zap.String("reason", ev.Reason),
		zap.String("channel", partitionString(ev.Record.Topic, ev.Record.Partition)), zap.Int64("offset", ev.Record.Offset),
		zap.String("detail", ev.Detail))
}

// Delivered counts every delivery and times those that waited: a record
// delivered in the poll that brought it has waited 0 by the pump's clock,
// and observing it would cost more than the rest of its bookkeeping.
func (o taskObserver) Delivered(id string, waited time.Duration) {
	o.deliveries.Inc()
	if waited > 0 {
		o.m.metrics.GateWait.Observe(waited.Seconds())
	}
}
