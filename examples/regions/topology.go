package main

import (
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/dsl"
	"github.com/causeway-stream/causeway/framework/serde"
)

// Topic and store names of the example.
const (
	CustomersTopic = "customers"
	OrdersTopic    = "orders"
	TotalsTopic    = "region-totals"
	CustomersStore = "customers"
	OrdersStore    = "orders"
	PlacedStore    = "orders-with-region"
	TotalsStore    = "region-totals"
)

// Customer is a row of the customers table, keyed by customer id.
type Customer struct {
	Name   string `json:"name"`
	Region string `json:"region"`
}

// Order is a row of the orders table, keyed by order id: the customer who
// placed it and its amount in cents.
type Order struct {
	Customer string `json:"customer"`
	Amount   int64  `json:"amount"`
}

// Placed is an order with the region of its customer.
type Placed struct {
	Region string `json:"region"`
	Amount int64  `json:"amount"`
}

// Topology joins each order with its customer on the order's customer id
// (a foreign-key join: the orders are keyed by order id), regroups the
// results by region and sums their amounts: region-totals gets each
// region's new total whenever it changes. An order whose customer is not
// there yet waits for it (an inner join); a customer who moves takes the
// amounts of their orders from the old region's total to the new one's.
func Topology() (*framework.Topology, error) {
	b := dsl.NewBuilder("regions")
	customers := dsl.TableFrom(b, CustomersTopic, CustomersStore, serde.Codec[string, Customer]{Key: serde.String(), Value: serde.JSON[Customer]()})
	orders := dsl.TableFrom(b, OrdersTopic, OrdersStore, serde.Codec[string, Order]{Key: serde.String(), Value: serde.JSON[Order]()})
	placed := dsl.JoinForeignKey(orders, customers, PlacedStore,
		func(_ string, o Order) (string, bool, error) { return o.Customer, o.Customer != "", nil },
		func(_ string, o Order, c Customer) (Placed, error) {
			return Placed{Region: c.Region, Amount: o.Amount}, nil
		})
	byRegion := dsl.GroupTable(placed, "orders-by-region",
		func(_ string, p Placed) (string, int64, bool, error) { return p.Region, p.Amount, true, nil },
		serde.Codec[string, int64]{Key: serde.String(), Value: serde.Int64()})
	dsl.AggregateTable(byRegion, TotalsStore, func() int64 { return 0 },
		func(_ string, amount, total int64) (int64, error) { return total + amount, nil },
		func(_ string, amount, total int64) (int64, error) { return total - amount, nil },
		serde.Int64()).
		ToStream().To(TotalsTopic)
	return b.Build()
}
