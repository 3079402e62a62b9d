package sinkworker_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/connect"
	"github.com/causeway-stream/causeway/runtime/sinkworker"
)

// heldTask is a sink task whose first Put waits until release closes; it
// says on started when that Put began.
type heldTask struct {
	connect.SinkTask
	started, release chan struct{}
	once             sync.Once
}

func (h *heldTask) Put(ctx context.Context, recs []connect.Record) ([]connect.Rejected, error) {
	first := false
	h.once.Do(func() { first = true })
	if first {
		close(h.started)
		<-h.release
	}
	return h.SinkTask.Put(ctx, recs)
}

// A batch that was delivered while a commit was in flight is committed as
// soon as that commit lands, even when nothing more comes: the worker
// does not leave it for the commit interval. (Before, the last batch of
// a burst waited for the member loop's next beat, which cost the sink a
// sixth of its throughput in bench/sinkbench.)
func TestABatchDeliveredDuringACommitFollowsItAtOnce(t *testing.T) {
	s := newShop(t)
	const batch = 10
	task := &heldTask{started: make(chan struct{}), release: make(chan struct{})}
	customers := func(from, to int) {
		for i := from; i < to; i++ {
			c := fmt.Sprintf("c%03d", i)
			s.produce("customers", 0, "all", c, fmt.Sprintf(`{"name": "customer %d"}`, i))
		}
	}
	customers(0, 2*batch)
	w, stop := s.worker([]causal.Channel{{Topic: "customers"}, {Topic: "customers", Partition: 1}, {Topic: "orders"}, {Topic: "orders", Partition: 1}},
		func(c *sinkworker.Config) {
			task.SinkTask = c.Task
			c.Task = task
			c.BatchSize = batch
			c.CommitInterval = time.Hour // no beat: only a due batch commits
		})
	<-task.started
	// A second batch, delivered while the first is written: fewer than
	// four batches wait, so the worker reads on without waiting for the
	// commit in flight.
	customers(2*batch, 4*batch)
	time.Sleep(200 * time.Millisecond) // the second batch is read meanwhile
	close(task.release)
	eventually(t, "both batches written", func() bool { return w.Status().Written == 4*batch })
	require.NoError(t, stop())
	assert.Equal(t, 4*batch, s.count("customers"))
}
