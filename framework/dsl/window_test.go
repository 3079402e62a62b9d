package dsl_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/driver"
	"github.com/causeway-stream/causeway/framework/dsl"
	"github.com/causeway-stream/causeway/framework/serde"
	"github.com/causeway-stream/causeway/operators"
)

// at is a record timestamp, in milliseconds since the epoch (windows are
// aligned to the epoch, as in Kafka Streams).
func at(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// timed is one input record: key and timestamp in milliseconds.
type timed struct {
	key string
	ms  int64
}

// runWindows pipes the records one by one (one Run each, so the order is
// the processing order), restarting every task after restartAfter records
// (negative: never), and renders what reached "out" as
// key@start-end=count, with "nil" for a tombstone.
func runWindows(t *testing.T, topo *framework.Topology, window serde.Serde[operators.Windowed[string]], in []timed, restartAfter int) ([]string, []driver.Dropped) {
	t.Helper()
	d, err := driver.New(topo)
	require.NoError(t, err)
	input := driver.NewInput(d, "in", serde.String(), serde.String())
	for i, r := range in {
		if i == restartAfter {
			for _, st := range d.Tasks() {
				require.NoError(t, d.RestartTask(st.ID))
			}
		}
		_, _, err := input.PipeAt(r.key, fmt.Sprint(i), at(r.ms))
		require.NoError(t, err)
		require.NoError(t, d.Run())
	}
	recs, err := d.Records("out")
	require.NoError(t, err)
	var out []string
	for _, r := range recs {
		w, err := window.Deserialize(r.Key)
		require.NoError(t, err)
		v := "nil"
		if r.Value != nil {
			n, err := serde.Int64().Deserialize(r.Value)
			require.NoError(t, err)
			v = fmt.Sprint(n)
		}
		out = append(out, fmt.Sprintf("%s@%d-%d=%s", w.Key, w.Start.UnixMilli(), w.End.UnixMilli(), v))
	}
	return out, d.Dropped()
}

// countDropped counts the dropped records of one reason.
func countDropped(dropped []driver.Dropped, reason string) int {
	n := 0
	for _, d := range dropped {
		if d.Event.Reason == reason {
			n++
		}
	}
	return n
}

func timeWindowCount(t *testing.T, w operators.Windows, final bool) *framework.Topology {
	b := dsl.NewBuilder("windows")
	windowed := dsl.WindowedBy(dsl.From(b, "in", text).GroupByKey(), w)
	if final {
		windowed = windowed.EmitOnWindowClose()
	}
	windowed.Count("counts").ToStream().To("out")
	topo, err := b.Build()
	require.NoError(t, err)
	return topo
}

// Time windows by Kafka Streams' rules: a window is [start, start+size),
// aligned to the epoch; it accepts records until stream time reaches its
// end plus grace; a record all of whose windows are closed is dropped as
// late. The hopping case is the example of TimeWindows' documentation
// (size 5000, advance 3000: windows [0;5000), [3000;8000), ...).
func TestTimeWindowsFollowKafkaStreams(t *testing.T) {
	tests := []struct {
		name  string
		w     operators.Windows
		final bool
		in    []timed
		want  []string
		late  int
	}{
		{
			name: "hopping windows of TimeWindows' documentation",
			w:    operators.Hopping(5000*time.Millisecond, 3000*time.Millisecond, time.Hour),
			in:   []timed{{"A", 4000}, {"A", 1000}, {"A", 7999}, {"A", 8000}},
			want: []string{
				"A@0-5000=1", "A@3000-8000=1", // 4000 is in both windows that hold it
				"A@0-5000=2",                      // 1000: only [0;5000)
				"A@3000-8000=2", "A@6000-11000=1", // 7999: the end is exclusive
				"A@6000-11000=2", // 8000: [3000;8000) no longer holds it
			},
		},
		{
			name: "out of order within grace, then late",
			w:    operators.Tumbling(10*time.Millisecond, 5*time.Millisecond),
			in: []timed{
				{"A", 3}, {"A", 12}, // stream time 12
				{"A", 7},  // [0;10) closes at 15: still open
				{"A", 15}, // stream time 15: [0;10) closes now
				{"A", 9},  // late
				{"B", 2},  // late, whatever its key
			},
			want: []string{"A@0-10=1", "A@10-20=1", "A@0-10=2", "A@10-20=2"},
			late: 2,
		},
		{
			name:  "emit on window close: one result per window, when stream time passes its end plus grace",
			w:     operators.Tumbling(10*time.Millisecond, 2*time.Millisecond),
			final: true,
			in: []timed{
				{"A", 1}, {"B", 3}, {"A", 5},
				{"A", 11}, // stream time 11: [0;10) open until 12
				{"A", 8},  // still on time
				{"B", 12}, // [0;10) closes
				{"A", 4},  // late
				{"A", 35}, // [10;20) closes, [20;30) never had a record
			},
			want: []string{"A@0-10=3", "B@0-10=1", "A@10-20=1", "B@10-20=1"},
			late: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			topo := timeWindowCount(t, tt.w, tt.final)
			got, dropped := runWindows(t, topo, operators.WindowedKey(serde.String(), tt.w.Size), tt.in, -1)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.late, countDropped(dropped, "late"), "records dropped as late")
		})
	}
}

// Emitting on window close survives a restart: every window is emitted
// once, whether the restart falls before or after it closes.
func TestEmitOnWindowCloseAcrossARestart(t *testing.T) {
	w := operators.Tumbling(10*time.Millisecond, 0)
	in := []timed{{"A", 1}, {"B", 2}, {"A", 9}, {"A", 10}, {"B", 14}, {"A", 21}, {"B", 33}, {"A", 40}}
	want := []string{"A@0-10=2", "B@0-10=1", "A@10-20=1", "B@10-20=1", "A@20-30=1", "B@30-40=1"}
	for restart := 1; restart < len(in); restart++ {
		t.Run(fmt.Sprintf("restart after %d records", restart), func(t *testing.T) {
			got, _ := runWindows(t, timeWindowCount(t, w, true), operators.WindowedKey(serde.String(), w.Size), in, restart)
			assert.Equal(t, want, got)
		})
	}
}

func sessionCount(t *testing.T, w dsl.SessionWindows, final bool) *framework.Topology {
	b := dsl.NewBuilder("sessions")
	sessioned := dsl.SessionWindowedBy(dsl.From(b, "in", text).GroupByKey(), w)
	if final {
		sessioned = sessioned.EmitOnWindowClose()
	}
	sessioned.Count("sessions").ToStream().To("out")
	topo, err := b.Build()
	require.NoError(t, err)
	return topo
}

// Session windows by Kafka Streams' rules. The first case is the example
// of SessionWindows' documentation: with a gap of 5, records of A at 10,
// 12 and 20 make two sessions, [10,12] and [20,20]; a record at 16 then
// merges both into [10,20], aggregating all four. Each merged-away
// session gets a tombstone before the merged one is emitted.
func TestSessionWindowsFollowKafkaStreams(t *testing.T) {
	tests := []struct {
		name  string
		w     dsl.SessionWindows
		final bool
		in    []timed
		want  []string
		late  int
	}{
		{
			name: "the documentation's example",
			w:    dsl.SessionWindows{Gap: 5 * time.Millisecond, Grace: time.Hour},
			in:   []timed{{"A", 10}, {"A", 12}, {"A", 20}, {"A", 16}},
			want: []string{
				"A@10-10=1",
				"A@10-10=nil", "A@10-12=2",
				"A@20-20=1",
				"A@10-12=nil", "A@20-20=nil", "A@10-20=4",
			},
		},
		{
			name: "keys have sessions of their own; a record exactly a gap away joins",
			w:    dsl.SessionWindows{Gap: 5 * time.Millisecond, Grace: time.Hour},
			in:   []timed{{"A", 10}, {"B", 12}, {"A", 15}, {"A", 21}},
			want: []string{"A@10-10=1", "B@12-12=1", "A@10-10=nil", "A@10-15=2", "A@21-21=1"},
		},
		{
			// KAFKA-12718: a record is late only when its session would end
			// before stream time minus grace minus the gap.
			name: "grace: a record whose session ends before stream time minus grace minus the gap is late",
			w:    dsl.SessionWindows{Gap: 5 * time.Millisecond, Grace: 10 * time.Millisecond},
			in: []timed{
				{"A", 100},
				{"A", 90}, // on time: a session of its own, ending at stream time minus grace
				{"B", 120},
				{"B", 110}, // on time: ends at 110, stream time 120 minus grace
				{"C", 105}, // on time: ends at 105, stream time 120 minus grace minus the gap
				{"D", 104}, // late: a session of its own ending at 104
			},
			want: []string{"A@100-100=1", "A@90-90=1", "B@120-120=1", "B@110-110=1", "C@105-105=1"},
			late: 1,
		},
		{
			// [10,12] has ended before stream time 13, but 16 is on time and
			// joins it: a session is final only a gap later.
			name:  "emit on window close: each session once, when no record on time can join it",
			w:     dsl.SessionWindows{Gap: 5 * time.Millisecond, Grace: 0},
			final: true,
			in:    []timed{{"A", 10}, {"A", 12}, {"B", 13}, {"A", 16}, {"A", 30}, {"B", 40}},
			want:  []string{"A@10-16=3", "B@13-13=1", "A@30-30=1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, dropped := runWindows(t, sessionCount(t, tt.w, tt.final), operators.SessionWindowedKey(serde.String()), tt.in, -1)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.late, countDropped(dropped, "late"), "records dropped as late")
		})
	}
}

// Sessions survive a restart: a session begun before it merges with a
// record after it.
func TestSessionsAcrossARestart(t *testing.T) {
	w := dsl.SessionWindows{Gap: 5 * time.Millisecond, Grace: time.Hour}
	in := []timed{{"A", 10}, {"A", 12}, {"A", 20}, {"A", 16}}
	plain, _ := runWindows(t, sessionCount(t, w, false), operators.SessionWindowedKey(serde.String()), in, -1)
	for restart := 1; restart < len(in); restart++ {
		got, _ := runWindows(t, sessionCount(t, w, false), operators.SessionWindowedKey(serde.String()), in, restart)
		assert.Equal(t, plain, got, "restart after %d records", restart)
	}
}

func slidingCount(t *testing.T, w dsl.SlidingWindows, final ...bool) *framework.Topology {
	b := dsl.NewBuilder("sliding")
	sliding := dsl.SlidingWindowedBy(dsl.From(b, "in", text).GroupByKey(), w)
	if len(final) > 0 && final[0] {
		sliding = sliding.EmitOnWindowClose()
	}
	sliding.Count("sliding").ToStream().To("out")
	topo, err := b.Build()
	require.NoError(t, err)
	return topo
}

// lastOfEach keeps the last result of each window, in order of first
// appearance.
func lastOfEach(results []string) []string {
	var order []string
	last := map[string]string{}
	for _, r := range results {
		w := r[:strings.LastIndex(r, "=")]
		if _, ok := last[w]; !ok {
			order = append(order, w)
		}
		last[w] = r
	}
	out := make([]string, len(order))
	for i, w := range order {
		out[i] = last[w]
	}
	return out
}

// Sliding windows by Kafka Streams' rules. The first case is the example
// of SlidingWindows' documentation: with a difference of 5000, records at
// 8000, 9200 and 12400 make five windows, [3000;8000] holding the first,
// [4200;9200] the first two, [7400;12400] all three, [8001;13001] the last
// two and [9201;14201] the last.
func TestSlidingWindowsFollowKafkaStreams(t *testing.T) {
	tests := []struct {
		name    string
		w       dsl.SlidingWindows
		in      []timed
		want    []string // every result, in order
		windows []string // the last result of each window
		late    int
	}{
		{
			name: "the documentation's example",
			w:    dsl.SlidingWindows{Difference: 5000 * time.Millisecond, Grace: time.Hour},
			in:   []timed{{"A", 8000}, {"A", 9200}, {"A", 12400}},
			// In Kafka Streams' order: the windows that held records before,
			// latest start first, then the ones the record makes (the window
			// just after the record before it, then its own).
			want: []string{
				"A@3000-8000=1",
				"A@8001-13001=1", "A@4200-9200=2",
				"A@8001-13001=2", "A@9201-14201=1", "A@7400-12400=3",
			},
			windows: []string{"A@3000-8000=1", "A@8001-13001=2", "A@4200-9200=2", "A@9201-14201=1", "A@7400-12400=3"},
		},
		{
			name:    "out of order: a record lands in windows made before it",
			w:       dsl.SlidingWindows{Difference: 5000 * time.Millisecond, Grace: time.Hour},
			in:      []timed{{"A", 8000}, {"A", 12400}, {"A", 9200}},
			windows: []string{"A@3000-8000=1", "A@8001-13001=2", "A@7400-12400=3", "A@4200-9200=2", "A@9201-14201=1"},
		},
		{
			name: "keys apart; a record further than the difference from the last starts afresh",
			w:    dsl.SlidingWindows{Difference: 10 * time.Millisecond, Grace: time.Hour},
			in:   []timed{{"A", 100}, {"B", 105}, {"A", 200}},
			want: []string{"A@90-100=1", "B@95-105=1", "A@190-200=1"},
		},
		{
			// Stream time 100 closes the windows ending before 95. 94's own
			// window [84;94] has closed, but the open windows that hold it
			// still take it, and it makes [95;105]; 84 has no open window
			// left (84+10 < 95), so it is late.
			name: "grace: a record is late only when every window that could hold it has closed",
			w:    dsl.SlidingWindows{Difference: 10 * time.Millisecond, Grace: 5 * time.Millisecond},
			in:   []timed{{"A", 100}, {"A", 96}, {"A", 94}, {"A", 84}},
			want: []string{
				"A@90-100=1",
				"A@90-100=2", "A@86-96=1", "A@97-107=1",
				"A@90-100=3", "A@86-96=2", "A@95-105=2",
			},
			late: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, dropped := runWindows(t, slidingCount(t, tt.w), operators.WindowedKey(serde.String(), tt.w.Difference), tt.in, -1)
			if tt.want != nil {
				assert.Equal(t, tt.want, got)
			}
			if tt.windows != nil {
				assert.Equal(t, tt.windows, lastOfEach(got))
			}
			assert.Equal(t, tt.late, countDropped(dropped, "late"), "records dropped as late")
			for restart := 1; restart < len(tt.in); restart++ {
				again, _ := runWindows(t, slidingCount(t, tt.w), operators.WindowedKey(serde.String(), tt.w.Difference), tt.in, restart)
				assert.Equal(t, got, again, "restart after %d records", restart)
			}
		})
	}
}

// Emitting sliding windows on close gives the documentation's five
// windows once each, in order of start as they close, also across a
// restart at any point.
func TestSlidingWindowsEmittedOnClose(t *testing.T) {
	w := dsl.SlidingWindows{Difference: 5000 * time.Millisecond}
	in := []timed{{"A", 8000}, {"A", 9200}, {"A", 12400}, {"A", 30000}}
	want := []string{"A@3000-8000=1", "A@4200-9200=2", "A@7400-12400=3", "A@8001-13001=2", "A@9201-14201=1"}
	got, _ := runWindows(t, slidingCount(t, w, true), operators.WindowedKey(serde.String(), w.Difference), in, -1)
	assert.Equal(t, want, got)
	for restart := 1; restart < len(in); restart++ {
		again, _ := runWindows(t, slidingCount(t, w, true), operators.WindowedKey(serde.String(), w.Difference), in, restart)
		assert.Equal(t, want, again, "restart after %d records", restart)
	}
}

// Windowed and session results go to the partition of their base key,
// as Kafka Streams' WindowedStreamPartitioner places them, not of the
// whole windowed key: a consumer co-partitioned on the base key (a Java
// one, say) finds each key's windows in its key's partition.
func TestWindowedResultsArePlacedByTheirBaseKey(t *testing.T) {
	const parts = 4
	for _, tt := range []struct {
		name   string
		window func(g dsl.Grouped[string, string]) dsl.Stream[operators.Windowed[string], int64]
		key    serde.Serde[operators.Windowed[string]]
	}{
		{"tumbling", func(g dsl.Grouped[string, string]) dsl.Stream[operators.Windowed[string], int64] {
			return dsl.WindowedBy(g, operators.Tumbling(10*time.Second, 0)).Count("counts").ToStream()
		}, operators.WindowedKey(serde.String(), 10*time.Second)},
		{"sessions", func(g dsl.Grouped[string, string]) dsl.Stream[operators.Windowed[string], int64] {
			return dsl.SessionWindowedBy(g, dsl.SessionWindows{Gap: 5 * time.Second}).Count("sessions").ToStream()
		}, operators.SessionWindowedKey(serde.String())},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := dsl.NewBuilder("placed")
			tt.window(dsl.From(b, "in", text).GroupByKey()).To("out")
			topo, err := b.Build()
			require.NoError(t, err)
			d, err := driver.New(topo, driver.Partitions("in", parts), driver.Partitions("out", parts))
			require.NoError(t, err)
			input := driver.NewInput(d, "in", serde.String(), serde.String())
			for i := range 40 {
				_, _, err := input.PipeAt(fmt.Sprintf("k%d", i%10), "v", at(int64(i)*3000))
				require.NoError(t, err)
			}
			require.NoError(t, d.Run())
			recs, err := d.Records("out")
			require.NoError(t, err)
			require.NotEmpty(t, recs)
			byWholeKey := 0
			for _, r := range recs {
				w, err := tt.key.Deserialize(r.Key)
				require.NoError(t, err)
				assert.Equal(t, framework.PartitionFor([]byte(w.Key), parts), r.Partition, "%s's window at %s", w.Key, w.Start)
				if framework.PartitionFor(r.Key, parts) != r.Partition {
					byWholeKey++
				}
			}
			assert.Positive(t, byWholeKey, "placing by the whole windowed key would have put some elsewhere: the test tells the two apart")
		})
	}
}

// A session aggregate's store says it holds sessions, so that queries
// label each with its start and end.
func TestASessionStoreSaysItHoldsSessions(t *testing.T) {
	b := dsl.NewBuilder("s")
	dsl.SessionWindowedBy(dsl.From(b, "in", text).GroupByKey(), dsl.SessionWindows{Gap: time.Second}).Count("sessions")
	dsl.WindowedBy(dsl.From(b, "other", text).GroupByKey(), operators.Tumbling(time.Second, 0)).Count("windows")
	topo, err := b.Build()
	require.NoError(t, err)
	kinds := map[string]bool{}
	for _, p := range topo.Processors() {
		for _, s := range p.Stores {
			kinds[s.Name] = s.Sessions
		}
	}
	assert.Equal(t, map[string]bool{"sessions": true, "windows": false}, kinds)
}
