package transport

// Class says what the worker does about a Kafka error; docs/operations.md
// has the same table for operators.
type Class int

const (
	// ClassRetriable: try the same call again, with backoff.
	ClassRetriable Class = iota + 1
	// ClassAbortable: abort the transaction and rebuild the tasks that had
	// effects in it from committed state.
	ClassAbortable
	// ClassRecord: the error belongs to one record and will happen again
	// every time that record is sent (too large, invalid, a topic that does
	// not exist or may not be written). The emitting processor's production
	// error policy decides.
	ClassRecord
	// ClassFatal: the worker cannot go on (fenced by a newer instance,
	// authentication refused); it stops, and its supervisor restarts it.
	ClassFatal
)

func (c Class) String() string {
	switch c {
	case ClassRetriable:
		return "retriable"
	case ClassAbortable:
		return "abortable"
	case ClassRecord:
		return "permanent for one record"
	case ClassFatal:
		return "fatal"
	}
	return "unknown"
}
