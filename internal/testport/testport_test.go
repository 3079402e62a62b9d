package testport

import (
	"net"
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A held port refuses connections and cannot be listened on, by the port
// or by a listener the kernel places; once released, a server binds it.
func TestAHeldPortRefusesAndIsTakenByNoOtherListener(t *testing.T) {
	h, err := Hold(0)
	require.NoError(t, err)
	defer h.Release()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(h.Port))

	_, err = net.Dial("tcp", addr)
	assert.ErrorIs(t, err, syscall.ECONNREFUSED, "as a server that is down")
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		ln.Close()
	}
	assert.ErrorIs(t, err, syscall.EADDRINUSE, "no other listener takes it")
	for range 200 { // listeners the kernel places stay off it
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		got := ln.Addr().(*net.TCPAddr).Port
		require.NoError(t, ln.Close())
		require.NotEqual(t, h.Port, got)
	}

	h.Release()
	h.Release() // a second release does nothing
	ln, err = net.Listen("tcp", addr)
	require.NoError(t, err, "released, the port is the server's")
	require.NoError(t, ln.Close())
}

// Hold takes the port asked for, once nothing holds it.
func TestHoldTakesThePortAskedFor(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	h, err := Hold(port)
	require.NoError(t, err)
	defer h.Release()
	assert.Equal(t, port, h.Port)
}
