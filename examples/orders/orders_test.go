package main

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/driver"
)

// In the in-memory driver, with the orders partition held back, the shop
// still bills, ships and audits every order in causal order.
func TestShopInDriverWithLag(t *testing.T) {
	for _, gateOff := range []bool{false, true} {
		topo, err := Topology()
		require.NoError(t, err)
		var opts []driver.Opt
		if gateOff {
			opts = append(opts, driver.GateOff())
		}
		d, err := driver.New(topo, append(opts, driver.DefaultPartitions(2))...)
		require.NoError(t, err)
		d.Pause(OrdersTopic, 0)
		d.Pause(OrdersTopic, 1)
		var written Written
		for i := range 10 {
			var s causal.Session
			order := "o" + string(rune('a'+i))
			for _, w := range [][2]string{{OrdersTopic, "created " + order}, {PaymentsTopic, "pay-" + order}, {RequestsTopic, "ship req-" + order}} {
				_, _, err := d.Pipe(w[0], framework.Record{Key: []byte(order), Value: []byte(w[1])}, driver.InSession(&s))
				require.NoError(t, err)
			}
			written.Orders = append(written.Orders, order)
		}
		require.NoError(t, d.Run())
		d.Resume(OrdersTopic, 0)
		d.Resume(OrdersTopic, 1)
		require.NoError(t, d.Run())
		outputs := map[string][]string{}
		for _, topic := range []string{BilledTopic, ShipmentsTopic, AuditTopic} {
			recs, err := d.Records(topic)
			require.NoError(t, err)
			for _, r := range recs {
				outputs[topic] = append(outputs[topic], string(r.Value))
			}
		}
		r := Verify(written, outputs)
		if gateOff {
			assert.Positive(t, r.AnomalyCount(), "without the gate the lag must show: %s", r)
		} else {
			assert.True(t, r.Clean(), "%s", r)
		}
	}
}

// The verifier catches each thing it is for.
func TestVerifyCatches(t *testing.T) {
	w := Written{Orders: []string{"o1"}}
	clean := map[string][]string{BilledTopic: {"paid pay-o1"}, ShipmentsTopic: {"shipped req-o1"}, AuditTopic: {"audited req-o1"}}
	assert.True(t, Verify(w, clean).Clean())
	tests := []struct {
		name  string
		topic string
		give  []string
		check func(Report) bool
	}{
		{"anomaly", BilledTopic, []string{AnomalyUnknownOrder + " pay-o1"}, func(r Report) bool { return r.Anomalies[AnomalyUnknownOrder] == 1 }},
		{"duplicate", ShipmentsTopic, []string{"shipped req-o1", "shipped req-o1"}, func(r Report) bool { return r.Duplicates == 1 }},
		{"loss", AuditTopic, nil, func(r Report) bool { return r.Losses == 1 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := map[string][]string{}
			for k, v := range clean {
				out[k] = v
			}
			out[tt.topic] = tt.give
			r := Verify(w, out)
			assert.True(t, tt.check(r), "%s", r)
			assert.False(t, r.Clean())
		})
	}
}

// End to end on the embedded broker with the real worker, as `make
// run-orders` does: with the gate, no anomaly; without it, anomalies; and
// exactly once either way.
func TestDemoGateOnAndOff(t *testing.T) {
	topo, err := Topology()
	require.NoError(t, err)
	o := demoOptions{orders: 30, lag: 2 * time.Second, timeout: time.Minute}
	on, err := runShop(context.Background(), topo, false, o, io.Discard)
	require.NoError(t, err)
	assert.True(t, on.Clean(), "gate on: %s", on)
	off, err := runShop(context.Background(), topo, true, o, io.Discard)
	require.NoError(t, err)
	assert.Positive(t, off.AnomalyCount(), "gate off: %s", off)
	assert.Zero(t, off.Duplicates)
	assert.Zero(t, off.Losses)
}

// The read-your-writes part of the demonstration: every status read with
// the client's clock says "paid", and the same reads without it miss
// payments (the lag holds some back, and the two processors' commits the
// rest); every read is asked of the worker that does not hold the order.
func TestDemoReadsYourWrites(t *testing.T) {
	topo, err := Topology()
	require.NoError(t, err)
	o := demoOptions{orders: 12, lag: time.Second, timeout: 90 * time.Second}
	r, err := readYourWrites(context.Background(), topo, o, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, o.orders, r.CausalPaid, "%s", r)
	assert.Less(t, r.PlainPaid, o.orders, "without the clock some reads must miss the payment: %s", r)
	assert.Positive(t, r.Forwarded, "%s", r)
}
