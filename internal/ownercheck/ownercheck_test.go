package ownercheck_test

import (
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/causeway-stream/causeway/internal/ownercheck"
)

// Every write the testdata marks with a want comment is reported, and
// nothing else: a method's and a constructor's writes, reads, method calls
// and the fields of unmarked types pass.
func TestOwnercheck(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), ownercheck.Analyzer, "owned")
}
