package fail

import "testing"

func TestFails(t *testing.T) { t.Fatal("fails on purpose") }

func TestPasses(t *testing.T) {}
