package runtime

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/causeway-stream/causeway/causal"
)

// A task's committed state lives in compacted internal topics, one
// partition per task partition index, each written by one task only:
//
//   - "<application-id>-<store>-changelog" holds a store's changes: the
//     store key as the record key, the value as the value (a nil value
//     deletes the key). Task (processor, p) writes partition p of the
//     changelogs of its stores, so restoring a store reads its own changes
//     and nothing else.
//   - "<application-id>-<processor>-checkpoint" holds each task's
//     checkpoint, one record per commit, key "checkpoint": what the task
//     resumes from. Only the last committed one counts, so a restore reads
//     the tail of the partition.
//
// A checkpoint's value is: version byte 2, uvarint count, then per input
// channel its topic (uvarint length + bytes) and the next offset the task
// reads there (uvarint), then the task's stream time (varint Unix
// nanoseconds, 0 for none), then the gate checkpoint bytes (the rest).
// Version 1, written before stream time was kept, has no stream time and
// is still read.
//
// Before this layout, one topic, "<application-id>-changelog", held every
// store and checkpoint of an application; a worker finding it refuses to
// start (see topicManager).

const (
	checkpointVersion = 2
	// checkpointV1 lacks the stream time.
	checkpointV1 = 1
)

var errBadChangelog = errors.New("malformed changelog record")

// storeChangelogTopic names the changelog topic of a store.
func storeChangelogTopic(appID, store string) string { return appID + "-" + store + "-changelog" }

// checkpointTopic names the checkpoint topic of a processor's tasks.
func checkpointTopic(appID, processor string) string { return appID + "-" + processor + "-checkpoint" }

// legacyChangelogTopic names the single changelog topic of the earlier
// layout.
func legacyChangelogTopic(appID string) string { return appID + "-changelog" }

// checkpointRecordKey is the key of every checkpoint record.
var checkpointRecordKey = []byte("checkpoint")

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func readString(b []byte) (string, []byte, error) {
	n, l := binary.Uvarint(b)
	if l <= 0 || n > uint64(len(b)-l) {
		return "", nil, errBadChangelog
	}
	return string(b[l : l+int(n)]), b[l+int(n):], nil
}

// taskCheckpoint is what a task commits besides its stores.
type taskCheckpoint struct {
	next   map[string]int64 // input topic -> next offset
	stream time.Time        // the task's stream time; zero for none
	gate   []byte
}

func (c taskCheckpoint) encode() []byte {
	topics := make([]string, 0, len(c.next))
	for t := range c.next {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	b := binary.AppendUvarint([]byte{checkpointVersion}, uint64(len(topics)))
	for _, t := range topics {
		b = appendString(b, t)
		b = binary.AppendUvarint(b, uint64(c.next[t]))
	}
	var stream int64
	if !c.stream.IsZero() {
		stream = c.stream.UnixNano()
	}
	b = binary.AppendVarint(b, stream)
	return append(b, c.gate...)
}

func decodeTaskCheckpoint(b []byte) (taskCheckpoint, error) {
	c := taskCheckpoint{next: map[string]int64{}}
	if len(b) == 0 || (b[0] != checkpointVersion && b[0] != checkpointV1) {
		return c, fmt.Errorf("%w: checkpoint version", errBadChangelog)
	}
	version := b[0]
	n, l := binary.Uvarint(b[1:])
	if l <= 0 || n > uint64(len(b)) {
		return c, errBadChangelog
	}
	b = b[1+l:]
	for range n {
		var t string
		var err error
		if t, b, err = readString(b); err != nil {
			return c, err
		}
		off, l := binary.Uvarint(b)
		if l <= 0 || off > 1<<63-1 {
			return c, errBadChangelog
		}
		c.next[t], b = int64(off), b[l:]
	}
	if version >= checkpointVersion {
		ns, l := binary.Varint(b)
		if l <= 0 {
			return c, fmt.Errorf("%w: stream time", errBadChangelog)
		}
		if ns != 0 {
			c.stream = time.Unix(0, ns)
		}
		b = b[l:]
	}
	c.gate = b
	return c, nil
}

// changelogMessage is a changelog record for partition p.
func changelogMessage(topic string, p int32, key, value []byte) message {
	return message{Topic: topic, Partition: p, Key: key, Value: value}
}

// watermarks gives a changelog source the bounds of a partition, from the
// group's consumer.
type watermarks struct{ offsets offsetSource }

func (w watermarks) bounds(ch causal.Channel) (low, high int64, err error) {
	return w.offsets.Watermarks(ch)
}
