package runtime_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/twmb/franz-go/pkg/kgo"
)

func verdict(order, value string, off int64) *kgo.Record {
	return &kgo.Record{Key: []byte(order), Value: []byte(value), Offset: off}
}

// The shop's checker must catch each kind of failure it is for.
func TestCheckerCatchesWhatItIsFor(t *testing.T) {
	wl := workload{payments: map[string][]string{"o": {"p0", "p1"}}}
	tests := []struct {
		name     string
		give     []*kgo.Record
		wantKind string
	}{
		{"clean run", []*kgo.Record{verdict("o", "p0 known=true n=1", 0), verdict("o", "p1 known=true n=2", 1)}, ""},
		{"lost verdict", []*kgo.Record{verdict("o", "p0 known=true n=1", 0)}, "lost:"},
		{"duplicate verdict", []*kgo.Record{verdict("o", "p0 known=true n=1", 0), verdict("o", "p0 known=true n=2", 1),
			verdict("o", "p1 known=true n=3", 2)}, "duplicate:"},
		{"effect before cause", []*kgo.Record{verdict("o", "p0 known=false n=1", 0), verdict("o", "p1 known=true n=2", 1)}, "causal:"},
		{"state counted twice", []*kgo.Record{verdict("o", "p0 known=true n=1", 0), verdict("o", "p1 known=true n=3", 1)}, "state:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			problems := checkVerdicts(wl, tt.give)
			if tt.wantKind == "" {
				assert.Empty(t, problems)
				return
			}
			found := false
			for _, p := range problems {
				found = found || strings.HasPrefix(p, tt.wantKind)
			}
			assert.True(t, found, "want a %q problem, got %v", tt.wantKind, problems)
		})
	}
}
