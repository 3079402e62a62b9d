package causal_test

import (
	"errors"
	"fmt"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/causal"
)

// Normalise: the entry for the record's own channel is ignored, whether it
// is a self-cycle (at or above the record's offset) or below it.
func TestNormalise(t *testing.T) {
	tests := []struct {
		name  string
		clock string
	}{
		{"self-cycle at own offset", "a/0:5"},
		{"self-cycle above own offset", "a/0:900"},
		{"below own offset", "a/0:2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newNode(t, []string{"a/0", "b/0"}, causal.Inputs("a", "b"))
			recv(t, n, "a/0", 5, tt.clock)
			assert.Equal(t, []string{"a/0@5"}, drain(n))
		})
	}
}

// Restrict: entries for channels the node does not consume are ignored: other
// partitions of a consumed topic and topics it does not consume at all.
func TestRestrict(t *testing.T) {
	tests := []struct {
		name      string
		clock     string
		wantHeld  bool
		blockedOn string
	}{
		{"other partition of a consumed topic", "b/1:100", false, ""},
		{"unconsumed topic", "x/0:100 y/3:7", false, ""},
		{"consumed channel is still gated", "x/0:100 b/0:3", true, "b/0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newNode(t, []string{"a/0", "b/0"}, causal.Inputs("a", "b"))
			recv(t, n, "a/0", 0, tt.clock)
			got := drain(n)
			if tt.wantHeld {
				assert.Empty(t, got)
				st := n.Status()[0]
				assert.True(t, st.Blocked)
				assert.Equal(t, ch(t, tt.blockedOn), st.WaitingFor)
			} else {
				assert.Equal(t, []string{"a/0@0"}, got)
			}
		})
	}
}

// Gate: a head is deliverable iff the frontier dominates its restricted clock.
func TestGate(t *testing.T) {
	tests := []struct {
		name       string
		bFrontier  int64 // b/0 delivered up to here before the claim arrives
		claim      string
		wantDelive bool
	}{
		{"claim below frontier", 4, "b/0:3", true},
		{"claim at frontier", 4, "b/0:4", true},
		{"claim above frontier", 4, "b/0:5", false},
		{"one of two claims unmet", 4, "b/0:4 c/0:0", false},
		{"empty clock", -1, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newNode(t, []string{"a/0", "b/0", "c/0"}, causal.Inputs("a", "b", "c"))
			if tt.bFrontier >= 0 {
				recv(t, n, "b/0", tt.bFrontier, "")
				require.Len(t, drain(n), 1)
			}
			recv(t, n, "a/0", 0, tt.claim)
			got := drain(n)
			if tt.wantDelive {
				assert.Equal(t, []string{"a/0@0"}, got)
			} else {
				assert.Empty(t, got)
			}
		})
	}
}

// Cascade: one delivery releases a chain of held heads across several
// channels, in causal order, in the same round of Next calls.
func TestCascadeAcrossChannels(t *testing.T) {
	n := newNode(t, []string{"a/0", "b/0", "c/0", "d/0"}, causal.Inputs("a", "b", "c", "d"))
	recv(t, n, "d/0", 0, "c/0:0")
	recv(t, n, "c/0", 0, "b/0:0")
	recv(t, n, "b/0", 0, "a/0:0")
	require.Empty(t, drain(n), "nothing may go before a/0@0")
	recv(t, n, "a/0", 0, "")
	assert.Equal(t, []string{"a/0@0", "b/0@0", "c/0@0", "d/0@0"}, drain(n))
	assert.Zero(t, n.Held())
}

// A held head blocks its own channel (head-of-line) but never another one.
func TestHeadOfLineBlocksOnlyItsChannel(t *testing.T) {
	n := newNode(t, []string{"a/0", "b/0"}, causal.Inputs("a", "b"))
	recv(t, n, "a/0", 0, "b/0:7")
	recv(t, n, "a/0", 1, "") // claims nothing, but waits behind its head
	recv(t, n, "b/0", 0, "")
	assert.Equal(t, []string{"b/0@0"}, drain(n))
	assert.Equal(t, 2, n.Held())
	recv(t, n, "b/0", 7, "")
	assert.Equal(t, []string{"b/0@7", "a/0@0", "a/0@1"}, drain(n))
}

// Replay guard: an offset at or below the frontier is dropped with no effect,
// whether the frontier got there by delivery or by seeding.
func TestReplayGuard(t *testing.T) {
	n, err := causal.NewNode[string](causal.Inputs("a"), causal.Output("out"))
	require.NoError(t, err)
	require.NoError(t, n.Seed(ch(t, "a/0"), 10))
	assert.False(t, recv(t, n, "a/0", 9, "z/0:99"), "below the seed")
	assert.True(t, recv(t, n, "a/0", 10, ""))
	assert.Equal(t, []string{"a/0@10"}, drain(n))
	assert.False(t, recv(t, n, "a/0", 10, "z/0:99"), "delivered already")
	assert.Empty(t, drain(n))
	adv, err := n.Advertised("out")
	require.NoError(t, err)
	assert.True(t, adv.IsEmpty(), "a dropped replay must not fold its clock: %v", adv)
}

// A record above the frontier but not above the last held one means the
// consumer was rewound under the node: that is an error, never a silent drop.
func TestOutOfOrderIsAnError(t *testing.T) {
	n := newNode(t, []string{"a/0", "b/0"}, causal.Inputs("a", "b"))
	recv(t, n, "a/0", 3, "b/0:0")
	_, err := n.Receive(ch(t, "a/0"), 3, causal.Clock{}, "dup")
	require.ErrorIs(t, err, causal.ErrOutOfOrder)
	assert.Contains(t, err.Error(), "a/0")
}

// Fail closed: a present but undecodable header fails the node with an error
// naming channel and offset; nothing past it becomes committable and the node
// refuses further input. An absent header is the empty clock.
func TestFailClosed(t *testing.T) {
	n := newNode(t, []string{"a/0", "b/0"}, causal.Inputs("a", "b"))
	ok, err := n.ReceiveHeader(ch(t, "a/0"), 0, nil, false, "absent")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, []string{"absent"}, drain(n))

	_, err = n.ReceiveHeader(ch(t, "a/0"), 1, []byte{1, 1, 3, 'a'}, true, "corrupt")
	require.ErrorIs(t, err, causal.ErrNodeFailed)
	require.ErrorIs(t, err, causal.ErrCorruptClock)
	require.ErrorIs(t, err, causal.ErrMalformedClock)
	var ce *causal.ClockError
	require.True(t, errors.As(err, &ce))
	assert.Equal(t, ch(t, "a/0"), ce.Channel)
	assert.EqualValues(t, 1, ce.Offset)
	assert.Contains(t, err.Error(), "a/0 at offset 1")

	assert.ErrorIs(t, n.Err(), causal.ErrCorruptClock)
	_, err = n.Receive(ch(t, "b/0"), 0, causal.Clock{}, "after")
	assert.ErrorIs(t, err, causal.ErrNodeFailed)
	assert.ErrorIs(t, n.Advance(ch(t, "a/0"), 50), causal.ErrNodeFailed)
	assert.Empty(t, drain(n))
	for _, e := range n.Committable() {
		assert.LessOrEqual(t, e.Offset, int64(1), "%s must not commit past the corrupt record", e.Channel)
	}
}

// Seed: a channel enters scope with frontier committed-1, and claims below
// the seed are satisfied without any record.
func TestSeed(t *testing.T) {
	n, err := causal.NewNode[string](causal.Inputs("a", "b"))
	require.NoError(t, err)
	require.NoError(t, n.Seed(ch(t, "a/0"), 0))
	require.NoError(t, n.Seed(ch(t, "b/0"), 42))
	assert.EqualValues(t, 41, frontier(t, n, "b/0"))
	recv(t, n, "a/0", 0, "b/0:41")
	assert.Equal(t, []string{"a/0@0"}, drain(n))
	recv(t, n, "a/0", 1, "b/0:42")
	assert.Empty(t, drain(n))

	assert.ErrorIs(t, n.Seed(ch(t, "b/0"), 0), causal.ErrAlreadyInScope)
	assert.ErrorIs(t, n.Seed(ch(t, "z/0"), 0), causal.ErrNotInScope)
	_, err = n.Receive(ch(t, "b/1"), 0, causal.Clock{}, "")
	assert.ErrorIs(t, err, causal.ErrNotInScope)
}

// Bridge: when a record becomes the head of its queue, everything below it is
// accounted for, so offset gaps (transaction markers, aborted or compacted
// records) never block a claim.
func TestBridgeOverOffsetGaps(t *testing.T) {
	n := newNode(t, []string{"a/0", "b/0"}, causal.Inputs("a", "b"))
	// a/0 waits for b/0:5, which is a transaction marker: b's next business
	// record is at 9.
	recv(t, n, "a/0", 0, "b/0:5")
	recv(t, n, "b/0", 9, "a/0:0") // held: it claims a/0@0
	assert.EqualValues(t, 8, frontier(t, n, "b/0"), "bridged to below the head")
	assert.Equal(t, []string{"a/0@0", "b/0@9"}, drain(n))

	// Bridge after a delivery: b/0@20 waits on a/0@1 and is next behind
	// b/0@12, so once 12 is delivered, 13..19 (markers) are accounted for and
	// a/0@1, which claims b/0:19, goes before b/0@20.
	recv(t, n, "b/0", 12, "")
	recv(t, n, "b/0", 20, "a/0:1")
	recv(t, n, "a/0", 1, "b/0:19")
	assert.Equal(t, []string{"b/0@12", "a/0@1", "b/0@20"}, drain(n))
}

// Position advance: an idle channel whose position moved past markers
// releases claims on it; with records held, the report changes nothing.
func TestPositionAdvanceOnIdleChannel(t *testing.T) {
	n := newNode(t, []string{"a/0", "b/0"}, causal.Inputs("a", "b"))
	recv(t, n, "a/0", 0, "b/0:3")
	require.Empty(t, drain(n))
	require.NoError(t, n.Advance(ch(t, "b/0"), 3)) // offsets 0..2 only
	require.Empty(t, drain(n))
	require.NoError(t, n.Advance(ch(t, "b/0"), 4)) // marker at 3, EOF at 4
	assert.Equal(t, []string{"a/0@0"}, drain(n))
	assert.EqualValues(t, 3, frontier(t, n, "b/0"))

	// With a record held on b/0 (blocked on a/0:5), an advance does not
	// deliver it, nor move the frontier past it.
	recv(t, n, "b/0", 10, "a/0:5")
	require.NoError(t, n.Advance(ch(t, "b/0"), 50))
	assert.EqualValues(t, 9, frontier(t, n, "b/0"))
	assert.Equal(t, 1, n.Held())

	// Once it is delivered, the position reported while it was held counts:
	// the markers after it (11..49) hold nothing, and a claim on b/0:49 is
	// met without another report (librdkafka reports a partition's end once).
	recv(t, n, "a/0", 5, "")
	recv(t, n, "a/0", 6, "b/0:49")
	assert.Equal(t, []string{"a/0@5", "b/0@10", "a/0@6"}, drain(n))
	assert.EqualValues(t, 49, frontier(t, n, "b/0"))
}

// Fold at receive: a held record's clock is in the advertised clock before it
// is delivered, and a stamp taken then claims it.
func TestFoldAtReceive(t *testing.T) {
	n := newNode(t, []string{"a/0", "b/0"}, causal.Inputs("a", "b"), causal.Output("out"))
	recv(t, n, "a/0", 0, "b/0:9 x/3:77")
	require.Empty(t, drain(n), "held on b/0:9")
	adv, err := n.Advertised("out")
	require.NoError(t, err)
	assert.Equal(t, clk(t, "b/0:9 x/3:77"), adv)
	stamp, err := n.Stamp("out")
	require.NoError(t, err)
	off, ok := stamp.Get(ch(t, "x/3"))
	assert.True(t, ok)
	assert.EqualValues(t, 77, off)
}

// Stamps dominate the full clock of every record received on an input that
// feeds the output, and claim the record being processed.
func TestStampsDominateReceivedClocks(t *testing.T) {
	n := newNode(t, []string{"a/0", "b/0"}, causal.Inputs("a", "b"), causal.Output("out"))
	clocks := []string{"x/0:4 y/1:2", "x/0:9 z/0:1", "b/0:0 y/1:1"}
	recv(t, n, "b/0", 0, "")
	for i, c := range clocks {
		recv(t, n, "a/0", int64(i), c)
	}
	for _, c := range clocks {
		d, ok := n.Next()
		if d.Channel.Topic == "b" {
			d, ok = n.Next()
		}
		require.True(t, ok)
		stamp, err := n.Stamp("out")
		require.NoError(t, err)
		assert.True(t, clk(t, c).DominatedBy(stamp), "stamp %v vs received %v", stamp, c)
		off, ok := stamp.Get(d.Channel)
		require.True(t, ok)
		assert.GreaterOrEqual(t, off, d.Offset, "stamp claims the record being processed")
	}
}

// A stamp's entry for a channel is the larger of what received clocks
// advertised for it and, for an input channel, its frontier; entries come
// out in partition order whichever side they come from.
func TestStampJoinsAdvertisedAndFrontiers(t *testing.T) {
	type rec struct {
		channel string
		off     int64
		clock   string
	}
	tests := []struct {
		name      string
		seeds     []string
		recs      []rec
		delivered int
		want      string
	}{
		{"advertised above the frontier", []string{"a/0", "a/1"},
			[]rec{{"a/0", 0, "a/1:5"}, {"a/1", 0, ""}}, 1, "a/1:5"},
		{"frontier above the advertised", []string{"a/0", "a/1"},
			[]rec{{"a/1", 0, ""}, {"a/1", 1, ""}, {"a/1", 2, ""}, {"a/1", 3, ""}, {"a/0", 0, "a/1:1"}}, 5, "a/0:0 a/1:3"},
		{"advertised between inputs", []string{"a/0", "a/2"},
			[]rec{{"a/0", 0, "a/1:7 a/3:1"}, {"a/2", 0, ""}}, 2, "a/0:0 a/1:7 a/2:0 a/3:1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newNode(t, tt.seeds, causal.Inputs("a"), causal.Output("out"))
			for _, r := range tt.recs {
				recv(t, n, r.channel, r.off, r.clock)
			}
			require.Len(t, drain(n), tt.delivered)
			want := clk(t, tt.want)
			stamp, err := n.Stamp("out")
			require.NoError(t, err)
			assert.Equal(t, want, stamp)
			buf, err := n.AppendStamp(nil, "out")
			require.NoError(t, err)
			decoded, err := causal.DecodeClock(buf)
			require.NoError(t, err)
			assert.Equal(t, want, decoded)
		})
	}
}

// FedBy limits which inputs' clocks and frontiers reach an output; PruneTo
// drops topics no downstream gate reads.
func TestOutputFeedsAndPruning(t *testing.T) {
	n := newNode(t, []string{"a/0", "b/0"}, causal.Inputs("a", "b"),
		causal.Output("from-a", causal.FedBy("a")),
		causal.Output("pruned", causal.PruneTo("a", "y")))
	recv(t, n, "a/0", 0, "x/0:1 y/0:2")
	recv(t, n, "b/0", 0, "z/0:3")
	require.Len(t, drain(n), 2)

	fromA, err := n.Stamp("from-a")
	require.NoError(t, err)
	assert.Equal(t, clk(t, "a/0:0 x/0:1 y/0:2"), fromA)
	pruned, err := n.Stamp("pruned")
	require.NoError(t, err)
	assert.Equal(t, clk(t, "a/0:0 y/0:2"), pruned)
	_, err = n.Stamp("nope")
	assert.ErrorIs(t, err, causal.ErrUnknownOutput)

	buf, err := n.AppendStamp(nil, "pruned")
	require.NoError(t, err)
	decoded, err := causal.DecodeClock(buf)
	require.NoError(t, err)
	assert.Equal(t, pruned, decoded)
}

// Status names, for a blocked head, the channel and offset it waits for.
func TestStatusNamesTheClaimAHeadWaitsFor(t *testing.T) {
	n := newNode(t, []string{"a/0", "b/0", "c/0"}, causal.Inputs("a", "b", "c"))
	recv(t, n, "a/0", 0, "b/0:3 c/0:8")
	recv(t, n, "a/0", 1, "")
	st := n.Status()
	require.Len(t, st, 3)
	assert.Equal(t, causal.ChannelStatus{Channel: ch(t, "a/0"), Frontier: -1, Held: 2, Blocked: true,
		WaitingFor: ch(t, "b/0"), WaitingOffset: 3, HeadOffset: 0}, st[0])
	assert.EqualValues(t, -1, st[1].HeadOffset, "nothing held on b/0")
	require.NoError(t, n.Advance(ch(t, "b/0"), 4))
	st = n.Status()
	assert.Equal(t, ch(t, "c/0"), st[0].WaitingFor, "moves on to the next unmet claim")
	assert.EqualValues(t, 8, st[0].WaitingOffset)
	assert.False(t, st[1].Blocked)
}

// Committable offsets are frontier+1 and never pass a held record.
func TestCommittableStopsBelowHeldRecords(t *testing.T) {
	n := newNode(t, []string{"a/0", "b/0"}, causal.Inputs("a", "b"))
	recv(t, n, "a/0", 0, "")
	recv(t, n, "a/0", 1, "")
	recv(t, n, "a/0", 5, "b/0:2")
	recv(t, n, "a/0", 6, "")
	require.Len(t, drain(n), 2)
	assert.Equal(t, []causal.Entry{{Channel: ch(t, "a/0"), Offset: 5}, {Channel: ch(t, "b/0"), Offset: 0}}, n.Committable())
}

// Checkpoint and restore carry the advertised clocks into a new node; a node
// with an output the checkpoint lacks refuses it.
func TestCheckpointRestore(t *testing.T) {
	opts := []causal.NodeOpt{causal.Inputs("a"), causal.Output("o1"), causal.Output("o2", causal.PruneTo("a"))}
	n := newNode(t, []string{"a/0"}, opts...)
	recv(t, n, "a/0", 0, "x/0:5 a/0:0")
	recv(t, n, "a/0", 1, "y/2:6")
	require.Len(t, drain(n), 2)
	cp := n.Checkpoint()

	m := newNode(t, nil, opts...)
	require.NoError(t, m.Restore(cp))
	for _, o := range []string{"o1", "o2"} {
		want, err := n.Advertised(o)
		require.NoError(t, err)
		got, err := m.Advertised(o)
		require.NoError(t, err)
		assert.Equal(t, want, got, o)
	}

	grown := newNode(t, nil, append(opts, causal.Output("o3"))...)
	assert.ErrorIs(t, grown.Restore(cp), causal.ErrBadCheckpoint)
	for i := range cp {
		assert.Error(t, m.Restore(cp[:i]), "truncated at %d", i)
	}
}

// DeliverOnArrival switches the gate off but keeps per-channel order.
func TestDeliverOnArrival(t *testing.T) {
	n := newNode(t, []string{"a/0", "b/0"}, causal.Inputs("a", "b"), causal.DeliverOnArrival())
	recv(t, n, "a/0", 0, "b/0:5")
	recv(t, n, "a/0", 1, "")
	assert.Equal(t, []string{"a/0@0", "a/0@1"}, drain(n))
}

func TestNewNodeValidatesConfig(t *testing.T) {
	tests := []struct {
		name string
		give []causal.NodeOpt
	}{
		{"no inputs", nil},
		{"empty input", []causal.NodeOpt{causal.Inputs("")}},
		{"duplicate input", []causal.NodeOpt{causal.Inputs("a", "a")}},
		{"duplicate output", []causal.NodeOpt{causal.Inputs("a"), causal.Output("o"), causal.Output("o")}},
		{"fed by a non-input", []causal.NodeOpt{causal.Inputs("a"), causal.Output("o", causal.FedBy("b"))}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := causal.NewNode[string](tt.give...)
			assert.ErrorIs(t, err, causal.ErrInvalidConfig)
		})
	}
}

// A session claims what it produced and, transitively, what it consumed.
func TestSessionClaimsProducedAndConsumed(t *testing.T) {
	var s causal.Session
	s.Produced(ch(t, "orders/1"), 4)
	s.Consumed(ch(t, "payments/0"), 7, clk(t, "orders/2:9 x/0:1"))
	s.Produced(ch(t, "orders/1"), 6)
	assert.Equal(t, clk(t, "orders/1:6 orders/2:9 payments/0:7 x/0:1"), s.Clock())
	got, err := causal.DecodeClock(s.AppendHeader(nil))
	require.NoError(t, err)
	assert.Equal(t, s.Clock(), got)
}

// ReceiveOrReject hands a corrupt header back without failing the node or
// changing it; the record can then be taken in as claiming nothing.
func TestReceiveOrRejectLeavesTheNodeAsItWas(t *testing.T) {
	n := newNode(t, []string{"a/0", "b/0"}, causal.Inputs("a", "b"), causal.Output("out"))
	recv(t, n, "a/0", 0, "b/0:0") // held: waits for b/0@0
	before := n.Checkpoint()
	_, err := n.ReceiveOrReject(ch(t, "a/0"), 1, []byte{1, 1, 3, 'a'}, true, "corrupt")
	require.ErrorIs(t, err, causal.ErrCorruptClock)
	require.NotErrorIs(t, err, causal.ErrNodeFailed)
	var ce *causal.ClockError
	require.True(t, errors.As(err, &ce))
	assert.EqualValues(t, 1, ce.Offset)
	assert.NoError(t, n.Err())
	assert.Equal(t, before, n.Checkpoint(), "a rejected record folds nothing")
	assert.Equal(t, 1, n.Held())

	ok, err := n.ReceiveOrReject(ch(t, "a/0"), 1, []byte{1, 1, 3, 'a'}, false, "as empty")
	require.NoError(t, err)
	require.True(t, ok)
	_, err = n.Receive(ch(t, "b/0"), 0, causal.Clock{}, "cause")
	require.NoError(t, err)
	assert.Equal(t, []string{"cause", "a/0@0", "as empty"}, drain(n), "FIFO on a/0 holds for the record taken in as claiming nothing")
}

// A claim error names every claim of the record beyond its channel's known
// end, whichever path decoded the clock, so that one round of SetEnd
// settles the record; claims below their ends are not named.
func TestClaimErrorNamesEveryClaimBeyondTheEnd(t *testing.T) {
	req := ch(t, "req/0")
	n := newNode(t, []string{"req/0"}, causal.Inputs("req"), causal.Output("out"), causal.CheckClaims("req"))
	n.SetEnd(ch(t, "b/1"), 9)
	clock := "a/0:5 b/1:2 c/2:7"
	for name, receive := range map[string]func() error{
		"clock": func() error { _, err := n.Receive(req, 0, clk(t, clock), "r"); return err },
		"header": func() error {
			_, err := n.ReceiveHeader(req, 0, causal.EncodeClock(clk(t, clock)), true, "r")
			return err
		},
	} {
		var ce *causal.ClaimError
		require.True(t, errors.As(receive(), &ce), name)
		var got []string
		for _, c := range ce.Claims {
			got = append(got, fmt.Sprintf("%s@%d", c.Channel, c.Offset))
		}
		assert.Equal(t, []string{"a/0@5", "c/2@7"}, got, name)
		assert.Equal(t, ce.Claims[0], ce.Claim, name)
	}
	n.SetEnd(ch(t, "a/0"), 6)
	n.SetEnd(ch(t, "c/2"), 8)
	ok, err := n.Receive(req, 0, clk(t, clock), "r")
	require.NoError(t, err, "one round of ends settles the record")
	assert.True(t, ok)
}

// With CheckClaims, a claim the node cannot show to exist is handed back
// with the record named and the node unchanged; once SetEnd covers it the
// record goes in. Without the check the same claim lands in the stamp.
func TestCheckClaimsKeepsImpossibleClaimsOutOfStamps(t *testing.T) {
	req := ch(t, "req/0")
	bogus := "orders/0:5 unknown/3:1"
	t.Run("checked", func(t *testing.T) {
		n := newNode(t, []string{"req/0"}, causal.Inputs("req"), causal.Output("out"), causal.CheckClaims("req"))
		before := n.Checkpoint()
		tests := []struct {
			name    string
			setEnd  func()
			wantEnd int64
			claim   string
		}{
			{name: "end unknown", setEnd: func() {}, wantEnd: causal.EndUnknown, claim: "orders/0"},
			{name: "beyond the end", setEnd: func() { n.SetEnd(ch(t, "orders/0"), 3) }, wantEnd: 3, claim: "orders/0"},
			{name: "channel missing", setEnd: func() { n.SetEnd(ch(t, "orders/0"), 6); n.SetEnd(ch(t, "unknown/3"), -1) }, wantEnd: causal.EndMissing, claim: "unknown/3"},
		}
		for _, tt := range tests {
			tt.setEnd()
			_, err := n.Receive(req, 0, clk(t, bogus), "r")
			require.ErrorIs(t, err, causal.ErrClaimBeyondEnd, tt.name)
			var ce *causal.ClaimError
			require.True(t, errors.As(err, &ce))
			assert.Equal(t, req, ce.Channel, tt.name)
			assert.Equal(t, tt.claim, ce.Claim.Channel.String(), tt.name)
			assert.Equal(t, tt.wantEnd, ce.End, tt.name)
			_, err = n.ReceiveHeader(req, 0, causal.EncodeClock(clk(t, bogus)), true, "r")
			require.ErrorIs(t, err, causal.ErrClaimBeyondEnd, "header path: %s", tt.name)
			assert.NoError(t, n.Err(), "a claim error does not fail the node")
			assert.Equal(t, before, n.Checkpoint(), "nothing folded: %s", tt.name)
			assert.Zero(t, n.Held())
		}
		n.SetEnd(ch(t, "unknown/3"), 2)
		ok, err := n.ReceiveHeader(req, 0, causal.EncodeClock(clk(t, bogus)), true, "r")
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, []string{"r"}, drain(n))
	})
	t.Run("unchecked, the claim reaches the stamp", func(t *testing.T) {
		n := newNode(t, []string{"req/0"}, causal.Inputs("req"), causal.Output("out"))
		_, err := n.Receive(req, 0, clk(t, bogus), "r")
		require.NoError(t, err)
		drain(n)
		stamp, err := n.Stamp("out")
		require.NoError(t, err)
		got, ok := stamp.Get(ch(t, "orders/0"))
		require.True(t, ok)
		assert.EqualValues(t, 5, got)
	})
}

// A warm node receives and delivers from an encoded header without
// allocating, with or without checking claims (an error target declared on
// the success path once cost an allocation per record).
func TestReceiveHeaderDoesNotAllocate(t *testing.T) {
	for _, check := range []bool{false, true} {
		opts := []causal.NodeOpt{causal.Inputs("in", "up"), causal.Output("out")}
		if check {
			opts = append(opts, causal.CheckClaims("in"))
		}
		n := newNode(t, []string{"in/0", "up/0"}, opts...)
		n.SetEnd(ch(t, "up/0"), 10)
		require.NoError(t, n.Advance(ch(t, "up/0"), 10))
		header := causal.EncodeClock(clk(t, "up/0:3"))
		in := ch(t, "in/0")
		off := int64(0)
		receive := func() {
			if _, err := n.ReceiveHeader(in, off, header, true, "r"); err != nil {
				t.Fatal(err)
			}
			if _, ok := n.Next(); !ok {
				t.Fatal("not delivered")
			}
			off++
		}
		receive() // warm
		assert.Zero(t, testing.AllocsPerRun(200, receive), "check-claims=%v", check)
	}
}

// PreferBy ranks the records that are deliverable at the same time; a
// record whose claims are not met does not compete, and what it waits for
// goes first whatever the ranking says.
func TestPreferByRanksOnlyDeliverableRecords(t *testing.T) {
	// Payloads sort in reverse: "c/0@0" before "b/0@0" before "a/0@0".
	reverse := func(a, b string) bool { return a > b }
	tests := []struct {
		name   string
		less   func(a, b string) bool
		wantBC []string
	}{
		{"first come", nil, []string{"x/0@0", "b/0@0", "c/0@0"}},
		{"ranked", reverse, []string{"x/0@0", "c/0@0", "b/0@0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newNode(t, []string{"a/0", "b/0", "c/0", "x/0"}, causal.Inputs("a", "b", "c", "x"))
			n.PreferBy(tt.less)
			// b and c both wait for x/0@0; a waits for c/0@0.
			recv(t, n, "b/0", 0, "x/0:0")
			recv(t, n, "c/0", 0, "x/0:0")
			recv(t, n, "a/0", 0, "c/0:0")
			require.Empty(t, drain(n))
			recv(t, n, "x/0", 0, "")
			got := drain(n)
			require.Len(t, got, 4)
			assert.Equal(t, tt.wantBC, got[:3])
			assert.Equal(t, "a/0@0", got[3], "a/0@0 waits for c/0@0 and ranks first, yet goes after it")
		})
	}
}

// ReceiveNow hands a record back at once only when Next would hand it out
// next: nothing held before it on its channel, every claim met and no other
// record ready. Otherwise it is queued, and Next hands it out as it would
// a record taken in by ReceiveHeader. A corrupt header fails the node,
// unless the caller rejects it, which leaves the node as it was.
func TestReceiveNowDeliversOnlyWhatNextWouldDeliverNext(t *testing.T) {
	enc := func(clock string) []byte { return causal.EncodeClock(clk(t, clock)) }
	type step struct {
		channel string
		off     int64
		clock   string
		// taken and now are what ReceiveNow must answer.
		taken, now bool
	}
	tests := []struct {
		name  string
		steps []step
		// then is what Next hands out after the steps.
		then []string
	}{
		{"claims met: delivered at once", []step{
			{"b/0", 0, "", false, true},
			{"a/0", 0, "b/0:0", false, true},
		}, nil},
		{"a claim not met: queued until its cause", []step{
			{"a/0", 0, "b/0:0", true, false},
			{"b/0", 0, "", false, true},
		}, []string{"a/0@0"}},
		{"behind a held record of its channel: queued", []step{
			{"a/0", 0, "b/0:0", true, false},
			{"a/0", 1, "", true, false},
			{"b/0", 0, "", false, true},
		}, []string{"a/0@0", "a/0@1"}},
		{"another record ready for Next: queued after it", []step{
			{"a/0", 0, "b/0:1", true, false},
			{"b/0", 0, "", false, true},
			{"b/0", 1, "", false, true}, // a/0@0 is now ready, not yet handed out
			{"b/0", 2, "", true, false},
		}, []string{"a/0@0", "b/0@2"}},
		{"a replay: neither", []step{
			{"b/0", 0, "", false, true},
			{"b/0", 0, "", false, false},
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newNode(t, []string{"a/0", "b/0"}, causal.Inputs("a", "b"), causal.Output("out"))
			for _, s := range tt.steps {
				name := s.channel + "@" + strconv.FormatInt(s.off, 10)
				taken, now, err := n.ReceiveNow(ch(t, s.channel), s.off, enc(s.clock), s.clock != "", false, name)
				require.NoError(t, err)
				assert.Equal(t, s.taken, taken, "%s taken", name)
				assert.Equal(t, s.now, now, "%s now", name)
			}
			assert.Equal(t, tt.then, drain(n))
			assert.Zero(t, n.Held())
		})
	}

	t.Run("corrupt header", func(t *testing.T) {
		corrupt := []byte{1, 1, 3, 'a'}
		n := newNode(t, []string{"a/0"}, causal.Inputs("a"), causal.Output("out"))
		_, now, err := n.ReceiveNow(ch(t, "a/0"), 0, corrupt, true, true, "rejected")
		require.ErrorIs(t, err, causal.ErrCorruptClock)
		assert.False(t, now)
		assert.NoError(t, n.Err(), "a rejected header fails the node")
		_, now, err = n.ReceiveNow(ch(t, "a/0"), 0, corrupt, true, false, "failing")
		require.ErrorIs(t, err, causal.ErrNodeFailed)
		assert.False(t, now)
		assert.ErrorIs(t, n.Err(), causal.ErrNodeFailed)
	})
}
