// Package benchfmt formats the values the benchmark reports hold up
// against their goals.
package benchfmt

import "strconv"

// Value prints v with two decimals, or with as many more (up to four) as
// it takes for the printed number to fall on the same side of the goal as
// v itself: against "at least 0.90", 0.8977 prints as 0.898, not as a
// missed 0.90. meets is the goal as a test of a value; nil prints two
// decimals.
func Value(v float64, meets func(float64) bool) string {
	s := strconv.FormatFloat(v, 'f', 2, 64)
	if meets == nil {
		return s
	}
	met := meets(v)
	for prec := 3; prec <= 4; prec++ {
		if printed, err := strconv.ParseFloat(s, 64); err == nil && meets(printed) == met {
			break
		}
		s = strconv.FormatFloat(v, 'f', prec, 64)
	}
	return s
}
