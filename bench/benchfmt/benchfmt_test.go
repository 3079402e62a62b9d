package benchfmt_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/causeway-stream/causeway/bench/benchfmt"
)

// A value the goal tells apart from its two-decimal rounding is printed
// with the decimals that show which side of the goal it lies on.
func TestValueShownOnItsSideOfTheGoal(t *testing.T) {
	atLeast := func(v float64) bool { return v >= 0.90 }
	atMost := func(v float64) bool { return v <= 1.30 }
	tests := []struct {
		value float64
		meets func(float64) bool
		want  string
	}{
		{0.8977, atLeast, "0.898"},   // rounds up to the goal, misses it
		{0.95, atLeast, "0.95"},      // clear of the goal
		{0.9, atLeast, "0.90"},       // on the goal, meets it
		{1.3004, atMost, "1.3004"},   // three decimals still read as met
		{1.3081, atMost, "1.31"},     // rounds away from the goal, as it lies
		{1.2951, atMost, "1.30"},     // rounds onto the goal, meets it
		{0.89999, atLeast, "0.9000"}, // four decimals at most
		{0.8977, nil, "0.90"},        // no goal to show a side of
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, benchfmt.Value(tc.value, tc.meets), "value %v", tc.value)
	}
}
