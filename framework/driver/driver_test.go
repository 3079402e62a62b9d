package driver_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/driver"
	"github.com/causeway-stream/causeway/framework/serde"
	"github.com/causeway-stream/causeway/framework/store"
)

// shop: a payment processor reads orders and payments; a payment for an
// order it has not seen is an anomaly.
func shop(t *testing.T) *framework.Topology {
	t.Helper()
	topo, err := framework.NewBuilder("shop").
		Processor("payments", func() framework.Processor {
			return framework.ProcessorFunc(func(ctx framework.Context, rec framework.Record) error {
				orders, err := ctx.KeyValueStore("orders")
				if err != nil {
					return err
				}
				if rec.Topic == "orders" {
					return orders.Put(rec.Key, rec.Value)
				}
				_, known, err := orders.Get(rec.Key)
				if err != nil {
					return err
				}
				verdict := "paid"
				if !known {
					verdict = "payment-for-unknown-order"
				}
				return ctx.Forward(framework.Record{Key: rec.Key, Value: []byte(verdict)})
			})
		}, framework.From("orders", "payments"), framework.To("verdicts"),
			framework.Stores(framework.KeyValueStore("orders"))).
		Build()
	require.NoError(t, err)
	return topo
}

func runShop(t *testing.T, opts ...driver.Opt) []string {
	t.Helper()
	d, err := driver.New(shop(t), opts...)
	require.NoError(t, err)
	orders := driver.NewInput(d, "orders", serde.String(), serde.String())
	payments := driver.NewInput(d, "payments", serde.String(), serde.String())
	verdicts := driver.NewOutput(d, "verdicts", serde.String(), serde.String())

	// The orders partition lags: the client writes the order, then its
	// payment, but the payment reaches the processor first.
	d.Pause("orders", 0)
	var client causal.Session
	_, _, err = orders.Pipe("o-1", "2 books", driver.InSession(&client))
	require.NoError(t, err)
	_, _, err = payments.Pipe("o-1", "20 EUR", driver.InSession(&client))
	require.NoError(t, err)
	require.NoError(t, d.Run())

	early, err := verdicts.ReadNew()
	require.NoError(t, err)
	d.Resume("orders", 0)
	require.NoError(t, d.Run())
	late, err := verdicts.ReadNew()
	require.NoError(t, err)
	var out []string
	for _, kv := range early {
		out = append(out, "before resume: "+kv.Value)
	}
	for _, kv := range late {
		out = append(out, "after resume: "+kv.Value)
	}
	return out
}

func TestGateHoldsEffectUntilItsCause(t *testing.T) {
	assert.Equal(t, []string{"after resume: paid"}, runShop(t),
		"the payment must wait for its order")
}

// Negative control: the same run with the gate off shows the anomaly the
// gate prevents.
func TestWithoutGateEffectOvertakesCause(t *testing.T) {
	assert.Equal(t, []string{"before resume: payment-for-unknown-order"}, runShop(t, driver.GateOff()))
}

// While the payment is held, the task's status names what it waits for.
func TestStatusShowsTheHeldRecordsClaim(t *testing.T) {
	d, err := driver.New(shop(t))
	require.NoError(t, err)
	d.Pause("orders", 0)
	var client causal.Session
	_, _, err = driver.NewInput(d, "orders", serde.String(), serde.String()).Pipe("o-1", "x", driver.InSession(&client))
	require.NoError(t, err)
	_, _, err = driver.NewInput(d, "payments", serde.String(), serde.String()).Pipe("o-1", "y", driver.InSession(&client))
	require.NoError(t, err)
	require.NoError(t, d.Run())
	st := d.Tasks()
	require.Len(t, st, 1)
	assert.Equal(t, 1, st[0].Held)
	var blocked []causal.ChannelStatus
	for _, c := range st[0].Channels {
		if c.Blocked {
			blocked = append(blocked, c)
		}
	}
	require.Len(t, blocked, 1)
	assert.Equal(t, causal.Channel{Topic: "payments"}, blocked[0].Channel)
	assert.Equal(t, causal.Channel{Topic: "orders"}, blocked[0].WaitingFor)
	assert.EqualValues(t, 0, blocked[0].WaitingOffset)
}

// Outputs carry a stamp that claims the record that caused them.
func TestOutputsAreStamped(t *testing.T) {
	d, err := driver.New(shop(t))
	require.NoError(t, err)
	_, off, err := driver.NewInput(d, "payments", serde.String(), serde.String()).Pipe("o-9", "1 EUR")
	require.NoError(t, err)
	require.NoError(t, d.Run())
	out, err := driver.NewOutput(d, "verdicts", serde.String(), serde.String()).All()
	require.NoError(t, err)
	require.Len(t, out, 1)
	got, ok := out[0].Clock.Get(causal.Channel{Topic: "payments"})
	require.True(t, ok, "clock %v", out[0].Clock)
	assert.Equal(t, off, got)
}

// A task restarted from its committed state carries on where it was: its
// store is restored from the changelog and nothing is processed twice.
func TestRestartTaskRestoresState(t *testing.T) {
	d, err := driver.New(shop(t))
	require.NoError(t, err)
	orders := driver.NewInput(d, "orders", serde.String(), serde.String())
	payments := driver.NewInput(d, "payments", serde.String(), serde.String())
	_, _, err = orders.Pipe("o-1", "x")
	require.NoError(t, err)
	require.NoError(t, d.Run())
	require.NoError(t, d.RestartTask("payments/0"))
	_, _, err = payments.Pipe("o-1", "y")
	require.NoError(t, err)
	require.NoError(t, d.Run())
	out, err := driver.NewOutput(d, "verdicts", serde.String(), serde.String()).All()
	require.NoError(t, err)
	require.Len(t, out, 1)
	assert.Equal(t, "paid", out[0].Value)
}

func TestWallClockPunctuation(t *testing.T) {
	var fired []time.Time
	topo, err := framework.NewBuilder("ticks").
		Processor("p", func() framework.Processor {
			return &ticker{fired: &fired}
		}, framework.From("in")).
		Build()
	require.NoError(t, err)
	d, err := driver.New(topo)
	require.NoError(t, err)
	start := d.Now()
	require.NoError(t, d.AdvanceWallClock(30*time.Second))
	assert.Empty(t, fired)
	require.NoError(t, d.AdvanceWallClock(45*time.Second))
	require.NoError(t, d.AdvanceWallClock(2*time.Minute))
	assert.Equal(t, []time.Time{start.Add(75 * time.Second), start.Add(195 * time.Second)}, fired)
}

type ticker struct{ fired *[]time.Time }

func (p *ticker) Init(ctx framework.Context) error {
	_, err := ctx.Schedule(time.Minute, framework.WallClockTime, func(_ framework.Context, now time.Time) error {
		*p.fired = append(*p.fired, now)
		return nil
	})
	return err
}
func (p *ticker) Process(framework.Context, framework.Record) error { return nil }
func (p *ticker) Close() error                                      { return nil }

// A restart keeps the task's stream time: a record late before it is late
// after it too.
func TestRestartKeepsStreamTime(t *testing.T) {
	var seen []time.Time
	topo, err := framework.NewBuilder("late").Processor("p", func() framework.Processor {
		return framework.ProcessorFunc(func(ctx framework.Context, rec framework.Record) error {
			seen = append(seen, ctx.StreamTime())
			return nil
		})
	}, framework.From("in")).Build()
	require.NoError(t, err)
	d, err := driver.New(topo)
	require.NoError(t, err)
	in := driver.NewInput(d, "in", serde.String(), serde.String())
	base := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	_, _, err = in.PipeAt("k", "new", base.Add(time.Hour), driver.ToPartition(0))
	require.NoError(t, err)
	require.NoError(t, d.Run())
	require.NoError(t, d.RestartTask("p/0"))
	_, _, err = in.PipeAt("k", "old", base, driver.ToPartition(0))
	require.NoError(t, err)
	require.NoError(t, d.Run())
	require.Len(t, seen, 2)
	assert.Equal(t, base.Add(time.Hour), seen[1], "stream time went back with the restart")
}

// Of the records the gate releases together, the one with the smallest
// timestamp is processed first, as Kafka Streams chooses among its
// partitions; causal order still comes first.
func TestReleasedRecordsGoInTimestampOrder(t *testing.T) {
	var order []string
	topo, err := framework.NewBuilder("order").Processor("p", func() framework.Processor {
		return framework.ProcessorFunc(func(_ framework.Context, rec framework.Record) error {
			order = append(order, rec.Topic+":"+string(rec.Value))
			return nil
		})
	}, framework.From("x", "b", "c")).Build()
	require.NoError(t, err)
	d, err := driver.New(topo)
	require.NoError(t, err)
	d.Pause("x", 0)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// Two clients both follow the record on x; the later one writes the
	// older record.
	var first, second causal.Session
	xch, xoff, err := driver.NewInput(d, "x", serde.String(), serde.String()).PipeAt("k", "cause", t0, driver.InSession(&first))
	require.NoError(t, err)
	second.Produced(xch, xoff)
	_, _, err = driver.NewInput(d, "b", serde.String(), serde.String()).PipeAt("k", "late", t0.Add(20*time.Second), driver.InSession(&first))
	require.NoError(t, err)
	_, _, err = driver.NewInput(d, "c", serde.String(), serde.String()).PipeAt("k", "early", t0.Add(10*time.Second), driver.InSession(&second))
	require.NoError(t, err)
	require.NoError(t, d.Run())
	require.Empty(t, order, "both wait for the record on x")
	d.Resume("x", 0)
	require.NoError(t, d.Run())
	assert.Equal(t, []string{"x:cause", "c:early", "b:late"}, order)
}

// A global table is read-only to the tasks that read it, and its
// positions are the worker's: no task commits them to the group.
func TestGlobalTableIsReadOnlyAndUncommitted(t *testing.T) {
	var writeErr error
	topo, err := framework.NewBuilder("g").Processor("p", func() framework.Processor {
		return framework.ProcessorFunc(func(ctx framework.Context, rec framework.Record) error {
			rates, err := ctx.KeyValueStore("rates")
			if err != nil {
				return err
			}
			writeErr = rates.Put([]byte("EUR"), []byte("0"))
			v, _, err := rates.Get(rec.Key)
			if err != nil {
				return err
			}
			return ctx.Forward(framework.Record{Key: rec.Key, Value: v})
		})
	}, framework.From("prices"), framework.To("converted"), framework.Global("rates", "rates")).Build()
	require.NoError(t, err)
	d, err := driver.New(topo, driver.Partitions("rates", 2))
	require.NoError(t, err)
	_, _, err = driver.NewInput(d, "rates", serde.String(), serde.String()).Pipe("EUR", "1.1")
	require.NoError(t, err)
	require.NoError(t, d.Run())
	_, _, err = driver.NewInput(d, "prices", serde.String(), serde.String()).Pipe("EUR", "10")
	require.NoError(t, err)
	require.NoError(t, d.Run())
	out, err := driver.NewOutput(d, "converted", serde.String(), serde.String()).All()
	require.NoError(t, err)
	require.Len(t, out, 1)
	assert.Equal(t, "1.1", out[0].Value, "the task reads the global table")
	assert.ErrorIs(t, writeErr, store.ErrReadOnly)
	assert.Equal(t, map[causal.Channel]int64{{Topic: "prices"}: 1}, d.GroupOffsets(), "only the task's own input is committed")
}
