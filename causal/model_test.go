package causal_test

import (
	"bytes"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/causeway-stream/causeway/causal"
)

// refGate is the deliberately naive reference: it keeps every queue as a
// plain slice and, to find what is deliverable, rescans every head against
// the frontier from scratch. No wake index, no cursors, no interning.
type refGate struct {
	scope    map[causal.Channel]bool
	frontier map[causal.Channel]int64
	queues   map[causal.Channel][]refRecord
	received causal.Clock // join of all received clocks (one output fed by all)
	// reported is the last position reported of a channel, less one.
	reported map[causal.Channel]int64
}

type refRecord struct {
	off   int64
	clock causal.Clock
}

func (r *refGate) receive(ch causal.Channel, off int64, c causal.Clock) bool {
	if off <= r.frontier[ch] {
		return false
	}
	r.received = r.received.Join(c)
	r.queues[ch] = append(r.queues[ch], refRecord{off, c})
	if len(r.queues[ch]) == 1 {
		r.frontier[ch] = max(r.frontier[ch], off-1)
	}
	return true
}

func (r *refGate) advance(ch causal.Channel, pos int64) {
	r.reported[ch] = max(r.reported[ch], pos-1)
	if len(r.queues[ch]) == 0 {
		r.frontier[ch] = max(r.frontier[ch], pos-1)
	}
}

// deliverable applies the predicate of the seed literally: drop the own
// channel, drop channels out of scope, then require dominance.
func (r *refGate) deliverable(ch causal.Channel) bool {
	q := r.queues[ch]
	if len(q) == 0 {
		return false
	}
	restricted := q[0].clock.Without(func(c causal.Channel) bool { return c == ch || !r.scope[c] })
	for c, n := range restricted.All() {
		if r.frontier[c] < n {
			return false
		}
	}
	return true
}

func (r *refGate) deliver(ch causal.Channel) {
	q := r.queues[ch]
	r.frontier[ch] = q[0].off
	r.queues[ch] = q[1:]
	if len(q) > 1 {
		r.frontier[ch] = max(r.frontier[ch], q[1].off-1)
	} else {
		// Every record below a reported position was received, and now
		// delivered.
		r.frontier[ch] = max(r.frontier[ch], r.reported[ch])
	}
}

func (r *refGate) anyDeliverable() (causal.Channel, bool) {
	for ch := range r.scope {
		if r.deliverable(ch) {
			return ch, true
		}
	}
	return causal.Channel{}, false
}

// TestGateMatchesNaiveReference runs random inputs through the node and the
// reference step by step.
func TestGateMatchesNaiveReference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		scope := []causal.Channel{{Topic: "a", Partition: 0}, {Topic: "b", Partition: 0}, {Topic: "c", Partition: 1}, {Topic: "a", Partition: 2}}
		universe := append(slices.Clone(scope), causal.Channel{Topic: "b", Partition: 1}, causal.Channel{Topic: "x", Partition: 0})
		n, err := causal.NewNode[int64](causal.Inputs("a", "b", "c"), causal.Output("out"))
		if err != nil {
			t.Fatal(err)
		}
		ref := &refGate{scope: map[causal.Channel]bool{}, frontier: map[causal.Channel]int64{}, queues: map[causal.Channel][]refRecord{},
			reported: map[causal.Channel]int64{}}
		last := map[causal.Channel]int64{}
		for _, ch := range scope {
			seed := rapid.Int64Range(0, 3).Draw(t, "seed")
			if err := n.Seed(ch, seed); err != nil {
				t.Fatal(err)
			}
			ref.scope[ch], ref.frontier[ch], ref.reported[ch], last[ch] = true, seed-1, seed-1, seed-1
		}
		genClock := rapid.Custom(func(t *rapid.T) causal.Clock {
			var es []causal.Entry
			for range rapid.IntRange(0, 4).Draw(t, "entries") {
				es = append(es, causal.Entry{
					Channel: rapid.SampledFrom(universe).Draw(t, "ch"),
					Offset:  rapid.Int64Range(0, 14).Draw(t, "off"),
				})
			}
			c, err := causal.NewClock(es...)
			if err != nil {
				t.Fatal(err)
			}
			return c
		})

		check := func() {
			// Every delivery the node makes must be a deliverable head in the
			// reference at that moment.
			for {
				d, ok := n.Next()
				if !ok {
					break
				}
				if !ref.deliverable(d.Channel) || ref.queues[d.Channel][0].off != d.Offset {
					t.Fatalf("node delivered %s@%d, which the reference holds", d.Channel, d.Offset)
				}
				ref.deliver(d.Channel)
				stamp, err := n.Stamp("out")
				if err != nil {
					t.Fatal(err)
				}
				encoded, err := n.AppendStamp(nil, "out")
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(encoded, causal.EncodeClock(stamp)) {
					t.Fatalf("AppendStamp %x is not the encoding of Stamp %v", encoded, stamp)
				}
				if off, _ := stamp.Get(d.Channel); off < d.Offset {
					t.Fatalf("stamp %v does not claim the record being processed %s@%d", stamp, d.Channel, d.Offset)
				}
			}
			// At the fixpoint the reference must find nothing either.
			if ch, ok := ref.anyDeliverable(); ok {
				t.Fatalf("node stopped, but the reference can deliver the head of %s", ch)
			}
			for _, st := range n.Status() {
				if st.Frontier != ref.frontier[st.Channel] {
					t.Fatalf("frontier of %s: node %d, reference %d", st.Channel, st.Frontier, ref.frontier[st.Channel])
				}
				if st.Held != len(ref.queues[st.Channel]) {
					t.Fatalf("held on %s: node %d, reference %d", st.Channel, st.Held, len(ref.queues[st.Channel]))
				}
				if st.Blocked != (st.Held > 0) {
					t.Fatalf("%s: blocked=%v with %d held at the fixpoint", st.Channel, st.Blocked, st.Held)
				}
				if st.Blocked {
					claim, ok := ref.queues[st.Channel][0].clock.Get(st.WaitingFor)
					if !ok || claim != st.WaitingOffset || ref.frontier[st.WaitingFor] >= claim {
						t.Fatalf("%s waits for %s:%d, which is not an unmet claim of its head", st.Channel, st.WaitingFor, st.WaitingOffset)
					}
				}
			}
			adv, err := n.Advertised("out")
			if err != nil {
				t.Fatal(err)
			}
			if !adv.Equal(ref.received) {
				t.Fatalf("advertised %v, reference %v", adv, ref.received)
			}
		}

		t.Repeat(map[string]func(*rapid.T){
			"receive": func(t *rapid.T) {
				ch := rapid.SampledFrom(scope).Draw(t, "channel")
				off := last[ch] + 1 + rapid.Int64Range(0, 3).Draw(t, "gap")
				last[ch] = off
				c := genClock.Draw(t, "clock")
				got, err := n.Receive(ch, off, c, off)
				if err != nil {
					t.Fatal(err)
				}
				if want := ref.receive(ch, off, c); got != want {
					t.Fatalf("receive %s@%d: node accepted=%v, reference %v", ch, off, got, want)
				}
				check()
			},
			"replay": func(t *rapid.T) {
				ch := rapid.SampledFrom(scope).Draw(t, "channel")
				if ref.frontier[ch] < 0 {
					return // nothing delivered on this channel yet, so nothing to replay
				}
				off := rapid.Int64Range(0, ref.frontier[ch]).Draw(t, "off")
				got, err := n.Receive(ch, off, genClock.Draw(t, "clock"), off)
				if err != nil || got {
					t.Fatalf("replay of %s@%d accepted=%v err=%v", ch, off, got, err)
				}
				check()
			},
			"advance": func(t *rapid.T) {
				ch := rapid.SampledFrom(scope).Draw(t, "channel")
				// Past the last record returned, and maybe past markers
				// after it, whether or not records are held.
				pos := last[ch] + 1 + rapid.Int64Range(0, 3).Draw(t, "gap")
				last[ch] = pos - 1
				if err := n.Advance(ch, pos); err != nil {
					t.Fatal(err)
				}
				ref.advance(ch, pos)
				check()
			},
		})
	})
}

// The reference itself must be able to tell a wrong gate from a right one:
// fed the trace that makes an unordered gate deliver early, it refuses.
func TestNaiveReferenceRefusesEarlyDelivery(t *testing.T) {
	a, b := causal.Channel{Topic: "a"}, causal.Channel{Topic: "b"}
	ref := &refGate{scope: map[causal.Channel]bool{a: true, b: true},
		frontier: map[causal.Channel]int64{a: -1, b: -1}, queues: map[causal.Channel][]refRecord{}, reported: map[causal.Channel]int64{}}
	c, err := causal.NewClock(causal.Entry{Channel: b, Offset: 0})
	if err != nil {
		t.Fatal(err)
	}
	ref.receive(a, 0, c)
	if ref.deliverable(a) {
		t.Fatalf("reference would deliver a@0 before its cause b@0: %v", ref.frontier)
	}
	ref.receive(b, 0, causal.Clock{})
	ref.deliver(b)
	if !ref.deliverable(a) {
		t.Fatal("reference holds a@0 after its cause was delivered")
	}
}
