package transport

import (
	"fmt"
	"sync"
)

// Named returns the transport called name: one built in, or one a test
// registered.
func Named(name string) (Supplier, error) {
	if t, ok := transports[name]; ok {
		return t, nil
	}
	registeredMu.Lock()
	defer registeredMu.Unlock()
	if t, ok := registered[name]; ok {
		return t, nil
	}
	return nil, fmt.Errorf("%w: client %q is not built into this binary", ErrInvalidConfig, name)
}

// transports are the transports built in, by name; the files that
// implement them add themselves (in init, so no lock).
var transports = map[string]Supplier{}

// registered are the transports tests put in place of a client library
// (transporttest), by name.
var (
	registeredMu sync.Mutex
	registered   = map[string]Supplier{}
)

// Register makes s the transport called name, until the function it
// returns is called. It is for tests: a worker given name as its client
// then runs on s (an in-process fake, say). The names of the built-in
// clients are refused.
func Register(name string, s Supplier) (remove func(), err error) {
	registeredMu.Lock()
	defer registeredMu.Unlock()
	if _, builtIn := transports[name]; builtIn || name == Librdkafka || name == Franz {
		return nil, fmt.Errorf("%w: %q is a built-in client's name", ErrInvalidConfig, name)
	}
	if _, taken := registered[name]; taken {
		return nil, fmt.Errorf("%w: a transport called %q is registered already", ErrInvalidConfig, name)
	}
	registered[name] = s
	return func() {
		registeredMu.Lock()
		defer registeredMu.Unlock()
		delete(registered, name)
	}, nil
}

// Clients returns the Kafka client libraries built into this binary, the
// default first: librdkafka when built with cgo, then franz.
func Clients() []string {
	var out []string
	for _, c := range []string{Librdkafka, Franz} {
		if _, ok := transports[c]; ok {
			out = append(out, c)
		}
	}
	return out
}
