// Command ownercheck runs the ownercheck pass (see package ownercheck) over
// the packages named on its command line, as make lint does.
package main

import (
	"golang.org/x/tools/go/analysis/singlechecker"

	"github.com/causeway-stream/causeway/internal/ownercheck"
)

func main() { singlechecker.Main(ownercheck.Analyzer) }
