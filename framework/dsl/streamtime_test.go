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
	"github.com/causeway-stream/causeway/framework/serde"
	"github.com/causeway-stream/causeway/operators"
)

// piped is one record for a topic at a time after t0.
type piped struct {
	topic, key, value string
	after             time.Duration
}

// Each windowed step keeps the stream time of the records that reach it,
// as each windowed processor of Kafka Streams does: a table's update, a
// record another branch takes, or one a filter drops, in the same task,
// closes none of its windows. The first case is the reported one: an
// account updated five minutes ahead made every payment of a card late.
func TestAWindowedStepKeepsItsOwnStreamTime(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	payments := func(card string, n int) []piped {
		var out []piped
		for i := range n {
			out = append(out, piped{"payments", card, fmt.Sprint(i), time.Duration(i) * 5 * time.Second})
		}
		return out
	}
	tests := []struct {
		name  string
		build func(b *dsl.Builder)
		in    []piped
		keys  serde.Serde[operators.Windowed[string]]
		want  []string // key@start=count of the last result per session or window
		late  int
	}{
		{
			name: "a table update ahead of the payments",
			build: func(b *dsl.Builder) {
				accounts := dsl.TableFrom(b, "accounts", "accounts", text)
				joined := dsl.Join(dsl.From(b, "payments", text), accounts, func(_, p, a string) (string, error) { return a + ":" + p, nil })
				dsl.SessionWindowedBy(joined.GroupByKey(), dsl.SessionWindows{Gap: 30 * time.Second, Grace: time.Minute}).
					Count("sessions").ToStream().To("out")
			},
			in: append([]piped{
				{"accounts", "c2", "alice", 0},
				{"accounts", "c9", "bob", 5 * time.Minute}, // an unrelated key, far ahead
			}, payments("c2", 5)...),
			keys: operators.SessionWindowedKey(serde.String()),
			want: []string{"c2@0s=5"},
		},
		{
			name: "records a filter drops before the window",
			build: func(b *dsl.Builder) {
				kept := dsl.From(b, "payments", text).Filter(func(k, _ string) bool { return k != "test" })
				dsl.WindowedBy(kept.GroupByKey(), operators.Tumbling(time.Minute, 0)).Count("counts").ToStream().To("out")
			},
			in:   append([]piped{{"payments", "test", "x", time.Hour}}, payments("c2", 3)...),
			keys: operators.WindowedKey(serde.String(), time.Minute),
			want: []string{"c2@0s=3"},
		},
		{
			name: "a table update never closes a window that emits on close",
			build: func(b *dsl.Builder) {
				accounts := dsl.TableFrom(b, "accounts", "accounts", text)
				joined := dsl.LeftJoin(dsl.From(b, "payments", text), accounts, func(_, p, _ string, _ bool) (string, error) { return p, nil })
				dsl.WindowedBy(joined.GroupByKey(), operators.Tumbling(time.Minute, 0)).EmitOnWindowClose().
					Count("counts").ToStream().To("out")
			},
			in: append(append(payments("c2", 3), piped{"accounts", "c2", "alice", time.Hour}),
				piped{"payments", "c2", "on time", 10 * time.Second}, // the window [0, 1m) is still open
				piped{"payments", "c3", "closes it", 2 * time.Minute}),
			keys: operators.WindowedKey(serde.String(), time.Minute),
			want: []string{"c2@0s=4"},
		},
		{
			name: "the step's own records still make a record late",
			build: func(b *dsl.Builder) {
				dsl.SessionWindowedBy(dsl.From(b, "payments", text).GroupByKey(), dsl.SessionWindows{Gap: 30 * time.Second, Grace: time.Minute}).
					Count("sessions").ToStream().To("out")
			},
			in:   append([]piped{{"payments", "c9", "ahead", 5 * time.Minute}}, payments("c2", 2)...),
			keys: operators.SessionWindowedKey(serde.String()),
			want: []string{"c9@5m0s=1"},
			late: 2,
		},
	}
	for _, tt := range tests {
		for _, restart := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/restart=%v", tt.name, restart), func(t *testing.T) {
				b := dsl.NewBuilder("stream-time")
				tt.build(b)
				topo, err := b.Build()
				require.NoError(t, err)
				d, err := driver.New(topo)
				require.NoError(t, err)
				for i, r := range tt.in {
					if restart && i == len(tt.in)/2 {
						for _, st := range d.Tasks() {
							require.NoError(t, d.RestartTask(st.ID))
						}
					}
					_, _, err := d.Pipe(r.topic, framework.Record{Key: []byte(r.key), Value: []byte(r.value), Timestamp: t0.Add(r.after)})
					require.NoError(t, err)
					require.NoError(t, d.Run())
				}
				out, err := d.Records("out")
				require.NoError(t, err)
				last := map[string]string{}
				var order []string
				for _, rec := range out {
					if rec.Value == nil {
						continue // a merged-away session's tombstone
					}
					w, err := tt.keys.Deserialize(rec.Key)
					require.NoError(t, err)
					k := w.Key + "@" + w.Start.Sub(t0).String()
					if _, ok := last[k]; !ok {
						order = append(order, k)
					}
					n, err := serde.Int64().Deserialize(rec.Value)
					require.NoError(t, err)
					last[k] = fmt.Sprint(n)
				}
				var got []string
				for _, k := range order {
					got = append(got, k+"="+last[k])
				}
				assert.Equal(t, tt.want, got)
				assert.Equal(t, tt.late, countDropped(d.Dropped(), "late"), "records dropped as late")
			})
		}
	}
}
