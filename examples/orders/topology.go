package main

import (
	"strings"

	"github.com/causeway-stream/causeway/framework"
)

// Topics of the shop. The three inputs are written by the client; the
// other three are written by the processors.
const (
	OrdersTopic    = "orders"    // key order id, value "created <order>"
	PaymentsTopic  = "payments"  // key order id, value "<payment id>"
	RequestsTopic  = "requests"  // key order id, value "ship <request id>" or "cancel <request id>"
	BilledTopic    = "billed"    // written by billing, read by nobody in the shop
	ShipmentsTopic = "shipments" // written by shipping
	AuditTopic     = "audit"     // written by audit
)

// Outcome words the processors write. The anomalies are what causal
// delivery prevents; the verifier counts them.
const (
	Paid                = "paid"
	AnomalyUnknownOrder = "ANOMALY:payment-for-unknown-order"
	Shipped             = "shipped"
	Cancelled           = "cancelled"
	AnomalyUnpaid       = "ANOMALY:request-before-payment"
	AuditOK             = "audited"
	AnomalyLaterFirst   = "ANOMALY:audit-saw-shipment-before-order"
)

// seen is a processor that remembers keys from one input and judges records
// of the other against them: the shape of all three of the shop's steps.
func seen(store, rememberTopic, ok, anomaly string, judge func(value string) (outcome string)) func() framework.Processor {
	return func() framework.Processor {
		return framework.ProcessorFunc(func(ctx framework.Context, rec framework.Record) error {
			kv, err := ctx.KeyValueStore(store)
			if err != nil {
				return err
			}
			if rec.Topic == rememberTopic {
				return kv.Put(rec.Key, rec.Value)
			}
			_, known, err := kv.Get(rec.Key)
			if err != nil {
				return err
			}
			outcome := anomaly
			if known {
				outcome = ok
				if judge != nil {
					outcome = judge(string(rec.Value))
				}
			}
			id := rec.Value
			if i := strings.LastIndexByte(string(id), ' '); i >= 0 {
				id = id[i+1:]
			}
			return ctx.Forward(framework.Record{Key: rec.Key, Value: []byte(outcome + " " + string(id)), Headers: rec.Headers})
		})
	}
}

// StatusStore is the store of each order's billing outcome ("paid", or
// the anomaly), by order id: what the read-your-writes demonstration
// queries.
const StatusStore = "order-status"

// status keeps the first word of each billing outcome, by order.
func status() framework.Processor {
	return framework.ProcessorFunc(func(ctx framework.Context, rec framework.Record) error {
		kv, err := ctx.KeyValueStore(StatusStore)
		if err != nil {
			return err
		}
		outcome, _, _ := strings.Cut(string(rec.Value), " ")
		return kv.Put(rec.Key, []byte(outcome))
	})
}

// Topology is the shop:
//
//	billing:  orders + payments    -> billed     (must see the order before its payment)
//	shipping: payments + requests  -> shipments  (must see the payment before a request)
//	audit:    orders + shipments   -> audit      (must see the order before its shipment)
//	status:   billed               -> the order-status store
//
// A client that paid reads its order's status from the status store,
// one processor after the payment's topic.
// The audit reads shipments, two hops from the orders topic (client, then
// shipping), and shipping never reads orders: the orders claims pass through
// shipping unread (the gate's ignore branch) and are enforced at the audit.
func Topology() (*framework.Topology, error) {
	return framework.NewBuilder("orders").
		Processor("billing", seen("orders-seen", OrdersTopic, Paid, AnomalyUnknownOrder, nil),
			framework.From(OrdersTopic, PaymentsTopic), framework.To(BilledTopic),
			framework.Stores(framework.KeyValueStore("orders-seen"))).
		Processor("shipping", seen("payments-seen", PaymentsTopic, Shipped, AnomalyUnpaid, func(v string) string {
			if strings.HasPrefix(v, "cancel") {
				return Cancelled
			}
			return Shipped
		}), framework.From(PaymentsTopic, RequestsTopic), framework.To(ShipmentsTopic),
			framework.Stores(framework.KeyValueStore("payments-seen"))).
		Processor("audit", seen("orders-created", OrdersTopic, AuditOK, AnomalyLaterFirst, nil),
			framework.From(OrdersTopic, ShipmentsTopic), framework.To(AuditTopic),
			framework.Stores(framework.KeyValueStore("orders-created"))).
		Processor("status", status, framework.From(BilledTopic), framework.Stores(framework.KeyValueStore(StatusStore))).
		Build()
}
