//go:build cgo

package runtime_test

// builtWithCgo: this build has librdkafka's transport.
const builtWithCgo = true
