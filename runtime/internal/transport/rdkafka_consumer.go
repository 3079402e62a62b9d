//go:build cgo

package transport

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/causeway-stream/causeway/causal"
)

// rdkConsumer is the group consumer on librdkafka. Its rebalance callback
// runs inside Poll, on the pump's goroutine.
//
// Rebalancing cooperatively, it joins the group for one topic of each
// co-partitioned group, its lead (the first by name), with librdkafka's
// cooperative-sticky assignor, which cannot be told that topics go
// together; it then reads partition p of every other topic of the group
// (the followers) beside the lead's partition p, adding and removing them
// with it. The group's offsets are committed for all of them alike.
//
//causeway:owned
type rdkConsumer struct {
	c *kafka.Consumer
	// admin shares c's handle; it asks for watermarks read-uncommitted.
	admin       *kafka.AdminClient
	handler     RebalanceHandler
	headers     headerSlab
	cooperative bool
	// followers are, by lead topic, the other topics of its
	// co-partitioned group that the worker reads.
	followers map[string][]string
	// closing is set once Close began.
	closing bool
}

func (r *rdkConsumer) Subscribe(topics []string, h RebalanceHandler) error {
	r.handler = h
	if r.cooperative {
		topics = r.leads(topics)
	}
	return rdkError(r.c.SubscribeTopics(topics, r.rebalance))
}

// leads keeps the lead topics of topics: those no group has as a
// follower. It keeps only the followers among topics.
func (r *rdkConsumer) leads(topics []string) []string {
	follows := map[string]bool{}
	for lead, fs := range r.followers {
		fs = slices.DeleteFunc(slices.Clone(fs), func(f string) bool { return !slices.Contains(topics, f) })
		r.followers[lead] = fs
		for _, f := range fs {
			follows[f] = true
		}
	}
	return slices.DeleteFunc(slices.Clone(topics), func(t string) bool { return follows[t] })
}

// withFollowers adds to the lead partitions the group assigned or revoked
// their followers' partitions of the same index.
func (r *rdkConsumer) withFollowers(tps []kafka.TopicPartition) []causal.Channel {
	chs := rdkChannels(tps)
	for _, tp := range tps {
		for _, f := range r.followers[*tp.Topic] {
			chs = append(chs, causal.Channel{Topic: f, Partition: tp.Partition})
		}
	}
	return chs
}

func (r *rdkConsumer) rebalance(c *kafka.Consumer, ev kafka.Event) error {
	switch e := ev.(type) {
	case kafka.AssignedPartitions:
		chs := r.withFollowers(e.Partitions)
		if r.closing {
			// Close polls the group's last rounds: the worker has
			// stopped, so the partitions are taken as they come, for
			// librdkafka to give them up again.
			return r.assign(chs, nil)
		}
		return r.handler.Assigned(chs)
	case kafka.RevokedPartitions:
		chs := r.withFollowers(e.Partitions)
		if !r.closing {
			r.handler.Revoked(chs, c.AssignmentLost())
		}
		if r.cooperative {
			return rdkError(c.IncrementalUnassign(rdkPartitions(chs)))
		}
		return rdkError(c.Unassign())
	}
	return nil
}

// Poll takes librdkafka's events one at a time: it hands out one per call.
func (r *rdkConsumer) Poll(timeout time.Duration, max int, batch *[]Event) int {
	n := 0
	ev := r.c.Poll(int(timeout / time.Millisecond))
	for ev != nil {
		if r.take(ev, batch) {
			if n++; n == max {
				break
			}
		}
		ev = r.c.Poll(0)
	}
	return n
}

// take appends ev to batch, if it is one the worker handles.
func (r *rdkConsumer) take(ev kafka.Event, batch *[]Event) bool {
	switch e := ev.(type) {
	case *kafka.Message:
		tp := e.TopicPartition
		m := Message{Topic: *tp.Topic, Partition: tp.Partition, Offset: int64(tp.Offset)}
		if tp.Error != nil {
			*batch = append(*batch, Event{Kind: EventPartitionError, Msg: m, Err: rdkError(tp.Error)})
			return true
		}
		m.Key, m.Value, m.Timestamp = e.Key, e.Value, e.Timestamp
		if len(e.Headers) > 0 {
			m.Headers = r.headers.carve(len(e.Headers))
			for i, h := range e.Headers {
				m.Headers[i].Key, m.Headers[i].Value = h.Key, h.Value
			}
		}
		*batch = append(*batch, Event{Kind: EventRecord, Msg: m})
	case kafka.PartitionEOF:
		if e.Topic == nil || e.Offset < 0 {
			return false
		}
		*batch = append(*batch, Event{Kind: EventPosition, Msg: Message{Topic: *e.Topic, Partition: e.Partition, Offset: int64(e.Offset)}})
	case kafka.Error:
		kind := EventError
		if e.IsFatal() {
			kind = EventFatal
		}
		*batch = append(*batch, Event{Kind: kind, Err: rdkError(e)})
	default:
		return false
	}
	return true
}

func (r *rdkConsumer) Assign(starts map[causal.Channel]int64) error {
	chs := make([]causal.Channel, 0, len(starts))
	for ch := range starts {
		chs = append(chs, ch)
	}
	return r.assign(chs, starts)
}

// assign adds chs to the assignment (replaces it, rebalancing eagerly or
// outside a group), each read from its offset in starts, or from the
// committed offset when starts has none.
func (r *rdkConsumer) assign(chs []causal.Channel, starts map[causal.Channel]int64) error {
	tps := rdkPartitions(chs)
	for i := range tps {
		tps[i].Offset = kafka.OffsetStored
		if off, ok := starts[chs[i]]; ok {
			tps[i].Offset = kafka.Offset(off)
		}
	}
	if r.cooperative && r.handler != nil {
		return rdkError(r.c.IncrementalAssign(tps))
	}
	return rdkError(r.c.Assign(tps))
}

func (r *rdkConsumer) Seek(ch causal.Channel, offset int64) error {
	topic := ch.Topic
	return rdkError(r.c.Seek(kafka.TopicPartition{Topic: &topic, Partition: ch.Partition, Offset: kafka.Offset(offset)}, 0))
}

func (r *rdkConsumer) Pause(chs []causal.Channel) error {
	return rdkError(r.c.Pause(rdkPartitions(chs)))
}
func (r *rdkConsumer) Resume(chs []causal.Channel) error {
	return rdkError(r.c.Resume(rdkPartitions(chs)))
}

func (r *rdkConsumer) Position(chs []causal.Channel) (map[causal.Channel]int64, error) {
	pos, err := r.c.Position(rdkPartitions(chs))
	if err != nil {
		return nil, rdkError(err)
	}
	return rdkOffsets(pos), nil
}

// rdkOffsets is the offsets of tps, leaving out those librdkafka says it
// has none of.
func rdkOffsets(tps []kafka.TopicPartition) map[causal.Channel]int64 {
	out := make(map[causal.Channel]int64, len(tps))
	for _, tp := range tps {
		if tp.Offset >= 0 {
			out[causal.Channel{Topic: *tp.Topic, Partition: tp.Partition}] = int64(tp.Offset)
		}
	}
	return out
}

func (r *rdkConsumer) CachedWatermarks(ch causal.Channel) (low, high int64, ok bool) {
	low, high, err := r.c.GetWatermarkOffsets(ch.Topic, ch.Partition)
	return low, high, err == nil
}

func (r *rdkConsumer) GroupMetadata() (GroupMetadata, error) {
	md, err := r.c.GetConsumerGroupMetadata()
	return md, rdkError(err)
}

func (r *rdkConsumer) Committed(chs []causal.Channel) (map[causal.Channel]int64, error) {
	committed, err := r.c.Committed(rdkPartitions(chs), rdkTimeoutMs)
	if err != nil {
		return nil, rdkError(err)
	}
	return rdkOffsets(committed), nil
}

// Watermarks asks the broker for ch's log start and high watermark. The
// high watermark is asked read-uncommitted: the consumer's own
// QueryWatermarkOffsets would answer at its isolation level, the last
// stable offset, and a claim on a record of a transaction still open
// would look like a claim beyond the end.
func (r *rdkConsumer) Watermarks(ch causal.Channel) (low, high int64, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), rdkTimeoutMs*time.Millisecond)
	defer cancel()
	chs := []causal.Channel{ch}
	lows, err := rdkListOffsets(ctx, r.admin, chs, kafka.EarliestOffsetSpec)
	if err != nil {
		return 0, 0, fmt.Errorf("start offset of %s: %w", ch, err)
	}
	highs, err := rdkListOffsets(ctx, r.admin, chs, kafka.LatestOffsetSpec)
	if err != nil {
		return 0, 0, fmt.Errorf("end offset of %s: %w", ch, err)
	}
	low, okLow := lows[ch]
	high, okHigh := highs[ch]
	if !okLow || !okHigh {
		return 0, 0, fmt.Errorf("watermarks of %s: %w", ch, rdkError(kafka.NewError(kafka.ErrUnknownPartition, "not in the answer", false)))
	}
	return low, high, nil
}

// Standbys: librdkafka's assignor places no copies of state.
func (r *rdkConsumer) Standbys() StandbyAssignment { return StandbyAssignment{} }

// Probe: without warm-ups there is nothing to probe for.
func (r *rdkConsumer) Probe() {}

// Close leaves the group. The rebalance rounds Close waits for do not
// reach the worker, which stopped before.
func (r *rdkConsumer) Close() error {
	r.closing = true
	r.admin.Close()
	return rdkError(r.c.Close())
}
