//go:build !linux

package testport

import (
	"net"
	"strconv"
)

// Hold finds port free (or, with port 0, a free one) and holds nothing:
// elsewhere than on Linux another listener may take it before it is used.
func Hold(port int) (*Held, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return nil, err
	}
	p := ln.Addr().(*net.TCPAddr).Port
	if err := ln.Close(); err != nil {
		return nil, err
	}
	return &Held{Port: p}, nil
}
