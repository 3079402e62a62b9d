package pass

import "testing"

func TestPasses(t *testing.T) {}
