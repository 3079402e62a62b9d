// Package reachtest has the clusters a worker cannot reach, for the
// tests that show each kind of worker refuses them alike (package reach):
// an address where nothing listens, and a TLS broker whose certificate
// does not verify with the authority the worker is given.
package reachtest

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/internal/testca"
	"github.com/causeway-stream/causeway/internal/testport"
	"github.com/causeway-stream/causeway/runtime/embedded"
	"github.com/causeway-stream/causeway/runtime/internal/transport"
)

// Case is a cluster a worker cannot reach, the settings to try it with,
// and what the worker's error must say.
type Case struct {
	Name      string
	Bootstrap string
	Kafka     map[string]string
	// Timeout is the worker's ConnectTimeout.
	Timeout time.Duration
	// want are parts of the error; retried says whether the worker tried
	// until Timeout (its error counts the attempts) or refused at once.
	want    []string
	retried bool
}

// Cases starts what the cases need, stopped when t ends.
func Cases(t testing.TB) []Case {
	t.Helper()
	ca, err := testca.New(t.TempDir())
	require.NoError(t, err)
	other, err := testca.New(t.TempDir())
	require.NoError(t, err)
	b, err := embedded.Start(embedded.TLS(ca.ServerConfig()))
	require.NoError(t, err)
	t.Cleanup(b.Close)
	held, err := testport.Hold(0)
	require.NoError(t, err)
	t.Cleanup(held.Release)
	nowhere := fmt.Sprintf("127.0.0.1:%d", held.Port)
	return []Case{
		{Name: "nothing listens", Bootstrap: nowhere, Timeout: 2 * time.Second, retried: true,
			want: []string{"cannot reach Kafka at " + nowhere + " within 2s", "connection refused"}},
		{Name: "a certificate that does not verify", Bootstrap: b.Addr(), Timeout: time.Minute,
			Kafka: map[string]string{"security.protocol": "SSL", "ssl.ca.location": other.File},
			want:  []string{"TLS handshake with " + b.Addr(), "certificate signed by unknown authority"}},
	}
}

// Run runs start on each client built in against each case, in parallel
// subtests, and checks what it returns: start starts a worker with the
// case's settings and returns the error its start ended with, which must
// be sentinel.
func Run(t *testing.T, sentinel error, start func(t *testing.T, client string, c Case) error) {
	t.Helper()
	cases := Cases(t)
	for _, client := range transport.Clients() {
		for _, c := range cases {
			t.Run(client+"/"+c.Name, func(t *testing.T) {
				t.Parallel()
				began := time.Now()
				err := start(t, client, c)
				c.Check(t, err, sentinel, time.Since(began))
			})
		}
	}
}

// Check asserts that err, which the worker returned elapsed after it
// started, is sentinel and says what c wants: tried until the bound, or
// refused at once.
func (c Case) Check(t testing.TB, err, sentinel error, elapsed time.Duration) {
	t.Helper()
	require.Error(t, err)
	assert.True(t, errors.Is(err, sentinel), "%v is not %v", err, sentinel)
	for _, want := range c.want {
		assert.ErrorContains(t, err, want)
	}
	assert.Equal(t, c.retried, strings.Contains(err.Error(), "attempts"), "tried until the bound: %v", err)
	if c.retried {
		assert.GreaterOrEqual(t, elapsed, c.Timeout, "gave up before the bound")
	} else {
		assert.Less(t, elapsed, c.Timeout/2, "refused at once, not at the bound")
	}
}
