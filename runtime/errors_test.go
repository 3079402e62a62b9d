//go:build cgo

package runtime

import (
	"errors"
	"fmt"
	"testing"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/stretchr/testify/assert"
)

// One row per class of docs/operations.md's error table, with the
// librdkafka errors that stand for it.
func TestClassifyLibrdkafkaErrors(t *testing.T) {
	tests := []struct {
		name string
		give error
		want errorClass
	}{
		{"fenced by a newer instance", kafka.NewError(kafka.ErrFenced, "fenced", false), classFatal},
		{"producer fenced", kafka.NewError(kafka.ErrProducerFenced, "fenced", false), classFatal},
		{"stale producer epoch", kafka.NewError(kafka.ErrInvalidProducerEpoch, "epoch", false), classFatal},
		{"authentication refused", kafka.NewError(kafka.ErrSaslAuthenticationFailed, "sasl", false), classFatal},
		{"transactional id not authorized", kafka.NewError(kafka.ErrTransactionalIDAuthorizationFailed, "acl", false), classFatal},
		{"any error librdkafka calls fatal", kafka.NewError(kafka.ErrUnknown, "fatal", true), classFatal},
		{"message too large", kafka.NewError(kafka.ErrMsgSizeTooLarge, "too large", false), classRecord},
		{"batch too large for the segment", kafka.NewError(kafka.ErrRecordListTooLarge, "too large", false), classRecord},
		{"invalid record", fmt.Errorf("produce to out/1: %w", kafka.NewError(kafka.ErrInvalidRecord, "invalid", false)), classRecord},
		{"unknown output topic", kafka.NewError(kafka.ErrUnknownTopicOrPart, "unknown", false), classRecord},
		{"output topic not authorized", kafka.NewError(kafka.ErrTopicAuthorizationFailed, "acl", false), classRecord},
		{"timed out", kafka.NewError(kafka.ErrTimedOut, "timed out", false), classRetriable},
		{"not enough replicas", kafka.NewError(kafka.ErrNotEnoughReplicas, "isr", false), classRetriable},
		{"coordinator not available", kafka.NewError(kafka.ErrCoordinatorNotAvailable, "coordinator", false), classRetriable},
		{"concurrent transactions", kafka.NewError(kafka.ErrConcurrentTransactions, "busy", false), classRetriable},
		{"erroneous state of an aborted transaction", kafka.NewError(kafka.ErrState, "state", false), classAbortable},
		{"transport failure", kafka.NewError(kafka.ErrTransport, "broker down", false), classAbortable},
		{"not a Kafka error", errors.New("disk full"), classAbortable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, classify(rdkError(tt.give)), "%v", tt.give)
		})
	}
}

func TestErrorCode(t *testing.T) {
	full := kafka.NewError(kafka.ErrQueueFull, "queue full", false)
	tests := []struct {
		name string
		err  error
		want kafka.ErrorCode
	}{
		{"librdkafka error", full, kafka.ErrQueueFull},
		{"wrapped", fmt.Errorf("produce to out/0: %w", full), kafka.ErrQueueFull},
		{"sorted by the transport", rdkError(full), kafka.ErrQueueFull},
		{"other error", errors.New("disk full"), kafka.ErrNoError},
		{"nil", nil, kafka.ErrNoError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, errorCode(tt.err))
		})
	}
}
