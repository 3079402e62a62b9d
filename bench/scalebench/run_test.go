package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The longest stop of a partition counts from the start, between
// arrivals, and up to the end; moved partitions are told apart.
func TestGapsFindEachPartitionsLongestStop(t *testing.T) {
	from := time.Unix(1000, 0)
	at := func(s float64) arrival { return arrival{at: from.Add(time.Duration(s * float64(time.Second))), n: 1} }
	r := result{Moved: []int32{1}, GapByPartition: map[int32]time.Duration{}}
	r.gaps(map[int32][]arrival{
		0: {at(0.1), at(0.2), at(1.7), at(1.9)},
		1: {at(0.1), at(9.0)},
		2: {at(0.5), at(1.0)},
	}, from, from.Add(2*time.Second), 3)
	assert.Equal(t, 1500*time.Millisecond, r.GapByPartition[0], "between arrivals")
	assert.Equal(t, 2*time.Second-100*time.Millisecond, r.GapByPartition[1], "to the end: what came later does not count")
	assert.Equal(t, time.Second, r.GapByPartition[2], "to the end")
	assert.Equal(t, 1900*time.Millisecond, r.GapMoved)
	assert.Equal(t, 1500*time.Millisecond, r.GapUnmoved)
}

// The targets are met only on their side of the goal.
func TestGoalsCatchAMissedTarget(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    result
		met  []bool
	}{
		{"an added worker stops nothing for long", result{Scenario: scenarios[0], GapUnmoved: 900 * time.Millisecond}, []bool{true}},
		{"an added worker stops the others too long", result{Scenario: scenarios[0], GapUnmoved: 1100 * time.Millisecond}, []bool{false}},
		{"no goal for eager rebalancing", result{Scenario: scenarios[2], GapUnmoved: time.Minute}, nil},
		{"a failover within time, restoring little", result{Scenario: scenarios[3], GapMoved: 11 * time.Second, Restored: 9, Changelog: 1000}, []bool{true, true}},
		{"a failover too slow, restoring too much", result{Scenario: scenarios[3], GapMoved: 13 * time.Second, Restored: 10, Changelog: 1000}, []bool{false, false}},
		{"no goal without standbys", result{Scenario: scenarios[4], GapMoved: time.Minute}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var met []bool
			for _, g := range goals([]result{tc.r}) {
				met = append(met, g.Met)
			}
			assert.Equal(t, tc.met, met)
		})
	}
}
