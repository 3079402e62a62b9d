package transport

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/causal"
)

// On each client, Flush inside an open transaction returns once the
// records produced into it have reached the broker: the partitions' ends
// (the high watermarks, which count open transactions' records) then
// count every one, though the client would still be lingering over them.
// The source runner's ends claim records so (connectworker's writeTxns).
func TestFlushedRecordsCountInThePartitionsEnds(t *testing.T) {
	b := startBroker(t)
	for _, name := range Clients() {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			s, err := Named(name)
			require.NoError(t, err)
			set := franzTestSettings(t, b.Addr(), "flush-"+name)
			set.Kafka = map[string]string{"linger.ms": "2000"}
			p, admin, err := s.Producer(*set)
			require.NoError(t, err)
			t.Cleanup(func() {
				admin.Close()
				assert.NoError(t, p.Close())
			})
			topic := "flushed-" + name
			require.NoError(t, admin.CreateTopics(ctx, []TopicSpec{{Name: topic, Partitions: 2}}))
			chs := []causal.Channel{{Topic: topic, Partition: 0}, {Topic: topic, Partition: 1}}
			require.NoError(t, p.InitTransactions(ctx))
			require.NoError(t, p.BeginTransaction())
			want := map[causal.Channel]int64{}
			for i := range 300 {
				ch := chs[i%3%2] // two records to partition 0 for each to 1
				require.NoError(t, p.Produce(&Message{Topic: ch.Topic, Partition: ch.Partition, Value: fmt.Appendf(nil, "r%d", i)}))
				want[ch]++
			}
			require.NoError(t, p.Flush(ctx))
			ends, err := admin.Ends(ctx, chs)
			require.NoError(t, err)
			assert.Equal(t, want, ends, "every record flushed counts in its partition's end")
			require.NoError(t, p.CommitTransaction(ctx))
		})
	}
}
