package sinkworker_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/connect"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/runtime/internal/transport"
	"github.com/causeway-stream/causeway/runtime/sinkworker"
)

// commitsTask is a sink task that notes the keys of the records each of
// its commits wrote.
type commitsTask struct {
	connect.SinkTask
	mu      sync.Mutex
	current []string
	commits [][]string
}

func (c *commitsTask) Put(ctx context.Context, recs []connect.Record) ([]connect.Rejected, error) {
	c.mu.Lock()
	for _, r := range recs {
		c.current = append(c.current, string(r.Key))
	}
	c.mu.Unlock()
	return c.SinkTask.Put(ctx, recs)
}

func (c *commitsTask) Commit(ctx context.Context, moves []connect.Move) error {
	if err := c.SinkTask.Commit(ctx, moves); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.current) > 0 {
		c.commits = append(c.commits, c.current)
	}
	c.current = nil
	return nil
}

func (c *commitsTask) Abort(ctx context.Context) error {
	c.mu.Lock()
	c.current = nil
	c.mu.Unlock()
	return c.SinkTask.Abort(ctx)
}

// split counts the commits that hold one record of a source transaction
// without the other: transaction k is customer ck and order ok, as the
// test wrote them.
func (c *commitsTask) split() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, keys := range c.commits {
		in := map[string]bool{}
		for _, k := range keys {
			in[k] = true
		}
		for _, k := range keys {
			if rest, ok := strings.CutPrefix(k, "c"); ok && !in["o"+rest] {
				n++
			}
			if rest, ok := strings.CutPrefix(k, "o"); ok && !in["c"+rest] {
				n++
			}
		}
	}
	return n
}

// A sink given the transaction topic commits each source transaction
// whole, though its order lags behind its customer and the worker
// commits after every record it can; a sink without it (as Kafka
// Connect's sinks run: the negative control) commits the customers
// alone.
func TestASourceTransactionIsCommittedWhole(t *testing.T) {
	for _, whole := range []bool{true, false} {
		t.Run(fmt.Sprintf("whole=%v", whole), func(t *testing.T) {
			s := newShop(t)
			s.kafka.createTopics(1, "txn")
			task := &commitsTask{}
			chs := []causal.Channel{{Topic: "customers"}, {Topic: "customers", Partition: 1}, {Topic: "orders"}, {Topic: "orders", Partition: 1}}
			if whole {
				chs = append(chs, causal.Channel{Topic: "txn"})
			}
			w, stop := s.worker(chs, func(c *sinkworker.Config) {
				task.SinkTask, c.Task = c.Task, task
				c.BatchSize, c.CommitInterval = 1, 10*time.Millisecond
				if whole {
					c.Topics = append(c.Topics, "txn")
					c.TransactionTopic = "txn"
				}
			})
			source := &causal.Session{}
			write := func(topic string, partition int32, key, value, header, id string) {
				off := s.kafka.produce(transport.Message{Topic: topic, Partition: partition, Key: []byte(key), Value: []byte(value),
					Headers: []framework.Header{{Key: causal.HeaderKey, Value: source.AppendHeader(nil)}, {Key: header, Value: []byte(id)}}})
				source.Produced(causal.Channel{Topic: topic, Partition: partition}, off)
			}
			const n = 8
			for k := range n {
				id := fmt.Sprint(k)
				write("customers", int32(k%2), "c"+id, fmt.Sprintf(`{"name": "customer %d"}`, k), connect.TxnHeader, id)
				time.Sleep(40 * time.Millisecond) // the order lags behind
				write("orders", int32((k+1)%2), "o"+id, fmt.Sprintf(`{"customer": "c%d", "amount": 1}`, k), connect.TxnHeader, id)
				write("txn", 0, id, `{"status": "END"}`, connect.TxnEndHeader, id)
			}
			eventually(t, "every row written", func() bool { return w.Status().Written == 2*n })
			require.NoError(t, stop())
			assert.Equal(t, n, s.count("orders"))
			if whole {
				assert.Zero(t, task.split(), "no commit holds a part of a transaction: %v", task.commits)
				return
			}
			assert.Positive(t, task.split(), "without the transaction topic, customers commit without their orders")
		})
	}
}
