package runtime_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/runtime"
	"go.uber.org/zap/zaptest"
)

// A processor that fails part-way through an interval, after the outputs of
// earlier records were already sent into the open transaction: the
// transaction is aborted (those outputs never become visible without their
// offsets), the other task redoes its work, and the failed task stays
// failed instead of failing, aborting and rebuilding in a loop.
func TestProcessingFailureAfterStreamedOutputs(t *testing.T) {
	t.Parallel()
	eachClient(t, func(t *testing.T, client string) {
		b := startBroker(t)
		createTopics(t, b.Addr(), 2, "orders", "payments", "verdicts")
		p := newProducer(t, b.Addr(), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(50*time.Millisecond))
		send := func(topic string, partition int32, key, value string) {
			p.Produce(context.Background(), &kgo.Record{Topic: topic, Partition: partition, Key: []byte(key), Value: []byte(value)},
				func(_ *kgo.Record, err error) { assert.NoError(t, err) })
		}
		// Everything arrives in one burst: the good payments' verdicts are
		// streamed before the poison fails the task.
		send("orders", 0, "a", "order a")
		send("orders", 1, "b", "order b")
		for i := range 50 {
			send("payments", 0, "a", "a-good"+strings.Repeat("!", i%3))
			send("payments", 1, "b", "b-good")
		}
		send("payments", 0, "a", "a-poison")
		require.NoError(t, p.Flush(context.Background()))

		m := runtime.NewMetrics()
		var armed atomic.Bool
		armed.Store(true)
		w, err := runtime.NewStreamThread(testConfigFor(t, client, b.Addr(), "shop-poison"), poisonTopology(&armed), zaptest.NewLogger(t), m)
		require.NoError(t, err)
		startCtx, cancelStart := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancelStart()
		require.NoError(t, w.Start(startCtx))
		require.Eventually(t, func() bool {
			for _, ts := range w.Status().Tasks {
				if ts.ID == "ledger/0" {
					return ts.State == runtime.StateFailed && strings.Contains(ts.LastError, "poison payment")
				}
			}
			return false
		}, 30*time.Second, 20*time.Millisecond)

		aborts := testutil.ToFloat64(m.Aborts)
		time.Sleep(2 * time.Second)
		assert.Equal(t, aborts, testutil.ToFloat64(m.Aborts), "the failed task must not make the worker abort over and over")

		// The bug is fixed; the task restarts from its committed state. Every
		// payment now has exactly one verdict: none of what was sent before the
		// failure survived the abort.
		armed.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(t, w.RestartTask(ctx, "ledger/0"))
		verdicts := readCommitted(t, b.Addr(), "verdicts", 103, 30*time.Second)
		counts := map[string]int{}
		for _, v := range verdicts {
			counts[string(v.Key)]++
		}
		// The ledger forwards orders too: a is its order, 50 good payments and
		// the formerly poisonous one; b is its order and 50 payments.
		assert.Equal(t, map[string]int{"a": 52, "b": 51}, counts, "one output per input record")
		assert.NoError(t, w.Stop(ctx))
	})
}

// poisonTopology is a ledger that rejects payments ending in "poison"
// while armed is set: a processor bug that a fix (disarming) cures.
func poisonTopology(armed *atomic.Bool) *framework.Topology {
	topo, err := framework.NewBuilder("poison").
		Processor("ledger", func() framework.Processor {
			return framework.ProcessorFunc(func(ctx framework.Context, rec framework.Record) error {
				if rec.Topic == "payments" && strings.HasSuffix(string(rec.Value), "poison") && armed.Load() {
					return errors.New("poison payment")
				}
				return ctx.Forward(framework.Record{Key: rec.Key, Value: rec.Value})
			})
		}, framework.From("orders", "payments"), framework.To("verdicts")).
		Build()
	if err != nil {
		panic(err) // a constant fixture
	}
	return topo
}
