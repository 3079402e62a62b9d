package causal

import (
	"fmt"
	"slices"
)

// NodeOpt configures a Node. Options are applied in order by NewNode.
type NodeOpt interface{ apply(*nodeConfig) }

// OutputOpt configures one output of a Node.
type OutputOpt interface{ applyOutput(*outputConfig) }

type nodeConfig struct {
	inputs  []string
	outputs []outputConfig
	gateOff bool
	mutant  mutation
	// checked lists the inputs whose records' claims are checked against
	// known ends (CheckClaims).
	checked []string
}

type outputConfig struct {
	topic  string
	fedBy  []string // nil: every input
	keep   []string // nil: keep every topic
	pruned bool
}

type nodeOptFunc func(*nodeConfig)

func (f nodeOptFunc) apply(c *nodeConfig) { f(c) }

type outputOptFunc func(*outputConfig)

func (f outputOptFunc) applyOutput(c *outputConfig) { f(c) }

// Inputs declares the topics the node consumes. Which partitions of them are
// in scope is decided by Seed, one channel at a time. At least one input is
// required; there is no default.
func Inputs(topics ...string) NodeOpt {
	return nodeOptFunc(func(c *nodeConfig) { c.inputs = append(c.inputs, topics...) })
}

// CheckClaims makes the node check the claims of records received on the
// given input topics, where causality enters the topology from outside:
// every claim must name an offset below its channel's end as SetEnd last
// reported it. A claim beyond it, or on a channel whose end is unknown or
// which does not exist, is handed back as a *ClaimError and the node is left
// as it was, so that no impossible claim is ever folded into a stamp. The
// caller then learns the channel's end, reports it with SetEnd, and
// receives the record again; a claim still beyond the end is bad input.
// Default: no topic is checked.
func CheckClaims(topics ...string) NodeOpt {
	return nodeOptFunc(func(c *nodeConfig) { c.checked = append(c.checked, topics...) })
}

// Output declares an output topic the node's processor emits to, so that the
// node keeps an advertised clock for it and can stamp its records. A node may
// have no outputs (a sink).
func Output(topic string, opts ...OutputOpt) NodeOpt {
	return nodeOptFunc(func(c *nodeConfig) {
		oc := outputConfig{topic: topic}
		for _, o := range opts {
			o.applyOutput(&oc)
		}
		c.outputs = append(c.outputs, oc)
	})
}

// FedBy names the input topics whose records feed the output: only their
// clocks are folded into the output's advertised clock, and only their
// frontiers are stamped on its records. Default: every input feeds every
// output, which is always sound; naming fewer inputs is sound only if the
// processor really emits to this output from no other input.
func FedBy(inputs ...string) OutputOpt {
	return outputOptFunc(func(c *outputConfig) { c.fedBy = append(c.fedBy, inputs...) })
}

// PruneTo keeps, in the stamps of the output, only entries for the given
// topics: those some gate downstream of the output consumes. Entries for other
// topics are dropped at receive and never stamped, which keeps headers small.
// Default: no pruning. Never prune an output that consumers outside the
// topology read, such as a client session that produces back into it.
func PruneTo(topics ...string) OutputOpt {
	return outputOptFunc(func(c *outputConfig) {
		c.pruned = true
		c.keep = append(c.keep, topics...)
	})
}

// DeliverOnArrival switches the gate off: every head is delivered as soon as
// it is at the front of its channel's queue, whatever its clock claims.
// Per-channel order, the replay guard, fail-closed decoding, advertised clocks
// and stamps are unchanged. It exists to measure what the gate costs and to
// demonstrate what goes wrong without it. Default: the gate is on.
func DeliverOnArrival() NodeOpt {
	return nodeOptFunc(func(c *nodeConfig) { c.gateOff = true })
}

// mutation is a deliberate defect, used only by this package's tests to prove
// that the checks catch what they are meant to catch (negative controls).
type mutation int

const (
	mutationNone mutation = iota
	// mutationRestrictIdle ignores claims on consumed channels whose queue is
	// empty: a plausible but wrong optimisation that is too permissive.
	mutationRestrictIdle
	// mutationStampFrontierOnly stamps only the frontier, not the advertised
	// clock: it breaks the induction that makes the ignore branch sound.
	mutationStampFrontierOnly
	// mutationReuseAcrossChannels skips a header's topic groups that equal
	// those of the last header taken in on any channel, not the record's
	// own: the earlier record then need not come first, so what it claimed
	// need not be covered when this one is delivered.
	mutationReuseAcrossChannels
	// mutationNowIgnoresClaims delivers a record on arrival (ReceiveNow)
	// without looking at its claims.
	mutationNowIgnoresClaims
	// mutationNowPastHeld delivers a record on arrival (ReceiveNow) even
	// when records of its channel are held before it.
	mutationNowPastHeld
	// mutationPatchFrontierOnly writes a moved frontier in place in the
	// encoded stamp without joining it with the advertised entry of its
	// partition.
	mutationPatchFrontierOnly
	// mutationPatchAnyLength writes a moved frontier in place in the
	// encoded stamp even when its varint is longer than the old one.
	mutationPatchAnyLength
)

func withMutation(m mutation) NodeOpt {
	return nodeOptFunc(func(c *nodeConfig) { c.mutant = m })
}

func (c *nodeConfig) validate() error {
	if len(c.inputs) == 0 {
		return fmt.Errorf("%w: no input topics", ErrInvalidConfig)
	}
	seen := map[string]bool{}
	for _, t := range c.inputs {
		if err := validTopic(t); err != nil {
			return fmt.Errorf("%w: input %q: %w", ErrInvalidConfig, t, err)
		}
		if seen[t] {
			return fmt.Errorf("%w: input %q declared twice", ErrInvalidConfig, t)
		}
		seen[t] = true
	}
	for _, t := range c.checked {
		if !seen[t] {
			return fmt.Errorf("%w: claims checked on %q, which is not an input", ErrInvalidConfig, t)
		}
	}
	outs := map[string]bool{}
	for _, o := range c.outputs {
		if err := validTopic(o.topic); err != nil {
			return fmt.Errorf("%w: output %q: %w", ErrInvalidConfig, o.topic, err)
		}
		if outs[o.topic] {
			return fmt.Errorf("%w: output %q declared twice", ErrInvalidConfig, o.topic)
		}
		outs[o.topic] = true
		for _, in := range o.fedBy {
			if !seen[in] {
				return fmt.Errorf("%w: output %q fed by %q, which is not an input", ErrInvalidConfig, o.topic, in)
			}
		}
		for _, k := range o.keep {
			if err := validTopic(k); err != nil {
				return fmt.Errorf("%w: output %q keeps %q: %w", ErrInvalidConfig, o.topic, k, err)
			}
		}
	}
	return nil
}

func validTopic(t string) error {
	switch {
	case t == "":
		return ErrEmptyTopic
	case len(t) > MaxTopicLen:
		return ErrTopicTooLong
	}
	return nil
}

func (o *outputConfig) feeds(input string) bool {
	return o.fedBy == nil || slices.Contains(o.fedBy, input)
}
