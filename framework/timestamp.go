package framework

import (
	"errors"
	"fmt"
	"time"
)

// ErrInvalidTimestamp is matched by the error of a record whose extracted
// timestamp is invalid, under FailOnInvalidTimestamp.
var ErrInvalidTimestamp = errors.New("invalid timestamp")

// DropInvalidTimestamp is the reason of a DropEvent for a record that
// SkipOnInvalidTimestamp dropped.
const DropInvalidTimestamp = "invalid-timestamp"

// InvalidTimestamp says what becomes of a record whose timestamp, as an
// extractor gives it, is invalid: the zero time, a time before the Unix
// epoch (Kafka has no such timestamps), or the extractor's error. The
// choices are those of Kafka Streams' timestamp extractors.
type InvalidTimestamp int

const (
	// FailOnInvalidTimestamp fails the record with an error matching
	// ErrInvalidTimestamp and naming the record; the processor's
	// OnProcessingError policy then applies (by default the task fails
	// and the record is read again when it restarts). Kafka Streams'
	// FailOnInvalidTimestamp. The default.
	FailOnInvalidTimestamp InvalidTimestamp = iota
	// SkipOnInvalidTimestamp drops the record, reported (logged and
	// counted) as "invalid-timestamp". Kafka Streams'
	// LogAndSkipOnInvalidTimestamp.
	SkipOnInvalidTimestamp
	// UsePreviousOnInvalidTimestamp gives the record the largest valid
	// timestamp of its input so far in the task, or its own Kafka
	// timestamp when there is none yet. Kafka Streams'
	// UsePartitionTimeOnInvalidTimestamp.
	UsePreviousOnInvalidTimestamp
)

// String names the policy.
func (p InvalidTimestamp) String() string {
	switch p {
	case SkipOnInvalidTimestamp:
		return "skip"
	case UsePreviousOnInvalidTimestamp:
		return "use-previous"
	}
	return "fail"
}

// epoch is the earliest valid timestamp.
var epoch = time.Unix(0, 0)

// ResolveTimestamp applies policy to what an extractor gave for rec (ts,
// or err): it returns the timestamp the record takes, or skip true when
// the record is to be dropped, or an error matching ErrInvalidTimestamp.
// previous is the largest valid timestamp of the record's input so far
// (zero for none). The DSL's and the processor-level extractors both
// decide through it.
func ResolveTimestamp(rec Record, ts time.Time, err error, previous time.Time, policy InvalidTimestamp) (out time.Time, skip bool, _ error) {
	if err == nil && !ts.IsZero() && !ts.Before(epoch) {
		return ts, false, nil
	}
	switch policy {
	case SkipOnInvalidTimestamp:
		return time.Time{}, true, nil
	case UsePreviousOnInvalidTimestamp:
		if previous.IsZero() {
			return rec.Timestamp, false, nil
		}
		return previous, false, nil
	}
	why := fmt.Sprintf("extracted %s", ts.Format(time.RFC3339Nano))
	if err != nil {
		why = err.Error()
	}
	return time.Time{}, false, fmt.Errorf("%s/%d@%d: %w: %s", rec.Topic, rec.Partition, rec.Offset, ErrInvalidTimestamp, why)
}

// TimestampExtractor gives a record's timestamp from its contents (a time
// in its value, say), in place of the one Kafka carries.
type TimestampExtractor func(rec Record) (time.Time, error)

// timestampSource is how the records of one input get their timestamps.
type timestampSource struct {
	extract   TimestampExtractor
	onInvalid InvalidTimestamp
}

// ExtractTimestamp makes every record of input topic take the timestamp
// extract gives, before the processor (and the task's stream time, its
// punctuations and what it emits) sees it: Kafka Streams' timestamp
// extractor for one source. onInvalid says what becomes of a record whose
// extracted timestamp is invalid.
func ExtractTimestamp(topic string, extract TimestampExtractor, onInvalid InvalidTimestamp) ProcessorOpt {
	return procOptFunc(func(p *ProcessorInfo) {
		if p.timestamps == nil {
			p.timestamps = map[string]timestampSource{}
		}
		p.timestamps[topic] = timestampSource{extract, onInvalid}
	})
}

// Timestamp gives the timestamp rec takes as an input of the processor:
// its own, or what the input's extractor (see ExtractTimestamp) makes of
// it, resolved against previous as ResolveTimestamp does; skip true means
// the record is to be dropped.
func (p ProcessorInfo) Timestamp(rec Record, previous time.Time) (ts time.Time, skip bool, err error) {
	src, ok := p.timestamps[rec.Topic]
	if !ok {
		return rec.Timestamp, false, nil
	}
	ts, err = src.extract(rec)
	return ResolveTimestamp(rec, ts, err, previous, src.onInvalid)
}

// ExtractsTimestamps reports whether any input of the processor has a
// timestamp extractor.
func (p ProcessorInfo) ExtractsTimestamps() bool { return len(p.timestamps) > 0 }
