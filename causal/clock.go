package causal

import (
	"cmp"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"strings"
)

// Channel is one Kafka topic-partition: the unit in which Kafka guarantees
// order, and the unit a dependency clock names.
type Channel struct {
	Topic     string
	Partition int32
}

// String renders the channel as "topic/partition".
func (c Channel) String() string {
	return c.Topic + "/" + strconv.FormatInt(int64(c.Partition), 10)
}

// compareChannels orders channels by topic name, then partition. It is the
// order of entries in a Clock and in the encoded header.
func compareChannels(a, b Channel) int {
	if c := strings.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	return cmp.Compare(a.Partition, b.Partition)
}

// Entry is one component of a Clock: the claim that the record carrying the
// clock depends on every business record of Channel at or below Offset.
type Entry struct {
	Channel Channel
	Offset  int64
}

// Clock is a sparse map from channel to offset. The zero value is the empty
// clock, which claims nothing. A Clock is immutable once built: every method
// returns a new value and never changes the receiver, so clocks may be shared
// freely.
//
// Entries are kept sorted by (topic, partition) with one entry per channel;
// all entries of a topic are adjacent. Offsets are never negative.
type Clock struct {
	entries []Entry
}

// NewClock builds a clock from entries in any order. Two entries for one
// channel are joined (the larger offset wins). Entries with a negative offset
// or a negative partition are rejected.
func NewClock(entries ...Entry) (Clock, error) {
	es := slices.Clone(entries)
	for _, e := range es {
		if e.Offset < 0 {
			return Clock{}, fmt.Errorf("causal: clock entry %s: %w", e.Channel, ErrNegativeOffset)
		}
		if e.Channel.Partition < 0 {
			return Clock{}, fmt.Errorf("causal: clock entry %s: %w", e.Channel, ErrNegativePartition)
		}
		if e.Channel.Topic == "" {
			return Clock{}, fmt.Errorf("causal: clock entry %s: %w", e.Channel, ErrEmptyTopic)
		}
	}
	slices.SortFunc(es, func(a, b Entry) int { return compareChannels(a.Channel, b.Channel) })
	out := es[:0]
	for _, e := range es {
		if n := len(out); n > 0 && out[n-1].Channel.Topic == e.Channel.Topic {
			// One string per topic: later comparisons inside the clock are
			// then pointer comparisons.
			e.Channel.Topic = out[n-1].Channel.Topic
			if out[n-1].Channel.Partition == e.Channel.Partition {
				out[n-1].Offset = max(out[n-1].Offset, e.Offset)
				continue
			}
		}
		out = append(out, e)
	}
	return Clock{entries: out}, nil
}

// Len is the number of entries.
func (c Clock) Len() int { return len(c.entries) }

// IsEmpty reports whether the clock claims nothing.
func (c Clock) IsEmpty() bool { return len(c.entries) == 0 }

// Get returns the offset claimed for ch and whether there is such a claim.
func (c Clock) Get(ch Channel) (int64, bool) {
	i, found := slices.BinarySearchFunc(c.entries, ch, func(e Entry, t Channel) int {
		return compareChannels(e.Channel, t)
	})
	if !found {
		return 0, false
	}
	return c.entries[i].Offset, true
}

// All iterates the entries in (topic, partition) order.
func (c Clock) All() iter.Seq2[Channel, int64] {
	return func(yield func(Channel, int64) bool) {
		for _, e := range c.entries {
			if !yield(e.Channel, e.Offset) {
				return
			}
		}
	}
}

// Entries returns a copy of the entries in (topic, partition) order.
func (c Clock) Entries() []Entry { return slices.Clone(c.entries) }

// Join returns the pointwise maximum of c and o.
func (c Clock) Join(o Clock) Clock {
	if len(o.entries) == 0 {
		return c
	}
	if len(c.entries) == 0 {
		return o
	}
	out := make([]Entry, 0, len(c.entries)+len(o.entries))
	i, j := 0, 0
	for i < len(c.entries) && j < len(o.entries) {
		a, b := c.entries[i], o.entries[j]
		switch compareChannels(a.Channel, b.Channel) {
		case -1:
			out = append(out, a)
			i++
		case 1:
			out = append(out, b)
			j++
		default:
			a.Offset = max(a.Offset, b.Offset)
			out = append(out, a)
			i++
			j++
		}
	}
	out = append(out, c.entries[i:]...)
	out = append(out, o.entries[j:]...)
	return Clock{entries: out}
}

// DominatedBy reports whether f[ch] >= n for every entry (ch, n) of c. A
// channel absent from f counts as having nothing delivered, so any entry on
// it is not dominated.
func (c Clock) DominatedBy(f Clock) bool {
	j := 0
	for _, e := range c.entries {
		for j < len(f.entries) && compareChannels(f.entries[j].Channel, e.Channel) < 0 {
			j++
		}
		if j == len(f.entries) || f.entries[j].Channel != e.Channel || f.entries[j].Offset < e.Offset {
			return false
		}
	}
	return true
}

// Equal reports whether both clocks have the same entries.
func (c Clock) Equal(o Clock) bool { return slices.Equal(c.entries, o.entries) }

// Without returns c with the entries for which drop returns true removed.
func (c Clock) Without(drop func(Channel) bool) Clock {
	out := make([]Entry, 0, len(c.entries))
	for _, e := range c.entries {
		if !drop(e.Channel) {
			out = append(out, e)
		}
	}
	return Clock{entries: out}
}

// String renders the clock as "{topic/0:12 topic/3:7}".
func (c Clock) String() string {
	var b strings.Builder
	b.WriteByte('{')
	for i, e := range c.entries {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(e.Channel.String())
		b.WriteByte(':')
		b.WriteString(strconv.FormatInt(e.Offset, 10))
	}
	b.WriteByte('}')
	return b.String()
}
