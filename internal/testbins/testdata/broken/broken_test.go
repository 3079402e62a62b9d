package broken

import "testing"

// TestDoesNotBuild does not compile, on purpose: the script must report
// its package as failed.
func TestDoesNotBuild(t *testing.T) { var n int = "not a number"; _ = n }
