//go:build causal_mutants

package causal

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// The deliberate defects built into the gate under -tags causal_mutants
// (make test sets it): the simulation's checker must catch each.
func TestSimulationCatchesTheMutants(t *testing.T) {
	catches(t, []negativeControl{
		{"restrict too permissive: ignore claims on idle channels", simConfig{mutant: mutationRestrictIdle}, "causal:"},
		{"stamps without advertised clocks", simConfig{mutant: mutationStampFrontierOnly}, "causal:"},
		{"a header's groups reused from another channel's", simConfig{mutant: mutationReuseAcrossChannels}, "causal:"},
		{"delivered on arrival whatever it claims", simConfig{mutant: mutationNowIgnoresClaims}, "causal:"},
		{"delivered on arrival past records held before it", simConfig{mutant: mutationNowPastHeld}, ""},
		{"a moved frontier written over a shorter varint in its stamp", simConfig{mutant: mutationPatchAnyLength}, ""},
	})
}

// Negative controls: each way of writing a moved frontier in place wrongly
// must make the stamp differ from its entries' encoding.
func TestAppendStampPatchNegativeControls(t *testing.T) {
	tests := []struct {
		name string
		give mutation
	}{
		{"the frontier written without the advertised entry", mutationPatchFrontierOnly},
		{"a longer varint written over a shorter one", mutationPatchAnyLength},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			caught := 0
			const seeds = 100
			for seed := uint64(1); seed <= seeds; seed++ {
				if stampPatchRun(seed, tt.give) != nil {
					caught++
				}
			}
			t.Logf("%d of %d seeds caught the defect", caught, seeds)
			assert.Positive(t, caught, "the comparison did not notice the defect")
		})
	}
}
