package runtime

import (
	"encoding/binary"
	"errors"

	"github.com/causeway-stream/causeway/runtime/internal/transport"
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
// A checkpoint's value is a task.Checkpoint's encoding (its Encode), which
// the in-memory test driver keeps too.
//
// Before this layout, one topic, "<application-id>-changelog", held every
// store and checkpoint of an application; a worker finding it refuses to
// start (see topicManager).

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

// changelogMessage is a changelog record for partition p.
func changelogMessage(topic string, p int32, key, value []byte) transport.Message {
	return transport.Message{Topic: topic, Partition: p, Key: key, Value: value}
}
