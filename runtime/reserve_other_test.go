//go:build !linux

package runtime_test

import (
	"net"
	"testing"

	"github.com/stretchr/testify/require"
)

// reservedPort is a TCP port nothing listens on as of now; release does
// nothing. Elsewhere than on Linux the port is found free and closed, and
// another listener could take it before it is used.
func reservedPort(t *testing.T) (port int, release func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port = ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	return port, func() {}
}
