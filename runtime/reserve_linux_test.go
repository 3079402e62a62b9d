package runtime_test

import (
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// reservedPort is a TCP port nothing listens on, and nothing else can
// take until release: a socket bound to it that does not listen, so that
// connections to it are refused. (A port found free and closed could be
// taken by another test's listener before it is used.)
func reservedPort(t *testing.T) (port int, release func()) {
	t.Helper()
	// Close-on-exec: not handed to the workers the test spawns.
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	var once sync.Once
	release = func() { once.Do(func() { _ = syscall.Close(fd) }) }
	t.Cleanup(release)
	require.NoError(t, syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}))
	sa, err := syscall.Getsockname(fd)
	require.NoError(t, err)
	return sa.(*syscall.SockaddrInet4).Port, release
}
