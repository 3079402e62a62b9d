package transport

import (
	"context"
	"errors"
	"slices"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
	"github.com/twmb/franz-go/pkg/kgo"
)

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
// paused partitions, and returns how many. It takes handOutSlice events of
// each partition in turn, as librdkafka's queue mixes partitions: a
// fetch that brought many records of one partition does not hand them all
// out before the few of another, which a gate may be holding them for.
func (c *franzConsumer) handOut(max int, batch *[]Event) int {
	n := 0
	for more := true; more && n < max; {
		more = false
		for i := range c.ahead {
			if n == max {
				break
			}
			if a := &c.ahead[i]; !c.paused[a.ch] && (a.err != nil || len(a.recs) > 0) {
				n += c.take(a, min(handOutSlice, max-n), batch)
				more = more || a.err != nil || len(a.recs) > 0
			}
		}
	}
	c.ahead = slices.DeleteFunc(c.ahead, func(a franzAhead) bool { return a.err == nil && len(a.recs) == 0 })
	return n
}

// take turns up to max events of a into batch and returns how many.
func (c *franzConsumer) take(a *franzAhead, max int, batch *[]Event) int {
	topic, partition := a.ch.Topic, a.ch.Partition
	n := 0
	if a.err != nil {
		*batch = append(*batch, Event{Kind: EventPartitionError, Msg: Message{Topic: topic, Partition: partition}, Err: franzError(a.err)})
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
			*batch = append(*batch, Event{Kind: EventPosition, Msg: Message{Topic: topic, Partition: partition, Offset: r.Offset + 1}})
		} else {
			setRecordEvent(nextEvent(batch), topic, partition, r)
		}
	}
	return n + len(recs)
}

// nextEvent extends batch by one event and returns it. The event may hold
// one the pump handled before: set all of it.
func nextEvent(batch *[]Event) *Event {
	b := *batch
	if len(b) < cap(b) {
		b = b[:len(b)+1]
	} else {
		b = append(b, Event{})
	}
	*batch = b
	return &b[len(b)-1]
}

// setRecordEvent makes e the event of record r, fetched from topic and
// partition. Its fields are written one at a time, and those holding
// pointers only when they change (see franzProducer.Produce).
func setRecordEvent(e *Event, topic string, partition int32, r *kgo.Record) {
	e.Kind = EventRecord
	if e.Err != nil {
		e.Err = nil
	}
	m := &e.Msg
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
