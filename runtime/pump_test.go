package runtime

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
)

// The pump leaves handled events in its batch's array for the next batch
// to write over, but once the consumer has nothing to give it lets go of
// them: an idle worker keeps no fetched record alive through them.
func TestIdlePumpLetsGoOfHandledEvents(t *testing.T) {
	w := &Worker{log: zaptest.NewLogger(t)}
	p := &w.pump
	for _, n := range []int{3, 1} { // a smaller batch leaves more behind it
		for range n {
			p.polled = append(p.polled, consumerEvent{kind: eventError, msg: message{Topic: "in", Value: []byte("v")}, err: errors.New("e")})
		}
		w.handlePolled()
		require.Empty(t, p.polled)
	}
	kept := p.polled[:3]
	assert.Equal(t, eventError, kept[2].kind, "the events are cleared after every batch already")

	w.handlePolled() // the consumer had nothing
	assert.Equal(t, []consumerEvent{{}, {}, {}}, kept, "an idle pump still holds events it handled")
}
