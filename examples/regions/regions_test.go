package main

import (
	"context"
	"encoding/json"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/driver"
	"github.com/causeway-stream/causeway/framework/serde"
)

// The topology keeps each region's total: a customer who moves takes
// their orders' amounts along, a changed order replaces its amount, a
// deleted one takes it out; an order whose customer is not there yet
// counts once the customer comes.
func TestTopologyMovesTotalsWithTheirCustomers(t *testing.T) {
	topo, err := Topology()
	require.NoError(t, err)
	for _, parts := range []int32{1, 3} {
		d, err := driver.New(topo, driver.DefaultPartitions(parts))
		require.NoError(t, err)
		write := func(topic, key string, value any) {
			t.Helper()
			rec := framework.Record{Key: []byte(key)}
			if value != nil {
				rec.Value, err = json.Marshal(value)
				require.NoError(t, err)
			}
			_, _, err := d.Pipe(topic, rec)
			require.NoError(t, err)
			require.NoError(t, d.Run())
		}
		totals := func() map[string]int64 {
			t.Helper()
			recs, err := driver.NewOutput(d, TotalsTopic, serde.String(), serde.Int64()).All()
			require.NoError(t, err)
			out := map[string]int64{}
			for _, r := range recs {
				out[r.Key] = r.Value
			}
			return out
		}
		write(CustomersTopic, "ann", Customer{Name: "Ann", Region: "emea"})
		write(CustomersTopic, "bob", Customer{Name: "Bob", Region: "apac"})
		write(OrdersTopic, "o-1", Order{Customer: "ann", Amount: 100})
		write(OrdersTopic, "o-2", Order{Customer: "bob", Amount: 50})
		write(OrdersTopic, "o-3", Order{Customer: "ann", Amount: 25})
		write(OrdersTopic, "o-4", Order{Customer: "cat", Amount: 7})
		assert.Equal(t, map[string]int64{"emea": 125, "apac": 50}, totals(), "partitions=%d", parts)
		write(CustomersTopic, "ann", Customer{Name: "Ann", Region: "apac"})
		assert.Equal(t, map[string]int64{"emea": 0, "apac": 175}, totals(), "ann's orders moved to apac, partitions=%d", parts)
		write(OrdersTopic, "o-2", Order{Customer: "bob", Amount: 60})
		write(OrdersTopic, "o-1", nil)
		write(CustomersTopic, "cat", Customer{Name: "Cat", Region: "americas"})
		assert.Equal(t, map[string]int64{"emea": 0, "apac": 85, "americas": 7}, totals(), "partitions=%d", parts)
		assert.Empty(t, d.Failed())
	}
}

// The demo on the embedded broker, with the worker's default client:
// the totals before and after the changes match the ones computed from
// the rows written.
func TestDemoEndToEnd(t *testing.T) {
	topo, err := Topology()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := runDemo(ctx, topo, demoOptions{customers: 12, orders: 90, partitions: 2, timeout: time.Minute}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, 3, res.Moved)
	assert.Empty(t, res.mismatch())
	assert.NotEqual(t, res.WantBefore, res.WantAfter, "the changes move totals")
}

// The demo's own check can fail: a wrong total is reported, with its
// stage and region.
func TestDemoMismatchIsReported(t *testing.T) {
	ok := demoResult{Before: map[string]int64{"emea": 3}, WantBefore: map[string]int64{"emea": 3},
		After: map[string]int64{"apac": 3}, WantAfter: map[string]int64{"apac": 3, "emea": 0}}
	assert.Empty(t, ok.mismatch())
	bad := ok
	bad.After = map[string]int64{"apac": 2}
	assert.Equal(t, "after the changes, apac totals 2, want 3", bad.mismatch())
	bad = ok
	bad.Before = map[string]int64{}
	assert.Equal(t, "before the changes, emea totals 0, want 3", bad.mismatch())
}
