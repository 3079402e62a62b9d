package framework

// BadInputPolicy says what happens to an input record whose key or value a
// processor cannot deserialize (its Process returns an error matching
// ErrDeserialize), to one its processor fails on (OnProcessingError), and
// to an output Kafka refuses for good (OnProductionError).
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
	// HeaderDLQStage says what failed: StageDeserialize, StageProcess,
	// StageProduce, StageClock or StageSkip.
	HeaderDLQStage = "causeway.dlq.stage"
	// HeaderDLQOutput names the output topic that refused the record, on
	// dead-letter records of StageProduce.
	HeaderDLQOutput = "causeway.dlq.output"
	// HeaderDLQTruncated is on a dead letter cut to fit its topic: it
	// says what was cut, "value" or "key,value" (left out whole).
	HeaderDLQTruncated = "causeway.dlq.truncated"
	// HeaderDLQOriginalSize is the size in bytes of the key and value
	// of a dead letter before it was cut, beside HeaderDLQTruncated.
	HeaderDLQOriginalSize = "causeway.dlq.original.size"
)

// Stages named by HeaderDLQStage.
const (
	// StageDeserialize: the processor could not read the record's key or
	// value.
	StageDeserialize = "deserialize"
	// StageProcess: the processor returned an error for the record.
	StageProcess = "process"
	// StageProduce: Kafka refused an output the record led to; the
	// dead-letter record is that output, and the source headers name the
	// input record.
	StageProduce = "produce"
	// StageClock: the record's clock header was corrupt or claimed what
	// cannot exist.
	StageClock = "clock"
	// StageSkip: an operator moved a failed task past the record.
	StageSkip = "skip"
)
