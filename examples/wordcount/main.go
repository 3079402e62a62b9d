// Command wordcount is a Causeway worker that counts words.
//
// As a worker, against a Kafka cluster or (with no --bootstrap-servers) the
// embedded broker:
//
//	wordcount --application-id wordcount --bootstrap-servers broker:9092
//
// As a self-contained demo (what `make run` does): start the embedded
// broker, feed it the bundled text, count, print the top words, and exit:
//
//	wordcount demo
package main

import (
	"fmt"
	"os"

	"github.com/causeway-stream/causeway/runtime"
)

func main() {
	topo, err := Topology()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if len(os.Args) > 1 && os.Args[1] == "demo" {
		os.Exit(demo(topo, os.Args[2:]))
	}
	os.Exit(runtime.Run(topo))
}
