package reach

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/causeway-stream/causeway/runtime/internal/transport"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
)

// answeringAdmin answers every metadata request with err, and counts
// them.
type answeringAdmin struct {
	transport.Admin
	err   error
	asked int
}

func (a *answeringAdmin) PartitionCounts(context.Context) (map[string]int32, error) {
	a.asked++
	return nil, a.err
}

// A cluster that answers with an error of the fatal class (credentials or
// authorization refused) is not asked again; one that answers with any
// other error is, with backoff, until the bound.
func TestClusterRetriesAllButFatalAnswers(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0") // accepts TCP connections, never reads
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	tests := []struct {
		name      string
		err       error
		atMost    int
		atLeast   int
		wantCause string
	}{
		{"refused credentials", &transport.ClientError{Class: transport.ClassFatal, Err: errors.New("SASL_AUTHENTICATION_FAILED")}, 1, 1, "SASL_AUTHENTICATION_FAILED"},
		{"a broker not ready", &transport.ClientError{Class: transport.ClassRetriable, Err: errors.New("LEADER_NOT_AVAILABLE")}, 100, 2, "LEADER_NOT_AVAILABLE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			admin := &answeringAdmin{err: tt.err}
			err := Cluster(context.Background(), admin, ln.Addr().String(), nil, time.Second, zaptest.NewLogger(t))
			require.ErrorIs(t, err, ErrUnreachable)
			assert.ErrorContains(t, err, tt.wantCause)
			assert.ErrorContains(t, err, ln.Addr().String())
			assert.GreaterOrEqual(t, admin.asked, tt.atLeast)
			assert.LessOrEqual(t, admin.asked, tt.atMost)
		})
	}
}
