package main

import (
	"context"
	"encoding/json"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/driver"
	"github.com/causeway-stream/causeway/framework/serde"
	"github.com/causeway-stream/causeway/operators"
)

// The topology counts views per region and minute by the time in their
// JSON, whatever time Kafka gave them; each window comes out once, when
// it closes; a view that is not JSON goes to the dead-letter topic, one
// without a time is skipped and reported.
func TestTopologyCountsViewsByTheirTime(t *testing.T) {
	topo, err := Topology()
	require.NoError(t, err)
	d, err := driver.New(topo, driver.DefaultPartitions(2))
	require.NoError(t, err)
	pipe := func(topic, key string, value any) {
		t.Helper()
		b, ok := value.([]byte)
		if !ok {
			b, err = json.Marshal(value)
			require.NoError(t, err)
		}
		// Kafka's times run backwards here: only the views' own count.
		_, _, err := d.Pipe(topic, framework.Record{Key: []byte(key), Value: b, Timestamp: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).Add(-time.Duration(len(key)) * time.Hour)})
		require.NoError(t, err)
		require.NoError(t, d.Run())
	}
	pipe(ProfilesTopic, "ann", Profile{Region: "emea"})
	pipe(ProfilesTopic, "bob", Profile{Region: "apac"})
	at := func(s int) time.Time { return start.Add(time.Duration(s) * time.Second) }
	pipe(ViewsTopic, "ann", View{Page: "/", At: at(5)})
	pipe(ViewsTopic, "bob", View{Page: "/", At: at(20)})
	pipe(ViewsTopic, "ann", View{Page: "/cart", At: at(65)})
	pipe(ViewsTopic, "ann", []byte("not json"))
	pipe(ViewsTopic, "bob", View{Page: "/no-time"})
	pipe(ViewsTopic, "ann", View{Page: "/", At: at(50)}) // out of order, within the grace
	pipe(ViewsTopic, "ann", View{Page: "/", At: at(3600)})
	pipe(ViewsTopic, "bob", View{Page: "/", At: at(3600)})

	recs, err := driver.NewOutput(d, RegionViewsTopic, operators.WindowedKey(serde.String(), Window), serde.Int64()).All()
	require.NoError(t, err)
	got, stamps := map[string]int64{}, map[string]string{}
	for _, r := range recs {
		w := r.Key.Key + " " + r.Key.Start.Format("15:04")
		got[w] += r.Value
		stamps[w] = r.Timestamp.UTC().Format("15:04:05")
	}
	assert.Equal(t, map[string]int64{"emea 09:00": 2, "emea 09:01": 1, "apac 09:00": 1}, got, "each window once, with its views by their own time")
	assert.Equal(t, map[string]string{"emea 09:00": "09:00:50", "emea 09:01": "09:01:05", "apac 09:00": "09:00:20"}, stamps,
		"a window's count carries the time of its latest view")
	dead, err := d.Records(DeadLetterTopic)
	require.NoError(t, err)
	assert.Len(t, dead, 1, "the view that is not JSON")
	skipped := 0
	for _, x := range d.Dropped() {
		if x.Event.Reason == "invalid-timestamp" {
			skipped++
		}
	}
	assert.Equal(t, 1, skipped, "the view without a time")
}

// The demo on the embedded broker: every window's count matches the
// independent count, each window is emitted once, every view that is not
// JSON reaches the dead-letter topic.
func TestDemoEndToEnd(t *testing.T) {
	topo, err := Topology()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := runDemo(ctx, topo, demoOptions{users: 12, views: 600, badEvery: 50, partitions: 2, timeout: time.Minute, seed: 7}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, 12, res.Bad)
	assert.Equal(t, 588, res.Views)
	assert.Empty(t, res.mismatch())
}

// The demo's own check can fail: each kind of wrong result is reported.
func TestDemoMismatchIsReported(t *testing.T) {
	w := window{"emea", start}
	ok := demoResult{Expected: map[window]int64{w: 3}, Counts: map[window]int64{w: 3}, Bad: 1, DeadLetter: 1}
	assert.Empty(t, ok.mismatch())
	for _, tt := range []struct {
		want   string
		damage func(r *demoResult)
	}{
		{"emea at 09:00 counted 2 views, expected 3", func(r *demoResult) { r.Counts = map[window]int64{w: 2} }},
		{"2 windows counted, 1 expected", func(r *demoResult) { r.Counts = map[window]int64{w: 3, {"apac", start}: 1} }},
		{"1 windows emitted more than once", func(r *demoResult) { r.Repeats = 1 }},
		{"0 dead letters, 1 views were not JSON", func(r *demoResult) { r.DeadLetter = 0 }},
	} {
		r := ok
		tt.damage(&r)
		assert.Contains(t, r.mismatch(), tt.want)
	}
}
