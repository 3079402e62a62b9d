package causal

import (
	"errors"
	"fmt"
)

// Sentinel errors of the clock codec. A decode failure is a *DecodeError whose
// Unwrap returns one of these; every one of them also matches
// ErrMalformedClock under errors.Is.
var (
	// ErrMalformedClock matches every decode failure of a clock header.
	ErrMalformedClock = errors.New("malformed clock header")
	// ErrTruncated is returned when the header ends inside a field.
	ErrTruncated = errors.New("truncated")
	// ErrUnknownVersion is returned when the version byte is not one this
	// build can read. A newer encoding therefore fails closed.
	ErrUnknownVersion = errors.New("unknown encoding version")
	// ErrOverflow is returned when a varint does not fit its field (offset
	// above MaxInt64, partition above MaxInt32, a length beyond the input).
	ErrOverflow = errors.New("value overflows its field")
	// ErrNonMinimal is returned for a varint written with more bytes than its
	// value needs; it would give one clock two encodings.
	ErrNonMinimal = errors.New("varint not minimally encoded")
	// ErrUnsorted is returned when topics or partitions are not strictly
	// increasing, which also covers duplicate entries.
	ErrUnsorted = errors.New("entries not strictly sorted")
	// ErrEmptyGroup is returned for a topic with no entries: the encoding of
	// every clock is unique, and a topic group without entries is not part of
	// any.
	ErrEmptyGroup = errors.New("topic with no entries")
	// ErrTrailingBytes is returned when bytes follow the last entry.
	ErrTrailingBytes = errors.New("trailing bytes")
	// ErrEmptyTopic is returned for a zero-length topic name.
	ErrEmptyTopic = errors.New("empty topic name")
	// ErrTopicTooLong is returned for a topic name longer than Kafka allows
	// (MaxTopicLen bytes).
	ErrTopicTooLong = errors.New("topic name too long")
	// ErrNegativeOffset is returned by NewClock for an entry below zero.
	ErrNegativeOffset = errors.New("negative offset")
	// ErrNegativePartition is returned by NewClock for a partition below zero.
	ErrNegativePartition = errors.New("negative partition")
)

// Sentinel errors of the Node.
var (
	// ErrCorruptClock is matched by the *ClockError a node fails with when a
	// received record's clock header is present but cannot be decoded.
	ErrCorruptClock = errors.New("corrupt clock header")
	// ErrNodeFailed wraps the first failure of a node; every call that would
	// change the node's state returns it from then on.
	ErrNodeFailed = errors.New("node failed")
	// ErrNotInScope is returned when a record or position arrives for a
	// channel that was never seeded.
	ErrNotInScope = errors.New("channel not in scope")
	// ErrAlreadyInScope is returned when a channel is seeded twice.
	ErrAlreadyInScope = errors.New("channel already in scope")
	// ErrOutOfOrder is returned when a received offset is above the frontier
	// but not above the last record already held for the channel: Kafka
	// delivers a partition in order, so the caller rewound its consumer
	// without rebuilding the node.
	ErrOutOfOrder = errors.New("offset received out of order")
	// ErrUnknownOutput is returned when a stamp is asked for an output topic
	// the node was not configured with.
	ErrUnknownOutput = errors.New("unknown output")
	// ErrInvalidConfig is returned by NewNode for a configuration it cannot
	// run.
	ErrInvalidConfig = errors.New("invalid node configuration")
	// ErrClaimBeyondEnd is matched by the *ClaimError a node with
	// CheckClaims hands back for a claim it cannot show to exist.
	ErrClaimBeyondEnd = errors.New("claim beyond the known end of its channel")
	// ErrBadCheckpoint is returned by Restore for bytes that are not a
	// checkpoint this build wrote, or that do not fit the node's outputs.
	ErrBadCheckpoint = errors.New("bad checkpoint")
)

// DecodeError describes why a clock header could not be decoded.
type DecodeError struct {
	// Pos is the byte position in the header at which decoding stopped.
	Pos int
	// Reason is one of the codec sentinel errors (ErrTruncated, ...).
	Reason error
}

// Error implements error.
func (e *DecodeError) Error() string {
	return fmt.Sprintf("malformed clock header at byte %d: %v", e.Pos, e.Reason)
}

// Unwrap returns the reason, so errors.Is(err, ErrTruncated) works.
func (e *DecodeError) Unwrap() error { return e.Reason }

// Is makes every DecodeError match ErrMalformedClock.
func (e *DecodeError) Is(target error) bool { return target == ErrMalformedClock }

// ClockError is the failure of a node that received a record whose clock
// header it could not decode. It names the record so that an operator can
// find it.
type ClockError struct {
	Channel Channel
	Offset  int64
	Err     error
}

// Error implements error.
func (e *ClockError) Error() string {
	return fmt.Sprintf("corrupt clock header on %s at offset %d: %v", e.Channel, e.Offset, e.Err)
}

// Unwrap returns the decode error.
func (e *ClockError) Unwrap() error { return e.Err }

// Is makes every ClockError match ErrCorruptClock.
func (e *ClockError) Is(target error) bool { return target == ErrCorruptClock }

// ClaimError is what a node with CheckClaims hands back for a record one of
// whose claims names no known record: it names the record (Channel,
// Offset), the claim, and the claimed channel's end as last reported to
// SetEnd. The node is unchanged.
type ClaimError struct {
	Channel Channel
	Offset  int64
	// Claim is the record's first claim beyond its channel's known end.
	Claim Entry
	// Claims is every claim of the record beyond its channel's known end,
	// Claim first: reporting an end for each of them (SetEnd) settles the
	// record's check in one round.
	Claims []Entry
	// End is the claimed channel's end as known: the offset after its last
	// record; EndUnknown when SetEnd never reported it, EndMissing when it
	// reported that the channel does not exist.
	End int64
}

// Ends a ClaimError can report besides a real one.
const (
	EndUnknown int64 = -1
	EndMissing int64 = -2
)

// Error implements error.
func (e *ClaimError) Error() string {
	var why string
	switch e.End {
	case EndUnknown:
		why = "whose end is not known yet"
	case EndMissing:
		why = "which does not exist"
	default:
		why = fmt.Sprintf("which ends at offset %d", e.End-1)
	}
	return fmt.Sprintf("%s at offset %d claims %s up to offset %d, %s", e.Channel, e.Offset, e.Claim.Channel, e.Claim.Offset, why)
}

// Is makes every ClaimError match ErrClaimBeyondEnd.
func (e *ClaimError) Is(target error) bool { return target == ErrClaimBeyondEnd }
