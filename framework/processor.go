package framework

import (
	"time"

	"github.com/causeway-stream/causeway/framework/store"
)

// Processor is the user's code for one task: one instance per partition
// index of its inputs, created by the factory given to Builder.Processor.
// The runtime calls Init once, then Process for each record the causal gate
// delivers, in an order that respects every record's dependencies, then Close.
// Calls never overlap.
type Processor interface {
	// Init is called before the first record. The context stays valid until
	// Close returns; a processor may keep it.
	Init(ctx Context) error
	// Process handles one delivered record. Returning an error fails the task
	// (nothing of this record is committed; the record is read again when the
	// task restarts).
	Process(ctx Context, rec Record) error
	// Close releases what Init acquired.
	Close() error
}

// ProcessorFunc adapts a function to a Processor with no Init or Close work.
type ProcessorFunc func(ctx Context, rec Record) error

// Init implements Processor.
func (f ProcessorFunc) Init(Context) error { return nil }

// Process implements Processor.
func (f ProcessorFunc) Process(ctx Context, rec Record) error { return f(ctx, rec) }

// Close implements Processor.
func (f ProcessorFunc) Close() error { return nil }

var _ Processor = ProcessorFunc(nil)

// PunctuationType says which time drives a scheduled callback.
type PunctuationType int

const (
	// StreamTime punctuations fire as the task's stream time (the largest
	// record timestamp it has delivered) passes each interval.
	StreamTime PunctuationType = iota
	// WallClockTime punctuations fire as the injected wall clock passes each
	// interval.
	WallClockTime
)

// String names the punctuation type.
func (p PunctuationType) String() string {
	if p == WallClockTime {
		return "wall-clock-time"
	}
	return "stream-time"
}

// Punctuator is a scheduled callback; now is the time that fired it.
type Punctuator func(ctx Context, now time.Time) error

// Cancel stops a scheduled punctuation.
type Cancel func()

// Context is what a processor can do and see while it runs.
type Context interface {
	// Forward emits rec to every output of the processor. The record is
	// sent later, with its key, value and headers as they are: leave the
	// bytes and the header list it points to unchanged once forwarded.
	Forward(rec Record) error
	// Emit emits rec to one output, as Forward does; an output the
	// processor did not declare is an error matching ErrUnknownOutput.
	Emit(output string, rec Record) error
	// KeyValueStore returns a declared key-value store of the processor.
	KeyValueStore(name string) (store.KeyValue, error)
	// WindowStore returns a declared window store of the processor.
	WindowStore(name string) (store.Window, error)
	// VersionedStore returns a declared versioned store of the processor.
	VersionedStore(name string) (store.Versioned, error)
	// Schedule calls fn every interval of the given time until cancelled.
	Schedule(interval time.Duration, typ PunctuationType, fn Punctuator) (Cancel, error)
	// StreamTime is the largest timestamp among records delivered so far.
	StreamTime() time.Time
	// TaskID names the task: "processor/partition".
	TaskID() string
	// Partition is the partition index of the task's inputs.
	Partition() int32
	// Outputs lists the processor's output topics.
	Outputs() []string
	// Report tells the runtime about a record the processor dropped on
	// purpose (a late record, say), so it is logged and counted: nothing is
	// dropped silently.
	Report(event DropEvent)
}

// DropNullKey is the reason of a DropEvent for a record without a key
// that a table, an aggregation or a join skipped, as Kafka Streams skips
// them. The runtime logs the first of a task and counts them all.
const DropNullKey = "null-key"

// DropEvent describes a record a processor did not turn into output on
// purpose, for logs and metrics.
type DropEvent struct {
	// Reason is a short, stable word for metrics: "late", "skipped", ...
	Reason string
	// Record is the record that was dropped.
	Record Record
	// Detail says why, for the log.
	Detail string
}
