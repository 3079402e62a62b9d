// Package testport holds TCP ports on 127.0.0.1 for tests that hand a port
// to another process or server: a socket bound to the port that does not
// listen, so that connections to it are refused, as by a server that is
// down, and no other listener can take it until it is released. A port
// found free and closed could be taken by another test's listener before
// it is used; one held is let go only just before its server binds it.
package testport

// Held is a port held by Hold.
type Held struct {
	// Port is the port number.
	Port    int
	release func()
}

// Release lets go of the port; later calls do nothing.
func (h *Held) Release() {
	if h.release != nil {
		h.release()
		h.release = nil
	}
}
