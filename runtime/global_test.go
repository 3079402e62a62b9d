package runtime_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/dsl"
	"github.com/causeway-stream/causeway/framework/serde"
)

// globalShop joins payments with a global table of orders on the order id
// each payment carries as its value.
func globalShop(t *testing.T) *framework.Topology {
	t.Helper()
	text := serde.Codec[string, string]{Key: serde.String(), Value: serde.String()}
	b := dsl.NewBuilder("global-shop")
	orders := dsl.GlobalTableFrom(b, "orders", "orders", text)
	dsl.LeftJoinGlobal(dsl.From(b, "payments", text), orders,
		func(_, orderID string) (string, error) { return orderID, nil },
		func(_, orderID, order string, found bool) (string, error) {
			if !found {
				return "payment-for-unknown-order " + orderID, nil
			}
			return "paid: " + order, nil
		}).To("verdicts")
	topo, err := b.Build()
	require.NoError(t, err)
	return topo
}

// produceOrdersThenPayments writes, for each of n clients, an order and
// then, in the same causal session, its payment.
func produceOrdersThenPayments(t *testing.T, addr, prefix string, n int) {
	t.Helper()
	p := newProducer(t, addr)
	for i := range n {
		var s causal.Session
		id := fmt.Sprintf("%s-o%d", prefix, i)
		for _, w := range [][3]string{{"orders", id, "order " + id}, {"payments", id + "-pay", id}} {
			sendRecord(t, p, &kgo.Record{Topic: w[0], Key: []byte(w[1]), Value: []byte(w[2])}, &s)
		}
	}
}

// runGlobalShop runs the global shop on a broker: orders written before
// the worker starts are read to their end first; then the worker's reader
// of the orders topic lags while clients write orders and pay for them.
// It returns the verdicts that do not say "paid".
func runGlobalShop(t *testing.T, client string, gateOff bool) (unpaid []string, verdicts int) {
	t.Helper()
	b := startBroker(t)
	createTopics(t, b.Addr(), 3, "orders")
	createTopics(t, b.Addr(), 2, "payments", "verdicts")
	produceOrdersThenPayments(t, b.Addr(), "before", 5)
	cfg := testConfigFor(t, client, b.Addr(), "global-shop")
	cfg.GateOff = gateOff
	startTopology(t, cfg, globalShop(t), nil)
	release := lagOrders(t, b)
	produceOrdersThenPayments(t, b.Addr(), "during", 10)
	time.Sleep(2 * time.Second) // payments reach the worker while the orders cannot be read
	release()
	out := readCommitted(t, b.Addr(), "verdicts", 15, 60*time.Second)
	for _, m := range out {
		if !strings.HasPrefix(string(m.Value), "paid: order ") {
			unpaid = append(unpaid, string(m.Key)+": "+string(m.Value))
		}
	}
	return unpaid, len(out)
}

// A worker reads a global table to its end before its tasks start, then
// follows it; a payment that claims an order waits for the worker's copy
// of the global table to hold it, however far its reader lags.
func TestGlobalTableOnABroker(t *testing.T) {
	t.Parallel()
	eachClient(t, func(t *testing.T, client string) {
		unpaid, n := runGlobalShop(t, client, false)
		assert.Empty(t, unpaid)
		assert.Equal(t, 15, n, "one verdict per payment, exactly once")
	})
}

// Negative control: with the gate off, payments overtake the orders the
// lagging reader has not applied.
func TestGlobalTableWithoutGateMissesOrders(t *testing.T) {
	t.Parallel()
	eachClient(t, func(t *testing.T, client string) {
		unpaid, _ := runGlobalShop(t, client, true)
		assert.NotEmpty(t, unpaid)
	})
}
