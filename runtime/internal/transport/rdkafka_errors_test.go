//go:build cgo

package transport

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
		want Class
	}{
		{"fenced by a newer instance", kafka.NewError(kafka.ErrFenced, "fenced", false), ClassFatal},
		{"producer fenced", kafka.NewError(kafka.ErrProducerFenced, "fenced", false), ClassFatal},
		{"stale producer epoch", kafka.NewError(kafka.ErrInvalidProducerEpoch, "epoch", false), ClassFatal},
		{"authentication refused", kafka.NewError(kafka.ErrSaslAuthenticationFailed, "sasl", false), ClassFatal},
		{"transactional id not authorized", kafka.NewError(kafka.ErrTransactionalIDAuthorizationFailed, "acl", false), ClassFatal},
		{"any error librdkafka calls fatal", kafka.NewError(kafka.ErrUnknown, "fatal", true), ClassFatal},
		{"message too large", kafka.NewError(kafka.ErrMsgSizeTooLarge, "too large", false), ClassRecord},
		{"batch too large for the segment", kafka.NewError(kafka.ErrRecordListTooLarge, "too large", false), ClassRecord},
		{"invalid record", fmt.Errorf("produce to out/1: %w", kafka.NewError(kafka.ErrInvalidRecord, "invalid", false)), ClassRecord},
		{"unknown output topic", kafka.NewError(kafka.ErrUnknownTopicOrPart, "unknown", false), ClassRecord},
		{"output topic not authorized", kafka.NewError(kafka.ErrTopicAuthorizationFailed, "acl", false), ClassRecord},
		{"timed out", kafka.NewError(kafka.ErrTimedOut, "timed out", false), ClassRetriable},
		{"not enough replicas", kafka.NewError(kafka.ErrNotEnoughReplicas, "isr", false), ClassRetriable},
		{"coordinator not available", kafka.NewError(kafka.ErrCoordinatorNotAvailable, "coordinator", false), ClassRetriable},
		{"concurrent transactions", kafka.NewError(kafka.ErrConcurrentTransactions, "busy", false), ClassRetriable},
		{"erroneous state of an aborted transaction", kafka.NewError(kafka.ErrState, "state", false), ClassAbortable},
		{"transport failure", kafka.NewError(kafka.ErrTransport, "broker down", false), ClassAbortable},
		{"not a Kafka error", errors.New("disk full"), ClassAbortable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Classify(rdkError(tt.give)), "%v", tt.give)
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
