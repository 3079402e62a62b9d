package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The target table prints each value on its side of its goal, so a
// missed ratio does not read as the goal itself, and counts the misses.
func TestTargetTableShowsValuesOnTheirSideOfTheGoal(t *testing.T) {
	ts := []target{
		check("rate", 0.7977, ">= 0.80", func(v float64) bool { return v >= 0.8 }),
		check("restart", 0.42, "<= 1.0", func(v float64) bool { return v <= 1 }),
		{What: "restored", Value: 0, Goal: "0, after >= 1 abort", Met: true},
	}
	table, missed := targetTable(ts)
	assert.Equal(t, 1, missed)
	lines := strings.Split(strings.TrimSpace(table), "\n")
	require.Len(t, lines, 5)
	assert.Equal(t, "| rate | 0.798 | >= 0.80 | MISSED |", lines[2])
	assert.Equal(t, "| restart | 0.42 | <= 1.0 | met |", lines[3])
	assert.Equal(t, "| restored | 0.00 | 0, after >= 1 abort | met |", lines[4])
}
