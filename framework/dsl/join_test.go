package dsl_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/driver"
	"github.com/causeway-stream/causeway/framework/dsl"
)

// joinInput is one record of the two inputs of Kafka Streams' join
// semantics examples: its time, its side, and its value ("" for null: a
// tombstone for a table, a record with no value for a stream).
type joinInput struct {
	ms    int64
	left  bool
	value string
}

// The inputs of the examples in Kafka Streams' join semantics page:
// STREAM_1 (left) 1:null, 3:A, 5:B, 7:null, 9:C, 12:null, 15:D and
// STREAM_2 (right) 2:null, 4:a, 6:b, 8:null, 10:c, 11:null, 13:null, 14:d,
// every record of one key, processed in timestamp order.
var joinExample = []joinInput{
	{1, true, ""}, {2, false, ""}, {3, true, "A"}, {4, false, "a"}, {5, true, "B"}, {6, false, "b"},
	{7, true, ""}, {8, false, ""}, {9, true, "C"}, {10, false, "c"}, {11, false, ""}, {12, true, ""},
	{13, false, ""}, {14, false, "d"}, {15, true, "D"},
}

// pair renders a join result as the examples do: "X-Y", null for a side
// that has none.
func pair(l string, lok bool, r string, rok bool) string {
	if !lok {
		l = "null"
	}
	if !rok {
		r = "null"
	}
	return l + "-" + r
}

// runJoin pipes the inputs one by one, "left" and "right", and returns
// what reached "out" at each input's time: the results in order, "null"
// for a tombstone, separated by spaces; times with nothing are left out.
func runJoin(t *testing.T, topo *framework.Topology, in []joinInput) (map[int64]string, []driver.Dropped) {
	t.Helper()
	d, err := driver.New(topo)
	require.NoError(t, err)
	got := map[int64]string{}
	seen := 0
	for _, r := range in {
		topic := "right"
		if r.left {
			topic = "left"
		}
		rec := framework.Record{Key: []byte("k"), Timestamp: at(r.ms)}
		if r.value != "" {
			rec.Value = []byte(r.value)
		}
		_, _, err := d.Pipe(topic, rec)
		require.NoError(t, err)
		require.NoError(t, d.Run())
		out, err := d.Records("out")
		require.NoError(t, err)
		for _, o := range out[seen:] {
			v := "null"
			if o.Value != nil {
				v = string(o.Value)
			}
			if got[r.ms] != "" {
				got[r.ms] += " "
			}
			got[r.ms] += v
		}
		seen = len(out)
	}
	return got, d.Dropped()
}

func tableJoin(t *testing.T, join func(l, r dsl.Table[string, string]) dsl.Table[string, string]) *framework.Topology {
	b := dsl.NewBuilder("tables")
	join(dsl.TableFrom(b, "left", "left-rows", text), dsl.TableFrom(b, "right", "right-rows", text)).ToStream().
		WithSerdes(text.Key, text.Value).To("out")
	topo, err := b.Build()
	require.NoError(t, err)
	return topo
}

// Table-table joins give, at every step of the example, what the
// examples' KTable-KTable table shows for inner, left and outer joins.
func TestTableJoinsFollowKafkaStreams(t *testing.T) {
	tests := []struct {
		name string
		join func(l, r dsl.Table[string, string]) dsl.Table[string, string]
		want map[int64]string
	}{
		{"inner", func(l, r dsl.Table[string, string]) dsl.Table[string, string] {
			return dsl.JoinTables(l, r, func(_, lv, rv string) (string, error) { return pair(lv, true, rv, true), nil })
		}, map[int64]string{4: "A-a", 5: "B-a", 6: "B-b", 7: "null", 10: "C-c", 11: "null", 15: "D-d"}},
		{"left", func(l, r dsl.Table[string, string]) dsl.Table[string, string] {
			return dsl.LeftJoinTables(l, r, func(_, lv, rv string, rok bool) (string, error) { return pair(lv, true, rv, rok), nil })
		}, map[int64]string{3: "A-null", 4: "A-a", 5: "B-a", 6: "B-b", 7: "null", 9: "C-null", 10: "C-c", 11: "C-null", 12: "null", 15: "D-d"}},
		{"outer", func(l, r dsl.Table[string, string]) dsl.Table[string, string] {
			return dsl.OuterJoinTables(l, r, func(_, lv string, lok bool, rv string, rok bool) (string, error) {
				return pair(lv, lok, rv, rok), nil
			})
		}, map[int64]string{3: "A-null", 4: "A-a", 5: "B-a", 6: "B-b", 7: "null-b", 8: "null", 9: "C-null", 10: "C-c",
			11: "C-null", 12: "null", 14: "null-d", 15: "D-d"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _ := runJoin(t, tableJoin(t, tt.join), joinExample)
			assert.Equal(t, tt.want, got)
		})
	}
}

func streamJoin(t *testing.T, join func(l, r dsl.Stream[string, string]) dsl.Stream[string, string]) *framework.Topology {
	b := dsl.NewBuilder("streams")
	join(dsl.From(b, "left", text), dsl.From(b, "right", text)).WithSerdes(text.Key, text.Value).To("out")
	topo, err := b.Build()
	require.NoError(t, err)
	return topo
}

// Stream-stream joins give what the examples' KStream-KStream table shows
// (Kafka Streams 3.1 and later, which emits a record alone only once its
// window has closed), with windows of 12 ms either way and a grace of 5 ms:
// every record from 1 to 15 is in every other's window; E at 40 has no
// partner, and comes out alone (left and outer) once F at 60 moves stream
// time past its window; F comes out alone at 80, and the right record f,
// alone, at 100 (outer).
func TestStreamJoinsFollowKafkaStreams(t *testing.T) {
	in := append(append([]joinInput{}, joinExample...), joinInput{40, true, "E"}, joinInput{60, true, "F"},
		joinInput{80, false, "f"}, joinInput{100, true, "G"})
	w := dsl.JoinWindowsOf(12*time.Millisecond, 5*time.Millisecond)
	pairs := map[int64]string{4: "A-a", 5: "B-a", 6: "A-b B-b", 9: "C-a C-b", 10: "A-c B-c C-c", 14: "A-d B-d C-d", 15: "D-a D-b D-c D-d"}
	with := func(extra map[int64]string) map[int64]string {
		out := map[int64]string{}
		for k, v := range pairs {
			out[k] = v
		}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	tests := []struct {
		name string
		join func(l, r dsl.Stream[string, string]) dsl.Stream[string, string]
		want map[int64]string
	}{
		{"inner", func(l, r dsl.Stream[string, string]) dsl.Stream[string, string] {
			return dsl.JoinStreams(l, r, w, "j", func(_, lv, rv string) (string, error) { return pair(lv, true, rv, true), nil })
		}, pairs},
		{"left", func(l, r dsl.Stream[string, string]) dsl.Stream[string, string] {
			return dsl.LeftJoinStreams(l, r, w, "j", func(_, lv, rv string, rok bool) (string, error) { return pair(lv, true, rv, rok), nil })
		}, with(map[int64]string{60: "E-null", 80: "F-null"})},
		{"outer", func(l, r dsl.Stream[string, string]) dsl.Stream[string, string] {
			return dsl.OuterJoinStreams(l, r, w, "j", func(_, lv string, lok bool, rv string, rok bool) (string, error) {
				return pair(lv, lok, rv, rok), nil
			})
		}, with(map[int64]string{60: "E-null", 80: "F-null", 100: "null-f"})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, dropped := runJoin(t, streamJoin(t, tt.join), in)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, 7, countDropped(dropped, "no-value"), "records with no value are reported, not joined")
		})
	}
}

// Stream-stream join results keep the later timestamp of the pair; a
// record alone keeps its own. A record that joins nothing and is too old
// to be kept for a later partner (older than stream time minus the
// join's retention, Before+After+Grace) is late.
func TestStreamJoinTimestampsAndLateness(t *testing.T) {
	b := dsl.NewBuilder("streams")
	dsl.LeftJoinStreams(dsl.From(b, "left", text), dsl.From(b, "right", text), dsl.JoinWindowsOf(10*time.Millisecond, 0), "j",
		func(_, lv, rv string, rok bool) (string, error) { return pair(lv, true, rv, rok), nil }).
		WithSerdes(text.Key, text.Value).To("out")
	topo, err := b.Build()
	require.NoError(t, err)
	d, err := driver.New(topo)
	require.NoError(t, err)
	for _, r := range []joinInput{{100, true, "A"}, {95, false, "a"}, {130, true, "B"}, {105, false, "late"}} {
		topic := map[bool]string{true: "left", false: "right"}[r.left]
		_, _, err := d.Pipe(topic, framework.Record{Key: []byte("k"), Value: []byte(r.value), Timestamp: at(r.ms)})
		require.NoError(t, err)
		require.NoError(t, d.Run())
	}
	out, err := d.Records("out")
	require.NoError(t, err)
	var got []string
	for _, o := range out {
		got = append(got, fmt.Sprintf("%s@%d", o.Value, o.Timestamp.UnixMilli()))
	}
	assert.Equal(t, []string{"A-a@100"}, got, "B waits for its window to close; the right record at 105 finds no left record still kept (after 130-20) and is late (105 < 130-20)")
	require.Len(t, d.Dropped(), 1)
	assert.Equal(t, "late", d.Dropped()[0].Event.Reason)
}
