package runtime_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/stretchr/testify/assert"

	"github.com/causeway-stream/causeway/runtime"
)

func TestErrorCode(t *testing.T) {
	full := kafka.NewError(kafka.ErrQueueFull, "queue full", false)
	tests := []struct {
		name string
		err  error
		want kafka.ErrorCode
	}{
		{"librdkafka error", full, kafka.ErrQueueFull},
		{"wrapped", fmt.Errorf("produce to out/0: %w", full), kafka.ErrQueueFull},
		{"other error", errors.New("disk full"), kafka.ErrNoError},
		{"nil", nil, kafka.ErrNoError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, runtime.ErrorCode(tt.err))
		})
	}
}
