package runtime

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// The changelog is one compacted topic per application,
// "<application-id>-changelog", with one partition per task partition index:
// task (processor, p) writes to partition p. Records are keyed so that
// compaction keeps the last value of each:
//
//	checkpoint key: 'g', processor (uvarint length + bytes), partition (uvarint)
//	store key:      's', processor, partition, store name (uvarint length + bytes), store key bytes
//
// A checkpoint's value is: version byte 2, uvarint count, then per input
// channel its topic (uvarint length + bytes) and the next offset the task
// reads there (uvarint), then the task's stream time (varint Unix
// nanoseconds, 0 for none), then the gate checkpoint bytes (the rest).
// Version 1, written before stream time was kept, has no stream time and
// is still read. A store record's value is the store value; a nil value
// deletes the key.

const (
	kindCheckpoint    = 'g'
	kindStore         = 's'
	checkpointVersion = 2
	// checkpointV1 lacks the stream time.
	checkpointV1 = 1
)

var errBadChangelog = errors.New("malformed changelog record")

// changelogTopic names an application's changelog topic.
func changelogTopic(appID string) string { return appID + "-changelog" }

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

func taskPrefix(kind byte, processor string, partition int32) []byte {
	b := appendString([]byte{kind}, processor)
	return binary.AppendUvarint(b, uint64(partition))
}

func checkpointKey(processor string, partition int32) []byte {
	return taskPrefix(kindCheckpoint, processor, partition)
}

func storeKey(processor string, partition int32, store string, key []byte) []byte {
	b := appendString(taskPrefix(kindStore, processor, partition), store)
	return append(b, key...)
}

// changelogKey is a parsed changelog key.
type changelogKey struct {
	kind      byte
	processor string
	partition int32
	store     string
	key       []byte
}

func parseChangelogKey(b []byte) (changelogKey, error) {
	var k changelogKey
	if len(b) == 0 || (b[0] != kindCheckpoint && b[0] != kindStore) {
		return k, errBadChangelog
	}
	k.kind = b[0]
	var err error
	if k.processor, b, err = readString(b[1:]); err != nil {
		return k, err
	}
	p, l := binary.Uvarint(b)
	if l <= 0 || p > 1<<31-1 {
		return k, errBadChangelog
	}
	k.partition, b = int32(p), b[l:]
	if k.kind == kindStore {
		if k.store, b, err = readString(b); err != nil {
			return k, err
		}
		k.key = b
	} else if len(b) != 0 {
		return k, errBadChangelog
	}
	return k, nil
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
func changelogMessage(topic *string, p int32, key, value []byte) *kafka.Message {
	return &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: topic, Partition: p}, Key: key, Value: value}
}
