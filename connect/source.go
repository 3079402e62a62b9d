package connect

import (
	"context"
	"time"

	"github.com/causeway-stream/causeway/framework"
)

// SourceRecord is a record a source task hands over to be written to
// Kafka.
type SourceRecord struct {
	Topic string
	// Key and Value are the record's bytes; the key picks its partition
	// (Kafka's default partitioner: murmur2, or partition 0 without a key).
	Key, Value []byte
	Timestamp  time.Time
	Headers    []framework.Header
	// Offset is where the source stands once this record is written: the
	// runtime commits it in the same Kafka transaction as the record, and
	// hands the last committed one back to Poll. nil: the same as the
	// record before.
	Offset []byte
}

// SourceTask reads records from another system. Its calls come from one
// goroutine: Poll any number of times, then Close.
//
// The runtime writes what Poll returns in order, and stamps every record
// with the clock of the task's session: each record claims every record
// the task wrote before it, on any topic. A sink with Causeway's gate
// therefore writes them in the order the task returned them, whatever
// topics and partitions they went to.
type SourceTask interface {
	// Poll returns the records that come after offset, the Offset of the
	// last record committed (nil before the first), in the order their
	// causes came. It may wait, until ctx is done, for records to come;
	// none and no error is a quiet poll.
	Poll(ctx context.Context, offset []byte) ([]SourceRecord, error)
	// Close ends the task.
	Close() error
}

// Source is a plugin that reads from another system.
type Source interface {
	// Config describes the plugin's own settings.
	Config() *ConfigDef
	// Open returns a task of the connector named connector, from the
	// plugin's settings (already validated against Config).
	Open(ctx context.Context, connector string, cfg Config) (SourceTask, error)
}
