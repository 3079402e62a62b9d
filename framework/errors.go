package framework

import (
	"errors"
	"fmt"
)

// Sentinel errors. Topology validation errors wrap ErrInvalidTopology and
// name the culprit.
var (
	// ErrInvalidTopology is matched by every error Build returns.
	ErrInvalidTopology = errors.New("invalid topology")
	// ErrUnknownOutput is returned by Context.Emit for an output the
	// processor did not declare.
	ErrUnknownOutput = errors.New("unknown output")
	// ErrUnknownStore is returned by Context for a store the processor did
	// not declare, or of the other kind.
	ErrUnknownStore = errors.New("unknown store")
	// ErrNotCoPartitioned is returned by Topology.CheckPartitions when the
	// inputs of one processor have different partition counts.
	ErrNotCoPartitioned = errors.New("inputs not co-partitioned")
	// ErrDeserialize is matched by every *DeserializeError.
	ErrDeserialize = errors.New("cannot deserialize record")
)

// DeserializeError is what a serde failure on an input record becomes: it
// names the record so an operator can find it.
type DeserializeError struct {
	Topic     string
	Partition int32
	Offset    int64
	// Part is "key" or "value".
	Part string
	Err  error
}

// Error implements error.
func (e *DeserializeError) Error() string {
	return fmt.Sprintf("cannot deserialize %s of %s/%d at offset %d: %v", e.Part, e.Topic, e.Partition, e.Offset, e.Err)
}

// Unwrap returns the serde's error.
func (e *DeserializeError) Unwrap() error { return e.Err }

// Is makes every DeserializeError match ErrDeserialize.
func (e *DeserializeError) Is(target error) bool { return target == ErrDeserialize }

// KeyError wraps a serde error on rec's key as a *DeserializeError.
func KeyError(rec Record, err error) error {
	return &DeserializeError{Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset, Part: "key", Err: err}
}

// ValueError wraps a serde error on rec's value as a *DeserializeError.
func ValueError(rec Record, err error) error {
	return &DeserializeError{Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset, Part: "value", Err: err}
}
