package runtime

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/runtime/embedded"
	"github.com/causeway-stream/causeway/runtime/internal/restore"
	"github.com/causeway-stream/causeway/runtime/internal/transport"
)

// StartBroker starts an embedded broker for t, closed when t ends: the
// broker the tests of both packages run against.
func StartBroker(t *testing.T, opts ...embedded.Opt) *embedded.Broker {
	t.Helper()
	b, err := embedded.Start(opts...)
	require.NoError(t, err)
	t.Cleanup(b.Close)
	return b
}

// StoreChangelogTopic exposes the name of a store's changelog topic to the
// external tests.
var StoreChangelogTopic = restore.StoreChangelogTopic

// RevokeInABatch makes w, before it starts, lose its whole assignment
// once in the middle of a poll batch, after its consumer handed out n
// records: the rebalance handler runs before Poll returns, with those
// records taken and not yet handled, as librdkafka's rebalance callback
// does inside Poll. taken hears of every record handed out before, and
// revoked of the revocation; both are called on the pump's goroutine.
func RevokeInABatch(w *StreamThread, n int, taken func(topic string, offset int64), revoked func()) {
	w.wrapPoll = func(poll transport.PollFunc) transport.PollFunc {
		left, done := n, false
		return func(timeout time.Duration, max int, batch *[]transport.Event) int {
			if done {
				return poll(timeout, max, batch)
			}
			at := len(*batch)
			took := poll(timeout, min(max, left), batch)
			for _, ev := range (*batch)[at:] {
				if ev.Kind == transport.EventRecord {
					taken(ev.Msg.Topic, ev.Msg.Offset)
					left--
				}
			}
			if left <= 0 && len(*batch) > at {
				done = true
				w.revoke(w.pump.assigned, false)
				revoked()
			}
			return took
		}
	}
}

// RunWith exposes Run with its arguments, environment and outputs given.
var RunWith = run
