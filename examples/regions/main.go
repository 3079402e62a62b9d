// Command regions is a Causeway worker that keeps each region's order
// total: orders, keyed by order id, name their customer; a foreign-key
// join finds each order's region in the customers table, and a table
// aggregation sums the orders by region. When a customer moves to another
// region, their orders' amounts move with them: taken out of the old
// region's total and added to the new one's.
//
// As a worker, against a Kafka cluster or (with no --bootstrap-servers) the
// embedded broker:
//
//	regions --application-id regions --bootstrap-servers broker:9092
//
// As a self-contained demo (what `make run-regions` does): start the
// embedded broker, write customers and orders, wait for the totals, move
// some customers to other regions, change and delete some orders, and
// check every total against one computed here:
//
//	regions demo
package main

import "github.com/causeway-stream/causeway/examples/internal/demoworker"

func main() { demoworker.Main(Topology, demo) }
