package causal

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// simSeeds returns the seeds to run: CAUSEWAY_SIM_SEED=n replays one seed,
// CAUSEWAY_SIM_SEEDS=n runs seeds 1..n (default 100; `make test` runs 300).
func simSeeds(t *testing.T) []uint64 {
	t.Helper()
	if v := os.Getenv("CAUSEWAY_SIM_SEED"); v != "" {
		seed, err := strconv.ParseUint(v, 10, 64)
		require.NoError(t, err, "CAUSEWAY_SIM_SEED")
		return []uint64{seed}
	}
	n := 100
	if v := os.Getenv("CAUSEWAY_SIM_SEEDS"); v != "" {
		var err error
		n, err = strconv.Atoi(v)
		require.NoError(t, err, "CAUSEWAY_SIM_SEEDS")
	}
	seeds := make([]uint64, n)
	for i := range seeds {
		seeds[i] = uint64(i + 1)
	}
	return seeds
}

const simSteps = 1500

func runSeeds(t *testing.T, test string, cfg simConfig) {
	t.Helper()
	var totals simResult
	for _, seed := range simSeeds(t) {
		cfg.seed = seed
		res := runSim(cfg)
		totals.records += res.records
		totals.delivered += res.delivered
		totals.deliveredNow += res.deliveredNow
		totals.crashes += res.crashes
		totals.aborted += res.aborted
		totals.maxHeld = max(totals.maxHeld, res.maxHeld)
		if len(res.violations) > 0 {
			t.Fatalf("seed %d: %s\ntopology: %s\nreplay: CAUSEWAY_SIM_SEED=%d go test ./causal -run '^%s$' -v",
				seed, strings.Join(res.violations, "\n"), res.topology, seed, test)
		}
	}
	t.Logf("records %d, deliveries %d (%d on arrival), crashes %d, aborted records %d, most held at once %d",
		totals.records, totals.delivered, totals.deliveredNow, totals.crashes, totals.aborted, totals.maxHeld)
	// The simulation must exercise what it claims to: holding, crashing, aborting.
	if len(simSeeds(t)) >= 20 {
		assert.Positive(t, totals.crashes)
		assert.Positive(t, totals.aborted)
		assert.Positive(t, totals.deliveredNow)
		assert.Less(t, totals.deliveredNow, totals.delivered, "every delivery on arrival: nothing was held for ReceiveNow")
		assert.Greater(t, totals.maxHeld, 1)
	}
}

// Safety mode: faults throughout (crashes, aborts, hung transactions, lag);
// every delivery is checked against the oracle as it happens.
func TestSimulationSafety(t *testing.T) {
	runSeeds(t, "TestSimulationSafety", simConfig{steps: simSteps})
}

// Liveness mode: after the faulty phase, faults and producers stop and every
// task must drain: nothing held, every committed business record delivered.
func TestSimulationLiveness(t *testing.T) {
	runSeeds(t, "TestSimulationLiveness", simConfig{steps: simSteps, liveness: true})
}

// With deliverable records ranked by an order unrelated to arrival
// (PreferBy), the gate stays safe and live.
func TestSimulationWithPreferredOrder(t *testing.T) {
	runSeeds(t, "TestSimulationWithPreferredOrder", simConfig{steps: simSteps, liveness: true, prefer: true})
}

// negativeControl is a defect switched in, and how the violations it must
// cause begin: causal ones unless said otherwise.
type negativeControl struct {
	name string
	give simConfig
	want string
}

// Negative controls: with a defect switched in, the same checker must find
// causal violations, or it proves nothing. The defects built into the
// gate itself are in mutants_test.go, built with -tags causal_mutants.
func TestSimulationNegativeControls(t *testing.T) {
	catches(t, []negativeControl{
		{"gate off: deliver on arrival", simConfig{gateOff: true}, "causal:"},
		{"restart without restoring the checkpoint", simConfig{skipRestore: true}, "causal:"},
	})
}

// catches runs each negative control over many seeds and fails the test
// for one no seed of which the checker caught.
func catches(t *testing.T, tests []negativeControl) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			caught := 0
			const seeds = 200
			for seed := uint64(1); seed <= seeds; seed++ {
				cfg := tt.give
				cfg.seed, cfg.steps, cfg.liveness = seed, simSteps, true
				res := runSim(cfg)
				for _, v := range res.violations {
					if strings.HasPrefix(v, tt.want) {
						caught++
						break
					}
				}
			}
			t.Logf("%d of %d seeds found a violation beginning %q", caught, seeds, tt.want)
			assert.Positive(t, caught, "the checker did not notice the defect")
		})
	}
}

// The topologies the simulation draws must include the shapes the ignore
// branch matters for: diamonds (two paths from one topic into one
// processor) and paths of two or more hops whose middle processor does not
// consume the ancestor topic that the last one does.
func TestSimulationTopologiesCoverTheShapes(t *testing.T) {
	diamonds, skipHops := 0, 0
	for _, seed := range simSeeds(t) {
		s := &sim{cfg: simConfig{seed: seed}}
		s.rng = newSimRand(seed)
		s.buildTopology()
		// upstream[topic] = topics it is derived from, transitively.
		upstream := map[*simTopic]map[*simTopic]int{} // ancestor -> number of hops
		for _, p := range s.procs {
			for _, o := range p.outputs {
				up := map[*simTopic]int{}
				for _, in := range p.inputs {
					up[in] = 1
					for a, h := range upstream[in] {
						if old, ok := up[a]; !ok || h+1 > old {
							up[a] = h + 1
						}
					}
				}
				upstream[o] = up
			}
		}
		diamond, skip := false, false
		for _, p := range s.procs {
			paths := map[*simTopic]int{}
			for _, in := range p.inputs {
				for a := range upstream[in] {
					paths[a]++
				}
				for _, other := range p.inputs {
					if h, ok := upstream[in][other]; ok && h >= 2 {
						skip = true // p reads `other` directly and through >= 2 hops
					}
				}
			}
			for _, n := range paths {
				diamond = diamond || n >= 2
			}
		}
		if diamond {
			diamonds++
		}
		if skip {
			skipHops++
		}
	}
	t.Logf("%d seeds: %d with a diamond, %d with a multi-hop path around a processor that skips the ancestor",
		len(simSeeds(t)), diamonds, skipHops)
	if len(simSeeds(t)) >= 50 {
		assert.Positive(t, diamonds)
		assert.Positive(t, skipHops)
	}
}
