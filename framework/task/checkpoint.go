package task

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"
)

// ErrBadCheckpoint is wrapped by DecodeCheckpoint's errors: the bytes are
// not a checkpoint this build can read.
var ErrBadCheckpoint = errors.New("malformed task checkpoint")

// Checkpoint is what a task commits besides its stores' changes: the next
// offset it reads on each input, its stream time, and its gate's state.
// The runtime writes it to the processor's checkpoint topic (Encode) and
// reads it back when it restores the task (DecodeCheckpoint); the test
// driver keeps it as it is. Both rebuild the task from it (Rebuild).
type Checkpoint struct {
	// Next is the next offset per input topic.
	Next map[string]int64
	// StreamTime is the task's stream time; zero for none.
	StreamTime time.Time
	// Gate is the gate's checkpoint (causal.Node.Checkpoint); nil when the
	// task never committed one.
	Gate []byte
}

// The versions of the encoding: the first byte of an encoded checkpoint.
const (
	checkpointVersion = 2
	// checkpointV1, written before stream time was kept, lacks it.
	checkpointV1 = 1
)

// Encode returns c's bytes: version byte 2, uvarint count, then per input
// topic its name (uvarint length + bytes) and the next offset (uvarint),
// in name order, then the stream time (varint Unix nanoseconds, 0 for
// none), then the gate's checkpoint (the rest). DecodeCheckpoint also reads
// version 1, which has no stream time.
func (c Checkpoint) Encode() []byte {
	topics := slices.Sorted(maps.Keys(c.Next))
	b := binary.AppendUvarint([]byte{checkpointVersion}, uint64(len(topics)))
	for _, t := range topics {
		b = binary.AppendUvarint(b, uint64(len(t)))
		b = append(b, t...)
		b = binary.AppendUvarint(b, uint64(c.Next[t]))
	}
	var stream int64
	if !c.StreamTime.IsZero() {
		stream = c.StreamTime.UnixNano()
	}
	b = binary.AppendVarint(b, stream)
	return append(b, c.Gate...)
}

// DecodeCheckpoint reads what Encode wrote. Its errors wrap
// ErrBadCheckpoint.
func DecodeCheckpoint(b []byte) (Checkpoint, error) {
	c := Checkpoint{Next: map[string]int64{}}
	if len(b) == 0 || (b[0] != checkpointVersion && b[0] != checkpointV1) {
		return c, fmt.Errorf("%w: version", ErrBadCheckpoint)
	}
	version := b[0]
	n, l := binary.Uvarint(b[1:])
	if l <= 0 || n > uint64(len(b)) {
		return c, fmt.Errorf("%w: input count", ErrBadCheckpoint)
	}
	b = b[1+l:]
	for range n {
		size, l := binary.Uvarint(b)
		if l <= 0 || size > uint64(len(b)-l) {
			return c, fmt.Errorf("%w: input topic", ErrBadCheckpoint)
		}
		t := string(b[l : l+int(size)])
		b = b[l+int(size):]
		off, l := binary.Uvarint(b)
		if l <= 0 || off > 1<<63-1 {
			return c, fmt.Errorf("%w: offset of %s", ErrBadCheckpoint, t)
		}
		c.Next[t], b = int64(off), b[l:]
	}
	if version >= checkpointVersion {
		ns, l := binary.Varint(b)
		if l <= 0 {
			return c, fmt.Errorf("%w: stream time", ErrBadCheckpoint)
		}
		if ns != 0 {
			c.StreamTime = time.Unix(0, ns)
		}
		b = b[l:]
	}
	c.Gate = b
	return c, nil
}
