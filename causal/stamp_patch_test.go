package causal

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// stampPatchRun drives a node reading three partitions of "a" and one of
// "b" through a random run of receives (with clocks claiming entries on
// inputs and elsewhere), deliveries and position advances, with offsets
// starting just below the lengths where a varint grows a byte. After every
// step it compares the encoded stamp (AppendStamp, which writes moved
// frontiers over their old bytes) with the encoding of Stamp, which is
// built from the entries every time. It returns the first difference.
func stampPatchRun(seed uint64, m mutation) error {
	rng := rand.New(rand.NewPCG(seed, 7))
	n, err := NewNode[int64](Inputs("a", "b"), Output("out"), withMutation(m))
	if err != nil {
		return err
	}
	scope := []Channel{{Topic: "a", Partition: 0}, {Topic: "a", Partition: 1}, {Topic: "a", Partition: 2}, {Topic: "b", Partition: 0}}
	others := []Channel{{Topic: "a", Partition: 3}, {Topic: "x", Partition: 0}}
	bases := []int64{0, 1<<7 - 6, 1<<14 - 6, 1<<21 - 6}
	next := map[Channel]int64{}
	for _, ch := range scope {
		next[ch] = bases[rng.IntN(len(bases))] + rng.Int64N(3)
		if err := n.Seed(ch, next[ch]); err != nil {
			return err
		}
	}
	compare := func(step int, what string) error {
		enc, err := n.AppendStamp(nil, "out")
		if err != nil {
			return err
		}
		stamp, err := n.Stamp("out")
		if err != nil {
			return err
		}
		if want := EncodeClock(stamp); !bytes.Equal(enc, want) {
			return fmt.Errorf("step %d, after %s: AppendStamp %x, the encoding of Stamp %v is %x", step, what, enc, stamp, want)
		}
		return nil
	}
	for step := range 400 {
		ch := scope[rng.IntN(len(scope))]
		what := ""
		switch rng.IntN(5) {
		case 0:
			next[ch] += 1 + rng.Int64N(3)
			if err := n.Advance(ch, next[ch]); err != nil {
				return err
			}
			what = fmt.Sprintf("advance of %s to %d", ch, next[ch])
		default:
			// Claims just around the frontiers, so that some wait and
			// some raise the advertised clock above a frontier.
			var es []Entry
			for range rng.IntN(3) {
				c := scope[rng.IntN(len(scope))]
				if rng.IntN(4) == 0 {
					c = others[rng.IntN(len(others))]
				}
				es = append(es, Entry{Channel: c, Offset: max(0, next[c]-2+rng.Int64N(4))})
			}
			clock, err := NewClock(es...)
			if err != nil {
				return err
			}
			off := next[ch] + rng.Int64N(2) // now and then a gap
			next[ch] = off + 1
			if _, err := n.Receive(ch, off, clock, off); err != nil {
				return err
			}
			what = fmt.Sprintf("receive of %s@%d claiming %v", ch, off, clock)
		}
		if err := compare(step, what); err != nil {
			return err
		}
		for {
			d, ok := n.Next()
			if !ok {
				break
			}
			if err := compare(step, fmt.Sprintf("%s and the delivery of %s@%d", what, d.Channel, d.Offset)); err != nil {
				return err
			}
		}
	}
	return nil
}

func TestAppendStampWritesMovedFrontiersInPlace(t *testing.T) {
	for seed := uint64(1); seed <= 300; seed++ {
		require.NoError(t, stampPatchRun(seed, mutationNone), "seed %d", seed)
	}
}
