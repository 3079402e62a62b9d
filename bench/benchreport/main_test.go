package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const sample = `goos: linux
BenchmarkGate/entries=1-2     	10360928	        60 ns/op	       0 B/op	       0 allocs/op
BenchmarkGate/entries=8-2     	 6925875	        %s ns/op	       0 B/op	       0 allocs/op
BenchmarkGate/entries=8-2     	 6925875	        90 ns/op	       0 B/op	       0 allocs/op
BenchmarkGate/entries=8-2     	 6925875	        91 ns/op	       0 B/op	       0 allocs/op
BenchmarkMapLookup-2          	67469204	        10 ns/op	       0 B/op	       0 allocs/op
`

func TestMedianAndRatio(t *testing.T) {
	r, err := parse(strings.NewReader(strings.Replace(sample, "%s", "500", 1)))
	require.NoError(t, err)
	v, ok := r.median("BenchmarkGate/entries=8", "ns/op")
	require.True(t, ok)
	assert.InDelta(t, 91, v, 0.001, "the median ignores the outlier")
}

func TestReportFlagsAMissedTarget(t *testing.T) {
	tests := []struct {
		name     string
		gate8    string
		wantMiss bool
	}{
		{"within target", "100", false},
		{"over target", "130", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := strings.ReplaceAll(sample, "90 ns/op", tt.gate8+" ns/op")
			in = strings.ReplaceAll(in, "91 ns/op", tt.gate8+" ns/op")
			r, err := parse(strings.NewReader(strings.Replace(in, "%s", tt.gate8, 1)))
			require.NoError(t, err)
			var out strings.Builder
			report(&out, r)
			line := ""
			for _, l := range strings.Split(out.String(), "\n") {
				if strings.HasPrefix(l, "| gate, 8-entry clock") {
					line = l
				}
			}
			require.NotEmpty(t, line)
			assert.Equal(t, tt.wantMiss, strings.HasSuffix(line, "MISS |"), line)
		})
	}
}
