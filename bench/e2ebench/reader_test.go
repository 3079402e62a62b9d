//go:build cgo

package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/runtime/embedded"
)

// syncBuffer is a strings.Builder safe to read while follow writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The reader is the benchmark's instrument: it must report each phase once
// its records are all visible to a read_committed consumer, count only
// committed records, and add up their clock headers.
func TestReaderReportsCommittedRecordsOnly(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	b, err := embedded.Start()
	require.NoError(t, err)
	defer b.Close()
	const topic, partitions = "out", 2
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	require.NoError(t, createTopics(ctx, b.Addr(), partitions, topic))
	p, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.TransactionalID("reader-test"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic(topic))
	require.NoError(t, err)
	defer p.Close()
	// One transaction of records under the given key prefix, each with a
	// clock header of headerLen bytes, committed or aborted.
	txn := func(prefix string, n, headerLen int, commit bool) {
		t.Helper()
		require.NoError(t, p.BeginTransaction())
		for i := range n {
			r := &kgo.Record{Key: []byte(prefix + strconv.Itoa(i)), Value: []byte("v"), Partition: int32(i % partitions),
				Headers: []kgo.RecordHeader{{Key: causal.HeaderKey, Value: make([]byte, headerLen)}}}
			require.NoError(t, p.ProduceSync(ctx, r).FirstErr())
		}
		require.NoError(t, p.EndTransaction(ctx, kgo.TransactionEndTry(commit)))
	}
	txn("warm-", 4, 1, true)
	// Aborted burst records, with a header length no committed one has:
	// counting them would both finish the burst early and change the sum.
	txn("", 5, 100, false)
	txn("", 10, 7, true)

	out := &syncBuffer{}
	gone := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- follow(readerArgs{addr: b.Addr(), topic: topic, partitions: partitions, warm: 4, bulk: 10, lat: 3}, out, gone)
	}()
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "bulk ") }, 30*time.Second, 10*time.Millisecond)

	produced := time.Now()
	require.NoError(t, p.BeginTransaction())
	for i := range 3 {
		r := &kgo.Record{Key: []byte("lat-" + strconv.Itoa(i)), Value: []byte("v"), Partition: int32(i % partitions), Timestamp: produced}
		require.NoError(t, p.ProduceSync(ctx, r).FirstErr())
	}
	require.NoError(t, p.EndTransaction(ctx, kgo.TransactionEndTry(true)))
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-ctx.Done():
		close(gone)
		t.Fatal("the reader did not finish")
	}
	seen := time.Since(produced)

	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 3, "warm, bulk and lat, once each: %q", lines)
	assert.Equal(t, "warm", lines[0])
	f := strings.Fields(lines[1])
	require.Len(t, f, 4)
	assert.Equal(t, []string{"bulk", "70", "10"}, []string{f[0], f[2], f[3]}, "ten committed records of 7 header bytes")
	lat := strings.Fields(lines[2])
	require.Len(t, lat, 4)
	for _, v := range lat[1:] {
		ms, err := strconv.ParseFloat(v, 64)
		require.NoError(t, err)
		assert.GreaterOrEqual(t, ms, 0.0)
		assert.LessOrEqual(t, ms, float64(seen.Milliseconds())+1, fmt.Sprintf("latency %s ms within the %v the test waited", v, seen))
	}
}
