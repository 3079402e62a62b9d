package dsl_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/driver"
	"github.com/causeway-stream/causeway/framework/dsl"
	"github.com/causeway-stream/causeway/framework/serde"
	"github.com/causeway-stream/causeway/operators"
)

var text = serde.Codec[string, string]{Key: serde.String(), Value: serde.String()}

// internalTopics lists the topology's internal topics.
func internalTopics(topo *framework.Topology) []string {
	var out []string
	for _, ti := range topo.Topics() {
		if ti.Internal {
			out = append(out, ti.Name)
		}
	}
	return out
}

func processorNames(topo *framework.Topology) []string {
	var out []string
	for _, p := range topo.Processors() {
		out = append(out, p.Name)
	}
	return out
}

// A map that changes the key, a filter and a count fuse into two
// processors with exactly one topic between them: the repartition topic
// the count needs. Counts come out right through it.
func TestFusedMapFilterCountHasOneRepartitionTopic(t *testing.T) {
	b := dsl.NewBuilder("shop")
	byUser := dsl.Map(dsl.From(b, "views", text), func(page, user string) (string, string, error) { return user, page, nil })
	byUser.Filter(func(_, page string) bool { return page != "/health" }).
		GroupByKey().Count("views-per-user").ToStream().To("counts")
	topo, err := b.Build()
	require.NoError(t, err)

	assert.Equal(t, []string{"views-per-user-repartition"}, internalTopics(topo))
	require.Len(t, topo.Processors(), 2)
	first, second := topo.Processors()[0], topo.Processors()[1]
	assert.Equal(t, []string{"views"}, first.Inputs)
	assert.Equal(t, []string{"views-per-user-repartition"}, []string{first.Outputs[0].Topic})
	assert.Equal(t, []string{"views-per-user-repartition"}, second.Inputs)
	assert.Equal(t, "counts", second.Outputs[0].Topic)
	assert.Equal(t, []string{"views-per-user"}, []string{second.Stores[0].Name})

	d, err := driver.New(topo, driver.DefaultPartitions(3))
	require.NoError(t, err)
	views := driver.NewInput(d, "views", serde.String(), serde.String())
	for _, v := range [][2]string{{"/a", "ann"}, {"/b", "bob"}, {"/health", "ann"}, {"/c", "ann"}, {"/a", "bob"}, {"/d", "cy"}} {
		_, _, err := views.Pipe(v[0], v[1])
		require.NoError(t, err)
	}
	require.NoError(t, d.Run())
	counts, err := driver.NewOutput(d, "counts", serde.String(), serde.Int64()).All()
	require.NoError(t, err)
	last := map[string]int64{}
	for _, kv := range counts {
		last[kv.Key] = kv.Value
	}
	assert.Equal(t, map[string]int64{"ann": 2, "bob": 2, "cy": 1}, last)
}

// Steps that keep the key need no repartition: a value change and a count
// are one processor, with no internal topic at all.
func TestNoRepartitionWhileTheKeyStays(t *testing.T) {
	b := dsl.NewBuilder("lengths")
	dsl.MapValues(dsl.From(b, "words", text), func(_, w string) (int64, error) { return int64(len(w)), nil }).
		Filter(func(_ string, n int64) bool { return n > 0 }).
		GroupByKey().Count("seen").ToStream().To("out")
	topo, err := b.Build()
	require.NoError(t, err)
	assert.Empty(t, internalTopics(topo))
	assert.Equal(t, []string{"aggregate-seen"}, processorNames(topo))
}

// verdicts returns the values written to "verdicts", in order.
func verdicts(t *testing.T, d *driver.Driver) []string {
	t.Helper()
	out, err := driver.NewOutput(d, "verdicts", serde.String(), serde.String()).All()
	require.NoError(t, err)
	var got []string
	for _, kv := range out {
		got = append(got, kv.Value)
	}
	return got
}

// shop joins payments with the orders table; paid orders go out.
func shop(t *testing.T) *framework.Topology {
	b := dsl.NewBuilder("shop")
	orders := dsl.TableFrom(b, "orders", "orders", text)
	dsl.LeftJoin(dsl.From(b, "payments", text), orders, func(_, pay, order string, found bool) (string, error) {
		if !found {
			return "payment-for-unknown-order", nil
		}
		return "paid: " + order, nil
	}).To("verdicts")
	topo, err := b.Build()
	require.NoError(t, err)
	return topo
}

func runShop(t *testing.T, opts ...driver.Opt) []string {
	d, err := driver.New(shop(t), opts...)
	require.NoError(t, err)
	// The orders partition lags: the client writes the order, then pays,
	// and the payment reaches the processor first.
	d.Pause("orders", 0)
	var client causal.Session
	_, _, err = driver.NewInput(d, "orders", serde.String(), serde.String()).Pipe("o-1", "2 books", driver.InSession(&client))
	require.NoError(t, err)
	_, _, err = driver.NewInput(d, "payments", serde.String(), serde.String()).Pipe("o-1", "20 EUR", driver.InSession(&client))
	require.NoError(t, err)
	require.NoError(t, d.Run())
	d.Resume("orders", 0)
	require.NoError(t, d.Run())
	return verdicts(t, d)
}

// A fused join is one processor to the gate: the payment waits for the
// order it follows, whatever partition lags.
func TestFusedJoinWaitsForTheRowItsRecordFollows(t *testing.T) {
	assert.Equal(t, []string{"paid: 2 books"}, runShop(t))
}

// Negative control: without the gate the payment overtakes its order.
func TestFusedJoinWithoutGateMissesTheRow(t *testing.T) {
	assert.Equal(t, []string{"payment-for-unknown-order"}, runShop(t, driver.GateOff()))
}

// What a fused chain emits carries the same stamps as what one
// hand-written processor doing the same work emits: fusing changes nothing
// the causal layer sees.
func TestFusedChainStampsAsOneProcessor(t *testing.T) {
	upper := func(_, v string) (string, error) { return strings.ToUpper(v), nil }
	keep := func(_, v string) bool { return !strings.HasPrefix(v, "SKIP") }

	fb := dsl.NewBuilder("chain")
	left := dsl.MapValues(dsl.From(fb, "a", text), upper)
	left.Merge(dsl.From(fb, "b", text)).Filter(keep).To("out")
	fused, err := fb.Build()
	require.NoError(t, err)

	hand, err := framework.NewBuilder("chain").Processor("by-hand", func() framework.Processor {
		return framework.ProcessorFunc(func(ctx framework.Context, rec framework.Record) error {
			if rec.Topic == "a" {
				rec.Value = []byte(strings.ToUpper(string(rec.Value)))
			}
			if !keep("", string(rec.Value)) {
				return nil
			}
			return ctx.Forward(rec)
		})
	}, framework.From("a", "b"), framework.To("out")).Build()
	require.NoError(t, err)

	run := func(topo *framework.Topology) []string {
		d, err := driver.New(topo, driver.DefaultPartitions(2))
		require.NoError(t, err)
		var s causal.Session
		for i, in := range [][3]string{{"a", "k1", "x"}, {"b", "k2", "y"}, {"a", "k2", "skip"}, {"b", "k1", "z"}, {"a", "k1", "w"}} {
			opts := []driver.PipeOpt{driver.ToPartition(int32(i % 2))}
			if i%2 == 0 {
				opts = append(opts, driver.InSession(&s))
			}
			_, _, err := driver.NewInput(d, in[0], serde.String(), serde.String()).Pipe(in[1], in[2], opts...)
			require.NoError(t, err)
		}
		require.NoError(t, d.Run())
		out, err := driver.NewOutput(d, "out", serde.String(), serde.String()).All()
		require.NoError(t, err)
		var got []string
		for _, kv := range out {
			got = append(got, kv.Key+"="+kv.Value+" "+kv.Clock.String())
		}
		return got
	}
	want := run(hand)
	require.Len(t, want, 4)
	assert.Equal(t, want, run(fused))
}

// The processor-level builder and the DSL mix: a custom processor reads
// what a fused one writes.
func TestCustomProcessorsBesideFusedOnes(t *testing.T) {
	b := dsl.NewBuilder("mixed")
	dsl.MapValues(dsl.From(b, "in", text), func(_, v string) (string, error) { return v + "!", nil }).To("mid")
	b.Processor("custom", operators.MapValues(text, serde.String(), func(_, v string) (string, error) { return v + "?", nil }),
		framework.From("mid"), framework.To("out"))
	topo, err := b.Build()
	require.NoError(t, err)
	d, err := driver.New(topo)
	require.NoError(t, err)
	_, _, err = driver.NewInput(d, "in", serde.String(), serde.String()).Pipe("k", "v")
	require.NoError(t, err)
	require.NoError(t, d.Run())
	out, err := driver.NewOutput(d, "out", serde.String(), serde.String()).All()
	require.NoError(t, err)
	require.Len(t, out, 1)
	assert.Equal(t, "v!?", out[0].Value)
}

func TestBuildRefusesMistakes(t *testing.T) {
	tests := []struct {
		name  string
		build func(b *dsl.Builder)
		want  string
	}{
		{"a topic read with two types", func(b *dsl.Builder) {
			dsl.From(b, "in", text).To("out")
			dsl.From(b, "in", serde.Codec[string, int64]{Key: serde.String(), Value: serde.Int64()}).To("out2")
		}, `topic "in" is read twice`},
		{"a store declared twice", func(b *dsl.Builder) {
			dsl.From(b, "in", text).GroupByKey().Count("n").ToStream().To("out")
			dsl.From(b, "in2", text).GroupByKey().Count("n").ToStream().To("out2")
		}, `store "n" declared by both`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := dsl.NewBuilder("bad")
			tt.build(b)
			_, err := b.Build()
			require.ErrorIs(t, err, framework.ErrInvalidTopology)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	b := dsl.NewBuilder("twice")
	dsl.From(b, "in", text).To("out")
	_, err := b.Build()
	require.NoError(t, err)
	_, err = b.Build()
	assert.True(t, errors.Is(err, dsl.ErrBuilt))
}

// Keys and values of types with no serde given use the defaults.
func TestDefaultSerdes(t *testing.T) {
	type point struct{ X, Y int }
	tests := []struct {
		name string
		got  func() ([]byte, error)
		want string
	}{
		{"string", func() ([]byte, error) { return dsl.Default[string]().Serialize("hi") }, "hi"},
		{"bytes", func() ([]byte, error) { return dsl.Default[[]byte]().Serialize([]byte{1, 2}) }, "\x01\x02"},
		{"int64", func() ([]byte, error) { return dsl.Default[int64]().Serialize(258) }, "\x00\x00\x00\x00\x00\x00\x01\x02"},
		{"struct", func() ([]byte, error) { return dsl.Default[point]().Serialize(point{1, 2}) }, `{"X":1,"Y":2}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := tt.got()
			require.NoError(t, err)
			assert.Equal(t, tt.want, string(b))
		})
	}
}

// Run as an application, the topology's repartition topic carries the
// application id, and the fused processors still find their inputs and
// outputs by the names they were built with.
func TestRepartitionTopicNamedAfterTheApplication(t *testing.T) {
	b := dsl.NewBuilder("wordcount")
	words := dsl.FlatMapValues(dsl.From(b, "lines", text), func(_, line string) ([]string, error) { return strings.Fields(line), nil })
	dsl.GroupBy(words, func(_, w string) (string, error) { return w, nil }).Count("word-counts").ToStream().To("counts")
	topo, err := b.Build()
	require.NoError(t, err)
	assert.Equal(t, []string{"shop-word-counts-repartition"}, internalTopics(topo.ForApplication("shop")))

	d, err := driver.New(topo, driver.ApplicationID("shop"), driver.DefaultPartitions(2))
	require.NoError(t, err)
	_, _, err = driver.NewInput(d, "lines", serde.String(), serde.String()).Pipe("1", "to be or not to be")
	require.NoError(t, err)
	require.NoError(t, d.Run())
	repartitioned, err := d.Records("shop-word-counts-repartition")
	require.NoError(t, err)
	assert.Len(t, repartitioned, 6)
	_, err = d.Records("word-counts-repartition")
	assert.ErrorIs(t, err, driver.ErrUnknownTopic)
	counts, err := driver.NewOutput(d, "counts", serde.String(), serde.Int64()).All()
	require.NoError(t, err)
	last := map[string]int64{}
	for _, kv := range counts {
		last[kv.Key] = kv.Value
	}
	assert.Equal(t, map[string]int64{"to": 2, "be": 2, "or": 1, "not": 1}, last)
}

// shopWithGlobalTable joins payments, keyed by payment id, with a global
// table of orders on the order id each payment names: no co-partitioning
// and no repartition.
func shopWithGlobalTable(t *testing.T) *framework.Topology {
	b := dsl.NewBuilder("shop")
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

func runGlobalShop(t *testing.T, opts ...driver.Opt) []string {
	d, err := driver.New(shopWithGlobalTable(t), append([]driver.Opt{driver.Partitions("orders", 3), driver.Partitions("payments", 2)}, opts...)...)
	require.NoError(t, err)
	orders := driver.NewInput(d, "orders", serde.String(), serde.String())
	// The order lands on a partition of the global table's topic that
	// lags; the payment, written after it in the same session, on another
	// topic and partition.
	var client causal.Session
	ch, _, err := orders.Pipe("o-7", "2 books", driver.InSession(&client))
	require.NoError(t, err)
	d.Pause("orders", ch.Partition)
	_, _, err = driver.NewInput(d, "payments", serde.String(), serde.String()).Pipe("pay-1", "o-7", driver.InSession(&client))
	require.NoError(t, err)
	require.NoError(t, d.Run())
	d.Resume("orders", ch.Partition)
	require.NoError(t, d.Run())
	return verdicts(t, d)
}

// A global table needs no co-partitioning: the topology reads payments
// and orders with different partition counts, in one processor, and adds
// no internal topic. The payment waits for the order it follows, whatever
// partition of the global table lags.
func TestGlobalTableJoinWaitsForTheRowItsRecordFollows(t *testing.T) {
	topo := shopWithGlobalTable(t)
	assert.Empty(t, internalTopics(topo))
	assert.Equal(t, []framework.GlobalTable{{Topic: "orders", Store: "orders"}}, topo.GlobalTables())
	assert.Equal(t, []string{"paid: 2 books"}, runGlobalShop(t))
}

// Negative control: without the gate the payment overtakes its order.
func TestGlobalTableJoinWithoutGateMissesTheRow(t *testing.T) {
	assert.Equal(t, []string{"payment-for-unknown-order o-7"}, runGlobalShop(t, driver.GateOff()))
}

// A fragment serves at the processor level only when its steps make one
// processor that writes nowhere itself.
func TestFragmentRefusesWhatIsNotOneProcessor(t *testing.T) {
	tests := []struct {
		name  string
		steps func(f *dsl.Builder) dsl.Stream[string, int64]
	}{
		{"a repartition", func(f *dsl.Builder) dsl.Stream[string, int64] {
			return dsl.GroupBy(dsl.From(f, "in", text), func(_, v string) (string, error) { return v, nil }).Count("n").ToStream()
		}},
		{"two inputs nothing joins", func(f *dsl.Builder) dsl.Stream[string, int64] {
			dsl.From(f, "other", text).Foreach(func(string, string) error { return nil })
			return dsl.From(f, "in", text).GroupByKey().Count("n").ToStream()
		}},
		{"a topic of its own", func(f *dsl.Builder) dsl.Stream[string, int64] {
			in := dsl.From(f, "in", text)
			in.To("elsewhere")
			return in.GroupByKey().Count("n").ToStream()
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := dsl.Fragment(tt.steps)
			assert.ErrorIs(t, err, dsl.ErrNotOneProcessor)
		})
	}
	newProc, opts, err := dsl.Fragment(func(f *dsl.Builder) dsl.Stream[string, int64] {
		return dsl.From(f, "in", text).GroupByKey().Count("n").ToStream()
	})
	require.NoError(t, err)
	topo, err := framework.NewBuilder("one").Processor("count", newProc, append(opts, framework.To("out"))...).Build()
	require.NoError(t, err)
	p, _ := topo.Processor("count")
	assert.Equal(t, []string{"in"}, p.Inputs)
	assert.Equal(t, []framework.StoreSpec{framework.KeyValueStore("n"), framework.KeyValueStore("n-time")}, p.Stores, "the count and its latest times")
}

// Repartition topics take the partition count of what they must be
// co-partitioned with (the table a rekeyed stream joins), or else of
// the topic that feeds them, as Kafka Streams sizes them: the join below
// runs with clicks and users of different partition counts.
func TestRepartitionTopicsArePartitionedLikeWhatTheyMeet(t *testing.T) {
	b := dsl.NewBuilder("clicks")
	clicks := dsl.From(b, "clicks", text)
	byUser := dsl.Map(clicks, func(page, user string) (string, string, error) { return user, page, nil })
	dsl.Join(byUser, dsl.TableFrom(b, "users", "users", text), func(user, page, name string) (string, error) {
		return name + " saw " + page, nil
	}).To("seen")
	dsl.GroupBy(clicks, func(_, user string) (string, error) { return user, nil }).Count("per-user").ToStream().To("counts")
	topo, err := b.Build()
	require.NoError(t, err)
	join, _ := topo.Topic("users-join-repartition")
	count, _ := topo.Topic("per-user-repartition")
	assert.Equal(t, "users", join.PartitionsLike, "co-partitioned with the table it joins")
	assert.Equal(t, "clicks", count.PartitionsLike, "as many partitions as what feeds it")

	d, err := driver.New(topo, driver.Partitions("users", 3), driver.Partitions("clicks", 5))
	require.NoError(t, err)
	_, _, err = driver.NewInput(d, "users", serde.String(), serde.String()).Pipe("u1", "Ada")
	require.NoError(t, err)
	require.NoError(t, d.Run())
	_, _, err = driver.NewInput(d, "clicks", serde.String(), serde.String()).Pipe("/home", "u1")
	require.NoError(t, err)
	require.NoError(t, d.Run())
	out, err := driver.NewOutput(d, "seen", serde.String(), serde.String()).All()
	require.NoError(t, err)
	require.Len(t, out, 1)
	assert.Equal(t, "Ada saw /home", out[0].Value)
}
