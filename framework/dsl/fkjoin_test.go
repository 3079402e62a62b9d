package dsl_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework/driver"
	"github.com/causeway-stream/causeway/framework/dsl"
	"github.com/causeway-stream/causeway/framework/serde"
)

// ordersWithCustomers left-joins orders ("<customer>|<item>") with
// customers on the customer, into "out" as "<item>@<region>" ("none"
// for no customer row).
func ordersWithCustomers(t *testing.T) *dsl.Builder {
	t.Helper()
	b := dsl.NewBuilder("shop")
	orders := dsl.TableFrom(b, "orders", "orders", text)
	customers := dsl.TableFrom(b, "customers", "customers", text)
	dsl.LeftJoinForeignKey(orders, customers, "orders-with-region",
		func(_ string, v string) (string, bool, error) {
			customer, _, ok := strings.Cut(v, "|")
			return customer, ok, nil
		},
		func(_ string, v string, region string, found bool) (string, error) {
			if !found {
				region = "none"
			}
			_, item, _ := strings.Cut(v, "|")
			return item + "@" + region, nil
		}).ToStream().To("out")
	return b
}

// runLaggingCustomers writes a customer, then an order of theirs, in one
// client session, while the customers partition lags; it returns what
// reached "out" for the order, with each result's clock.
func runLaggingCustomers(t *testing.T, opts ...driver.Opt) ([]string, []causal.Clock) {
	topo, err := ordersWithCustomers(t).Build()
	require.NoError(t, err)
	d, err := driver.New(topo, append(opts, driver.DefaultPartitions(2))...)
	require.NoError(t, err)
	var client causal.Session
	customer, _, err := driver.NewInput(d, "customers", serde.String(), serde.String()).Pipe("c-7", "north", driver.InSession(&client))
	require.NoError(t, err)
	d.Pause(customer.Topic, customer.Partition)
	_, _, err = driver.NewInput(d, "orders", serde.String(), serde.String()).Pipe("o-1", "c-7|book", driver.InSession(&client))
	require.NoError(t, err)
	require.NoError(t, d.Run())
	d.Resume(customer.Topic, customer.Partition)
	require.NoError(t, d.Run())
	out, err := driver.NewOutput(d, "out", serde.String(), serde.String()).All()
	require.NoError(t, err)
	var got []string
	var clocks []causal.Clock
	for _, kv := range out {
		got = append(got, kv.Key+"="+kv.Value)
		clocks = append(clocks, kv.Clock)
	}
	return got, clocks
}

// The subscription carries the order's claims over to the customers'
// processor, whose gate holds it until the customer row the client wrote
// first is in: the first and only result has the region, and its clock
// claims both rows it joins, so a gate downstream holds it until they are
// in there too.
func TestForeignKeyJoinWaitsForTheRightRowItsLeftRowFollows(t *testing.T) {
	got, clocks := runLaggingCustomers(t)
	assert.Equal(t, []string{"o-1=book@north"}, got)
	require.Len(t, clocks, 1)
	for _, topic := range []string{"orders", "customers"} {
		claimed := false
		for ch := range clocks[0].All() {
			claimed = claimed || ch.Topic == topic
		}
		assert.True(t, claimed, "the result's clock claims the row of %s it joins: %v", topic, clocks[0])
	}
}

// Negative control: without the gate the subscription overtakes the
// customer, and a result without a region comes first.
func TestForeignKeyJoinWithoutGateAnswersBeforeTheRightRow(t *testing.T) {
	got, _ := runLaggingCustomers(t, driver.GateOff())
	assert.Equal(t, []string{"o-1=book@none", "o-1=book@north"}, got)
}

// Answers to a left row that changed since it asked are dropped by the
// hash check: when an order moves to another customer while the answers
// are on their way, no result joins the new order with the old customer.
func TestForeignKeyJoinDropsAnswersToRowsThatChanged(t *testing.T) {
	for _, parts := range []int32{1, 3} {
		t.Run(fmt.Sprint("partitions=", parts), func(t *testing.T) {
			topo, err := ordersWithCustomers(t).Build()
			require.NoError(t, err)
			d, err := driver.New(topo, driver.DefaultPartitions(parts))
			require.NoError(t, err)
			customers := driver.NewInput(d, "customers", serde.String(), serde.String())
			orders := driver.NewInput(d, "orders", serde.String(), serde.String())
			for c, region := range map[string]string{"c-1": "north", "c-2": "south"} {
				_, _, err := customers.Pipe(c, region)
				require.NoError(t, err)
			}
			require.NoError(t, d.Run())
			// Hold the answers back while the order changes twice.
			for p := range parts {
				d.Pause("orders-with-region-subscription-response-topic", p)
			}
			for _, v := range []string{"c-1|book", "c-2|book"} {
				_, _, err := orders.Pipe("o-1", v)
				require.NoError(t, err)
				require.NoError(t, d.Run())
			}
			for p := range parts {
				d.Resume("orders-with-region-subscription-response-topic", p)
			}
			require.NoError(t, d.Run())
			out, err := driver.NewOutput(d, "out", serde.String(), serde.String()).All()
			require.NoError(t, err)
			var got []string
			for _, kv := range out {
				got = append(got, kv.Key+"="+kv.Value)
			}
			assert.Equal(t, []string{"o-1=book@south"}, got)
			stale := 0
			for _, x := range d.Dropped() {
				if x.Event.Reason == dsl.DropStaleResponse {
					stale++
				}
			}
			assert.Equal(t, 1, stale, "the answer to the first version is reported dropped")
		})
	}
}

// A table made by an aggregation hands its old value on to a step that
// subtracts it (a regrouping) or unsubscribes by it (a foreign-key join),
// as a table read from a topic does: a histogram of word counts moves a
// word from one count to the next, and a foreign-key join from a count to
// its label follows the count.
func TestAggregatesHandTheirOldValueOn(t *testing.T) {
	b := dsl.NewBuilder("histogram")
	counts := dsl.From(b, "words", text).GroupByKey().Count("counts")
	byCount := dsl.GroupTable(counts, "by-count", func(w string, n int64) (string, string, bool, error) {
		return fmt.Sprint(n), w, true, nil
	}, text)
	dsl.CountTable(byCount, "histogram").ToStream().To("out")
	labels := dsl.TableFrom(b, "labels", "labels", text)
	dsl.JoinForeignKey(counts, labels, "labelled", func(_ string, n int64) (string, bool, error) { return fmt.Sprint(n), true, nil },
		func(_ string, _ int64, label string) (string, error) { return label, nil }).ToStream().To("labelled")
	topo, err := b.Build()
	require.NoError(t, err)
	d, err := driver.New(topo, driver.DefaultPartitions(2))
	require.NoError(t, err)
	in := driver.NewInput(d, "words", serde.String(), serde.String())
	for n, label := range map[string]string{"1": "once", "2": "twice"} {
		_, _, err := driver.NewInput(d, "labels", serde.String(), serde.String()).Pipe(n, label)
		require.NoError(t, err)
	}
	for _, w := range []string{"a", "b", "a"} {
		_, _, err := in.Pipe(w, w)
		require.NoError(t, err)
		require.NoError(t, d.Run())
	}
	last := func(topic string, values serde.Serde[int64]) map[string]string {
		out := map[string]string{}
		if values != nil {
			recs, err := driver.NewOutput(d, topic, serde.String(), values).All()
			require.NoError(t, err)
			for _, r := range recs {
				out[r.Key] = fmt.Sprint(r.Value)
			}
			return out
		}
		recs, err := driver.NewOutput(d, topic, serde.String(), serde.String()).All()
		require.NoError(t, err)
		for _, r := range recs {
			out[r.Key] = r.Value
		}
		return out
	}
	assert.Equal(t, map[string]string{"1": "1", "2": "1"}, last("out", serde.Int64()), "a moved from count 1 to count 2")
	assert.Equal(t, map[string]string{"a": "twice", "b": "once"}, last("labelled", nil))
	assert.Empty(t, d.Failed())
}
