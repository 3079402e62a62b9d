package pgtest

import "syscall"

// holdPort binds a socket that does not listen to 127.0.0.1:port, so that
// no other listener can take the port while connections to it are
// refused, and returns what lets it go; nil when it cannot be bound.
// SO_REUSEADDR lets it bind beside the stopped server's connections in
// TIME_WAIT; close-on-exec keeps it from the processes tests spawn.
func holdPort(port int) func() {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	if syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1) != nil ||
		syscall.Bind(fd, &syscall.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}) != nil {
		_ = syscall.Close(fd)
		return nil
	}
	return func() { _ = syscall.Close(fd) }
}
