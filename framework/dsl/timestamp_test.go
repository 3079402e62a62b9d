package dsl_test

import (
	"errors"
	"fmt"
	"strconv"
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

// A view's value is "page@millis"; the extractor takes the time from it.
func viewTime(_ string, v string) time.Time {
	_, at, ok := strings.Cut(v, "@")
	if !ok {
		return time.Time{} // invalid
	}
	ms, err := strconv.ParseInt(at, 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// WithTimestamp windows records by the time in their values, whatever
// time Kafka gave them, and what comes out carries that time; a record
// whose value has no time fails, is skipped or takes the previous time,
// as the policy says.
func TestWithTimestampWindowsByTheValuesTime(t *testing.T) {
	kafkaTime := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC) // far from every value's time
	tests := []struct {
		name     string
		policy   []framework.InvalidTimestamp
		in       []string
		want     []string // window start ms = count @ timestamp ms
		skipped  int
		failedAt int // index of the input whose task fails, -1 for none
	}{
		{
			name: "valid times",
			in:   []string{"home@1000", "cart@1500", "home@12000", "cart@2500"},
			// Kafka's times are an hour apart: windowed by them, no two
			// records would share a window.
			want:     []string{"0=1@1000", "0=2@1500", "10000=1@12000", "0=3@2500"},
			failedAt: -1,
		},
		{
			name:     "invalid: fail",
			in:       []string{"home@1000", "no time"},
			want:     []string{"0=1@1000"},
			failedAt: 1,
		},
		{
			name:     "invalid: skip",
			policy:   []framework.InvalidTimestamp{framework.SkipOnInvalidTimestamp},
			in:       []string{"home@1000", "no time", "cart@1200"},
			want:     []string{"0=1@1000", "0=2@1200"},
			skipped:  1,
			failedAt: -1,
		},
		{
			name:     "invalid: use the previous",
			policy:   []framework.InvalidTimestamp{framework.UsePreviousOnInvalidTimestamp},
			in:       []string{"home@1000", "cart@1700", "no time"},
			want:     []string{"0=1@1000", "0=2@1700", "0=3@1700"},
			failedAt: -1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := dsl.NewBuilder("views")
			views := dsl.From(b, "views", text, dsl.WithTimestamp(viewTime, tt.policy...))
			dsl.WindowedBy(views.GroupByKey(), operators.Tumbling(10*time.Second, time.Minute)).Count("counts").ToStream().To("out")
			topo, err := b.Build()
			require.NoError(t, err)
			d, err := driver.New(topo)
			require.NoError(t, err)
			for i, v := range tt.in {
				_, _, err := d.Pipe("views", framework.Record{Key: []byte("u1"), Value: []byte(v), Timestamp: kafkaTime.Add(time.Duration(i) * time.Hour)})
				require.NoError(t, err)
				err = d.Run()
				if i == tt.failedAt {
					require.ErrorIs(t, err, framework.ErrInvalidTimestamp)
					assert.Contains(t, err.Error(), fmt.Sprintf("views/0@%d", i), "the error names the record")
					break
				}
				require.NoError(t, err)
			}
			recs, err := d.Records("out")
			require.NoError(t, err)
			var got []string
			for _, r := range recs {
				w, err := operators.WindowedKey(serde.String(), 10*time.Second).Deserialize(r.Key)
				require.NoError(t, err)
				n, err := serde.Int64().Deserialize(r.Value)
				require.NoError(t, err)
				got = append(got, fmt.Sprintf("%d=%d@%d", w.Start.UnixMilli(), n, r.Timestamp.UnixMilli()))
			}
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.skipped, countDropped(d.Dropped(), "invalid-timestamp"))
			assert.Zero(t, countDropped(d.Dropped(), "late"))
		})
	}
}

// Options belong where a topic is first read.
func TestWithTimestampOnASecondReadIsRefused(t *testing.T) {
	b := dsl.NewBuilder("views")
	dsl.From(b, "views", text).To("a")
	dsl.From(b, "views", text, dsl.WithTimestamp(viewTime)).To("b")
	_, err := b.Build()
	require.ErrorIs(t, err, framework.ErrInvalidTopology)
	assert.True(t, errors.Is(err, framework.ErrInvalidTopology) && strings.Contains(err.Error(), "second time"), "%v", err)
}
