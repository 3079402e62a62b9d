// Command clicks is a Causeway worker that counts page views per region
// in one-minute windows, each window's count emitted once, when the
// window closes. A view's time is read from its JSON; views that are not
// JSON go to the dead-letter topic.
//
// As a worker, against a Kafka cluster or (with no --bootstrap-servers) the
// embedded broker:
//
//	clicks --application-id clicks --bootstrap-servers broker:9092
//
// As a self-contained demo (what `make run-clicks` does): start the
// embedded broker, write user profiles and a few thousand views, count,
// check the counts against an independent count, and exit:
//
//	clicks demo
package main

import "github.com/causeway-stream/causeway/examples/internal/demoworker"

func main() { demoworker.Main(Topology, demo) }
