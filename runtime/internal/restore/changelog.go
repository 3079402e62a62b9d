// Package restore brings a stream thread's tasks back to their committed
// state: the state manager and changelog reader of the runtime, in Kafka
// Streams' words. A Restorer reads each store's changelog partition from
// where the store's local copy stands (or from the start), applying the
// changes batch by batch on a goroutine per store, and the tail of each
// task's checkpoint partition for its last committed checkpoint. It hands
// each task back as a Result as soon as its own partitions are read, and
// reports progress as it goes. The topics it reads are named here too.
package restore

import (
	"encoding/binary"
	"errors"
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
// start (see the runtime's topic manager).

// ErrBadChangelog is returned for a changelog or checkpoint record, or a
// stores' positions record, that cannot be decoded.
var ErrBadChangelog = errors.New("malformed changelog record")

// StoreChangelogTopic names the changelog topic of a store.
func StoreChangelogTopic(appID, store string) string { return appID + "-" + store + "-changelog" }

// CheckpointTopic names the checkpoint topic of a processor's tasks.
func CheckpointTopic(appID, processor string) string { return appID + "-" + processor + "-checkpoint" }

// LegacyChangelogTopic names the single changelog topic of the earlier
// layout.
func LegacyChangelogTopic(appID string) string { return appID + "-changelog" }

// CheckpointRecordKey is the key of every checkpoint record.
var CheckpointRecordKey = []byte("checkpoint")

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func readString(b []byte) (string, []byte, error) {
	n, l := binary.Uvarint(b)
	if l <= 0 || n > uint64(len(b)-l) {
		return "", nil, ErrBadChangelog
	}
	return string(b[l : l+int(n)]), b[l+int(n):], nil
}
