// Package connect is Causeway's connector API, in the manner of Kafka
// Connect: a Sink writes the records of Kafka topics into another system.
// A connector is a named configuration of a plugin; it runs as tasks, each
// writing the channels (topic-partitions) the consumer group gives it.
//
// A sink here is exactly-once and causal, which Kafka Connect's sinks are
// not:
//
//   - Exactly once: the system written to keeps, beside the data, the next
//     offset of every channel written (the positions), and a task updates
//     both in one transaction of that system. A task resumes from the
//     positions the system holds, never from the group's committed offsets,
//     so a crash between writing and committing loses and repeats nothing.
//   - Causal: a record is written only once every record its clock claims
//     on the connector's topics has been written, by this task or another.
//     The positions are the barrier: a claim on a channel another task
//     writes is met once that channel's position in the system passes it.
//
// The runtime (package runtime/sinkworker) runs the consumer, the causal
// gate and the commits; a plugin implements the SinkTask calls against its
// system. connect/postgres is the first plugin.
package connect

import (
	"context"
	"errors"
	"time"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
)

// Record is one Kafka record handed to a sink task.
type Record struct {
	Topic     string
	Partition int32
	Offset    int64
	Key       []byte
	// Value is the record's value; nil for a tombstone.
	Value     []byte
	Timestamp time.Time
	Headers   []framework.Header
	// KeySchema and ValueSchema are the schemas the key's and the value's
	// converters read beside them (connect/convert); nil when the format
	// carries none, as schemaless JSON does.
	KeySchema, ValueSchema *Schema
}

// Channel is the channel the record was read from.
func (r Record) Channel() causal.Channel {
	return causal.Channel{Topic: r.Topic, Partition: r.Partition}
}

// Rejected is a record the sink's system refused on its own merits (a
// constraint its data breaks): it goes to the dead-letter topic with Err,
// and the records around it are written.
type Rejected struct {
	Record Record
	Err    error
}

// Move is how far one channel's position moves in a commit: From is where
// the task read it from (-1 when the system held no position for it), To
// the next offset to write once the commit is done.
type Move struct {
	Channel causal.Channel
	From    int64
	To      int64
}

// SinkTask writes records into a sink's system, exactly once. Its calls
// come in this order: Positions when the task's channels are assigned,
// then any number of rounds of Put calls closed by Commit or Abort, and
// Close at the end. Put, Commit and Abort come from one goroutine at a
// time; Positions may come from another while they run (the runtime reads
// other tasks' positions while its last records are being written), so it
// must not use the open transaction.
type SinkTask interface {
	// Positions returns the next offset to write of every channel of the
	// connector's topics that any of its tasks has written (committed): a
	// task resumes its own channels there, and for the others it is how
	// far the causal barrier has come.
	Positions(ctx context.Context) (map[causal.Channel]int64, error)
	// Put writes recs, in order, into the open transaction, opening one
	// when none is. A record the system refuses on its own merits comes
	// back as Rejected, with the system's error, and the others are
	// written. An error is the task's: the caller aborts.
	Put(ctx context.Context, recs []Record) ([]Rejected, error)
	// Commit commits the open transaction together with the positions of
	// the channels moves names. A position that is no longer at its From
	// (another task took the channel over and wrote past it) fails the
	// commit with ErrFenced, and nothing is committed.
	Commit(ctx context.Context, moves []Move) error
	// Abort drops what Put wrote since the last Commit.
	Abort(ctx context.Context) error
	// Close ends the task; an open transaction is aborted.
	Close() error
}

// PositionsEditor is a SinkTask whose positions an operator may change
// while its connector is stopped: Kafka Connect's offsets calls
// (KIP-875). A channel without a position is read from its beginning.
type PositionsEditor interface {
	// SetPositions sets the position of each channel of positions to
	// its next offset to write; a negative one removes the channel's
	// position.
	SetPositions(ctx context.Context, positions map[causal.Channel]int64) error
	// ResetPositions removes every position of the connector.
	ResetPositions(ctx context.Context) error
}

// Sink is a plugin that writes into another system.
type Sink interface {
	// Config describes the plugin's own settings.
	Config() *ConfigDef
	// Open returns a task of the connector named connector, from the
	// plugin's settings (already validated against Config) and the topics
	// it reads. The connector's name keeps its positions apart from other
	// connectors' in the system.
	Open(ctx context.Context, connector string, topics []string, cfg Config) (SinkTask, error)
}

// ErrFiltered is returned by a transform chain for a record a Filter
// transform dropped: a sink skips it (its offset still counts), a source
// does not write it. It is not a failure.
var ErrFiltered = errors.New("filtered out by a transform")

// ErrFenced is returned by SinkTask.Commit when another task has written
// one of the task's channels since the task read its position: the task
// is a zombie and must stop writing.
var ErrFenced = errors.New("fenced: another task wrote this task's channels")

// RetriableError is an error of a sink task's system that may pass: a
// connection lost or refused, the server shutting down or out of
// resources, a serialization failure. The runtime aborts what the task
// put, waits, and puts the same records again, up to its retry limit
// (max.retries, retry.backoff.ms), before it fails the task: Kafka
// Connect's RetriableException. A SinkTask returns it from Put, Commit or
// Positions, wrapping the system's error.
type RetriableError struct {
	Err error
}

// Error implements error.
func (e *RetriableError) Error() string { return "transient: " + e.Err.Error() }

// Unwrap returns the system's error.
func (e *RetriableError) Unwrap() error { return e.Err }

// IsRetriable reports whether err, or an error it wraps, is a
// *RetriableError.
func IsRetriable(err error) bool {
	var r *RetriableError
	return errors.As(err, &r)
}
