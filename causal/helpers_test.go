package causal_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/causal"
)

// ch parses "topic/partition".
func ch(t testing.TB, s string) causal.Channel {
	t.Helper()
	i := strings.LastIndexByte(s, '/')
	require.Positive(t, i, "channel %q", s)
	p, err := strconv.ParseInt(s[i+1:], 10, 32)
	require.NoError(t, err)
	return causal.Channel{Topic: s[:i], Partition: int32(p)}
}

// clk parses "a/0:5 b/1:3" into a clock; "" is the empty clock.
func clk(t testing.TB, s string) causal.Clock {
	t.Helper()
	var es []causal.Entry
	for _, f := range strings.Fields(s) {
		i := strings.LastIndexByte(f, ':')
		require.Positive(t, i, "entry %q", f)
		off, err := strconv.ParseInt(f[i+1:], 10, 64)
		require.NoError(t, err)
		es = append(es, causal.Entry{Channel: ch(t, f[:i]), Offset: off})
	}
	c, err := causal.NewClock(es...)
	require.NoError(t, err)
	return c
}

// newNode builds a node and seeds the given channels at offset 0.
func newNode(t testing.TB, seeds []string, opts ...causal.NodeOpt) *causal.Node[string] {
	t.Helper()
	n, err := causal.NewNode[string](opts...)
	require.NoError(t, err)
	for _, s := range seeds {
		require.NoError(t, n.Seed(ch(t, s), 0))
	}
	return n
}

// recv receives a record whose payload names it ("a/0@3").
func recv(t testing.TB, n *causal.Node[string], channel string, off int64, clock string) bool {
	t.Helper()
	ok, err := n.Receive(ch(t, channel), off, clk(t, clock), channel+"@"+strconv.FormatInt(off, 10))
	require.NoError(t, err)
	return ok
}

// drain returns the payloads of everything Next hands out, in order.
func drain(n *causal.Node[string]) []string {
	var out []string
	for {
		d, ok := n.Next()
		if !ok {
			return out
		}
		out = append(out, d.Payload)
	}
}

func frontier(t testing.TB, n *causal.Node[string], channel string) int64 {
	t.Helper()
	c := ch(t, channel)
	for _, st := range n.Status() {
		if st.Channel == c {
			return st.Frontier
		}
	}
	require.FailNow(t, "channel not in status", channel)
	return 0
}
