//go:build !linux

package pgtest

// holdPort holds nothing elsewhere than on Linux: a paused server's port
// may be taken before it resumes.
func holdPort(int) func() { return nil }
