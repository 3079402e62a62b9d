package testport

import (
	"fmt"
	"syscall"
)

// Hold holds port on 127.0.0.1, or, with port 0, a free one the kernel
// picks. The socket does not set SO_REUSEADDR, which would let another
// listener bind the port beside it (so a port whose server just stopped,
// with connections in TIME_WAIT, cannot be held); close-on-exec keeps it
// from the processes tests spawn.
func Hold(port int) (*Held, error) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socket: %w", err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		_ = syscall.Close(fd)
		return nil, fmt.Errorf("bind 127.0.0.1:%d: %w", port, err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		_ = syscall.Close(fd)
		return nil, fmt.Errorf("getsockname: %w", err)
	}
	return &Held{Port: sa.(*syscall.SockaddrInet4).Port, release: func() { _ = syscall.Close(fd) }}, nil
}
