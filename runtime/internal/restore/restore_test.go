package restore

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"

	"github.com/causeway-stream/causeway/causal"
)

// A restore under way reports, per task still restoring, the records
// applied of the total, the bytes, the rate so far and what it makes of
// the rest, and sets the task's progress ratio.
func TestRestoreReportsProgress(t *testing.T) {
	clock := time.Unix(1_700_000_000, 0)
	ratio := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ratio"}, []string{"task"})
	got := map[string]Progress{}
	r := &Restorer{Now: func() time.Time { return clock }, Ratio: ratio,
		Report: func(id string, p Progress, done bool) {
			assert.False(t, done)
			got[id] = p
		}}
	s := &storeTarget{id: "count/0"}
	s.records.Store(2500)
	s.bytes.Store(40_000)
	other := &storeTarget{id: "count/1"}
	other.records.Store(7)
	targets := map[causal.Channel]*storeTarget{{Topic: "c"}: s, {Topic: "c", Partition: 1}: other}
	started := clock
	clock = clock.Add(2 * time.Second)
	r.report([]string{"count/0"}, targets, map[string]int64{"count/0": 10_000}, started)

	assert.Equal(t, map[string]Progress{"count/0": {Records: 2500, Total: 10_000, Bytes: 40_000, PerSecond: 1250, Remaining: 6 * time.Second}}, got)
	assert.InDelta(t, 0.25, testutil.ToFloat64(ratio.WithLabelValues("count/0")), 1e-9)
}

// The positions a task's stores keep come back as they were written, and
// anything else is refused as a malformed record.
func TestPositionsRoundTrip(t *testing.T) {
	for _, p := range []Positions{{}, {"counts": 0}, {"counts": 42, "totals": 1 << 40}} {
		got, err := DecodePositions(p.Encode())
		assert.NoError(t, err)
		assert.Equal(t, p, got)
	}
	for _, b := range [][]byte{nil, {0}, {positionsVersion, 5}, {positionsVersion, 1, 3, 'a'}} {
		_, err := DecodePositions(b)
		assert.ErrorIs(t, err, ErrBadChangelog, "%v", b)
	}
}
