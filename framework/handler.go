package framework

// BadInputPolicy says what happens to an input record whose key or value a
// processor cannot deserialize (its Process returns an error matching
// ErrDeserialize).
type BadInputPolicy int

const (
	// FailTask stops the task with the error; the record's offset is not
	// committed, so it is read again after a restart. The default.
	FailTask BadInputPolicy = iota
	// LogAndSkip logs the record, counts it, and goes on. The record counts
	// as delivered: it has been accounted for.
	LogAndSkip
	// DeadLetter writes the record unchanged to the topology's dead-letter
	// topic, with headers naming its source topic, partition, offset and the
	// error, then goes on as LogAndSkip does.
	DeadLetter
)

// String names the policy.
func (p BadInputPolicy) String() string {
	switch p {
	case LogAndSkip:
		return "log-and-skip"
	case DeadLetter:
		return "dead-letter"
	default:
		return "fail-task"
	}
}

// Headers written on dead-letter records.
const (
	HeaderDLQTopic     = "causeway.dlq.topic"
	HeaderDLQPartition = "causeway.dlq.partition"
	HeaderDLQOffset    = "causeway.dlq.offset"
	HeaderDLQError     = "causeway.dlq.error"
)
