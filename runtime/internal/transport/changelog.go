package transport

import "github.com/causeway-stream/causeway/causal"

// Watermarks gives a changelog source the bounds of a partition, from the
// group's consumer.
type Watermarks struct{ Offsets OffsetSource }

func (w Watermarks) Bounds(ch causal.Channel) (low, high int64, err error) {
	return w.Offsets.Watermarks(ch)
}

// ChangelogSource reads committed records of changelog partitions: the
// Kafka one (kafkaChangelog) in the worker, an in-process fake in the unit
// tests.
type ChangelogSource interface {
	// Bounds returns the first offset of ch and the offset after its last.
	Bounds(ch causal.Channel) (low, high int64, err error)
	// Read reads every channel of from, from its offset to its end,
	// handing each committed record to apply in offset order per channel,
	// and calls done once per channel when it has read it to its end, with
	// an offset below which it read everything. It returns ErrStopped
	// early once stop is closed, and the first error of apply or done.
	Read(stop <-chan struct{}, from map[causal.Channel]int64, apply func(ch causal.Channel, key, value []byte) error,
		done func(ch causal.Channel, end int64) error) error
}
