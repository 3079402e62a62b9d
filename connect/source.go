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
	// KeySchema and ValueSchema are the Connect schemas of Key and Value
	// (schemaless JSON) when the source knows them: a connector whose
	// value.converter is the JsonConverter with schemas.enable=true
	// writes each as a {"schema", "payload"} envelope. nil: no schema.
	KeySchema, ValueSchema *Schema
	// Transaction names the source transaction the record belongs to,
	// "" for none. The records of one transaction come in one poll and
	// are written in one Kafka transaction whatever their topics, with
	// the header TxnHeader naming it; see SourceTask for the order.
	Transaction string
	// EndsTransaction marks the record that closes its Transaction (a
	// transaction's end event). It is written after every other record
	// of the transaction is committed, stamped with a clock that claims
	// all of them, and with the header TxnEndHeader: a reader with
	// Causeway's gate receives it only once it has received the whole
	// transaction.
	EndsTransaction bool
}

// The headers that say which source transaction a record belongs to
// (SourceRecord.Transaction), and which record closes it. A causal sink
// commits only where every transaction it has begun to write is ended,
// so that each source transaction lands whole in one of its own.
const (
	TxnHeader    = "causeway.txn"
	TxnEndHeader = "causeway.txn.end"
)

// Reporter is a task that says how it stands beyond its records: gauges
// by name, which the worker serves as its metrics (a change data capture
// source's replication lag). Report is called from another goroutine than
// Poll's, whenever the metrics are read.
type Reporter interface {
	Report() map[string]float64
}

// Describer is a task that says in words where it stands: a change data
// capture source's slot and the last log position it wrote. The worker
// shows them with the task's status (GET /connectors/{name}/status and
// the page), as of its last heartbeat. Describe is called from another
// goroutine than Poll's.
type Describer interface {
	Describe() map[string]string
}

// CommitListener is a SourceTask that hears when its records are
// committed to Kafka: after each Kafka transaction that carried an
// offset, the runtime calls Committed with it, from Poll's goroutine
// between two polls. A source that must not let go of its input before
// it is safe in Kafka (a database's replication slot) lets go here.
type CommitListener interface {
	Committed(ctx context.Context, offset []byte) error
}

// Streaming is a SourceTask whose Poll reads on from where its last poll
// stopped, and reads the offset it is given on its first call only (a
// replication stream, as opposed to a query from the committed offset).
// The runtime then polls it again while it writes what the last poll
// returned, so that reading overlaps Kafka's transactions; Poll and
// Committed still come from one goroutine, Committed between two polls,
// with the offset of the last transaction committed by then.
type Streaming interface {
	Streaming() bool
}

// SourceTask reads records from another system. Its calls come from one
// goroutine: Poll any number of times, then Close.
//
// The runtime writes what Poll returns in order, and stamps every record
// with the clock of the task's session: each record claims every record
// the task wrote before it, on any topic. A sink with Causeway's gate
// therefore writes them in the order the task returned them, whatever
// topics and partitions they went to. Records of a source transaction
// (SourceRecord.Transaction) are the exception: those of one poll go in
// one Kafka transaction and claim only what came before that poll (not
// each other), and each transaction's end record claims all of them.
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
