//go:build cgo

package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func runOf(config string, size, round int, perSec, allocs float64) result {
	return result{Config: config, ValueBytes: size, Run: round, RecordsPerSec: perSec, AllocsPerRecord: allocs}
}

func TestPerRound(t *testing.T) {
	perSec := func(r result) float64 { return r.RecordsPerSec }
	allocs := func(r result) float64 { return r.AllocsPerRecord }
	results := []result{
		// Round 1: on is half of hand; round 2: equal; round 3: on is 0.8
		// of hand. Round 4 ran only hand and must not count. The 1 KB runs
		// and the gate-off runs must not mix in.
		runOf(cfgHand, 100, 1, 100, 30), runOf(cfgGateOn, 100, 1, 50, 31),
		runOf(cfgGateOn, 100, 2, 90, 33), runOf(cfgHand, 100, 2, 90, 30),
		runOf(cfgHand, 100, 3, 100, 30), runOf(cfgGateOn, 100, 3, 80, 30),
		runOf(cfgHand, 100, 4, 10, 30),
		runOf(cfgHand, 1000, 1, 1, 30), runOf(cfgGateOn, 1000, 1, 1000, 30),
		runOf(cfgGateOff, 100, 1, 1, 30),
	}
	tests := []struct {
		name        string
		f           func(result) float64
		cmp         compare
		med, lo, hi float64
		rounds      int
	}{
		{"throughput ratio", perSec, ratio, 0.8, 0.5, 1, 3},
		{"allocation difference", allocs, difference, 1, 0, 3, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			med, lo, hi, n := perRound(results, cfgGateOn, cfgHand, 100, tt.f, tt.cmp)
			assert.Equal(t, tt.rounds, n)
			assert.InDelta(t, tt.med, med, 1e-9)
			assert.InDelta(t, tt.lo, lo, 1e-9)
			assert.InDelta(t, tt.hi, hi, 1e-9)
		})
	}
	_, _, _, n := perRound(results, cfgOnKey, cfgHand, 100, perSec, ratio)
	assert.Zero(t, n, "no round ran both")
}

func TestTargetsCompareMediansAndRounds(t *testing.T) {
	// Medians: hand 100, on 80 (0.80, missed). Rounds: 0.5, 1.0, 0.8.
	results := []result{
		runOf(cfgHand, 100, 1, 100, 0), runOf(cfgGateOn, 100, 1, 50, 0),
		runOf(cfgHand, 100, 2, 90, 0), runOf(cfgGateOn, 100, 2, 90, 0),
		runOf(cfgHand, 100, 3, 100, 0), runOf(cfgGateOn, 100, 3, 80, 0),
	}
	ts := targets(results, []int{100})
	require.Len(t, ts, 1, "only the target whose two configurations ran")
	got := ts[0]
	assert.Contains(t, got.What, "hand-written loop")
	assert.InDelta(t, 0.8, got.Value, 1e-9)
	assert.False(t, got.Met)
	assert.Equal(t, 3, got.Rounds)
	assert.InDelta(t, 0.8, got.RoundMedian, 1e-9)
	assert.InDelta(t, 0.5, got.RoundMin, 1e-9)
	assert.InDelta(t, 1.0, got.RoundMax, 1e-9)
}

func TestMedianInterval(t *testing.T) {
	steady := []float64{100, 101, 99, 100, 102, 98, 100}
	scattered := []float64{100, 130, 70, 115, 85, 125, 75}
	tests := []struct {
		name string
		a, b []float64
		// The interval must hold want and be at most maxWidth wide and at
		// least minWidth.
		want, minWidth, maxWidth float64
	}{
		{"steady runs, same machine", steady, steady, 1, 0.005, 0.06},
		{"scattered runs", scattered, steady, 1, 0.2, 1},
		{"a clear gap", []float64{80, 81, 79, 80, 82, 78, 80}, steady, 0.8, 0.005, 0.06},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lo, hi := medianInterval(tt.a, tt.b, ratio, 7)
			assert.LessOrEqual(t, lo, tt.want)
			assert.GreaterOrEqual(t, hi, tt.want)
			assert.GreaterOrEqual(t, hi-lo, tt.minWidth, "[%.3f, %.3f]", lo, hi)
			assert.LessOrEqual(t, hi-lo, tt.maxWidth, "[%.3f, %.3f]", lo, hi)
			lo2, hi2 := medianInterval(tt.a, tt.b, ratio, 7)
			assert.Equal(t, [2]float64{lo, hi}, [2]float64{lo2, hi2}, "seeded: the same results give the same interval")
		})
	}
}

func TestTargetSettledOnlyWhenTheIntervalClearsTheGoal(t *testing.T) {
	var results []result
	// 1 KB: the loop steady at 100, Causeway steady at 80: missed and
	// settled. 100 B: Causeway's runs scatter around 92 against a steady
	// 100: met by the medians, not settled.
	gate100 := []float64{92, 70, 115, 92, 75, 110, 95}
	for round := range 7 {
		results = append(results,
			runOf(cfgHand, 1000, round, 100+float64(round%3-1), 0), runOf(cfgGateOn, 1000, round, 80+float64(round%3-1), 0),
			runOf(cfgHand, 100, round, 100+float64(round%3-1), 0), runOf(cfgGateOn, 100, round, gate100[round], 0))
	}
	ts := targets(results, []int{100, 1000})
	require.Len(t, ts, 2)
	assert.True(t, ts[0].Met, ts[0].What)
	assert.False(t, ts[0].Settled, "%s: [%.2f, %.2f]", ts[0].What, ts[0].IntervalLow, ts[0].IntervalHigh)
	assert.False(t, ts[1].Met, ts[1].What)
	assert.True(t, ts[1].Settled, "%s: [%.2f, %.2f]", ts[1].What, ts[1].IntervalLow, ts[1].IntervalHigh)
}

// The report prints a target's value on its side of the goal: the
// target hands its goal to benchfmt.Value (whose test covers the cases).
func TestTargetShownOnItsSideOfTheGoal(t *testing.T) {
	atLeast := func(v float64) bool { return v >= 0.90 }
	tg := target{Value: 0.8977, Met: atLeast(0.8977), meets: atLeast}
	assert.Equal(t, "0.898", tg.shown())
}
