// Command orders is a small shop whose correctness depends on causal order
// across topics: a payment must be billed after its order, a shipment after
// its payment, and an audit two hops away must never see a shipment before
// the order it belongs to.
//
// As a worker:
//
//	orders --application-id shop --bootstrap-servers broker:9092
//
// As a demonstration (what `make run-orders` does), the same client traffic
// with one orders partition lagging, with the gate on and then off:
//
//	orders demo
package main

import "github.com/causeway-stream/causeway/examples/internal/demoworker"

func main() { demoworker.Main(Topology, demo) }
