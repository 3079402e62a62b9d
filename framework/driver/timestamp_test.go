package driver_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/driver"
)

// A processor-level input with a timestamp extractor: the processor, its
// stream time and what it forwards see the extracted time; the policies
// for an invalid one fail the record, skip it, or give it the input's
// previous time. The value of each record is its time in milliseconds,
// or "x" for none.
func TestExtractTimestampOfAnInput(t *testing.T) {
	fromValue := func(rec framework.Record) (time.Time, error) {
		ms, err := strconv.ParseInt(string(rec.Value), 10, 64)
		if err != nil {
			return time.Time{}, fmt.Errorf("value %q: %w", rec.Value, err)
		}
		return time.UnixMilli(ms), nil
	}
	tests := []struct {
		name     string
		policy   framework.InvalidTimestamp
		in       []string
		want     []string // forwarded: record time / stream time, in ms
		skipped  int
		failedAt int
	}{
		{"valid", framework.FailOnInvalidTimestamp, []string{"5000", "3000", "9000"}, []string{"5000/5000", "3000/5000", "9000/9000"}, 0, -1},
		{"fail", framework.FailOnInvalidTimestamp, []string{"5000", "x"}, []string{"5000/5000"}, 0, 1},
		{"skip", framework.SkipOnInvalidTimestamp, []string{"5000", "x", "6000"}, []string{"5000/5000", "6000/6000"}, 1, -1},
		{"previous", framework.UsePreviousOnInvalidTimestamp, []string{"5000", "3000", "x"}, []string{"5000/5000", "3000/5000", "5000/5000"}, 0, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			topo, err := framework.NewBuilder("times").
				Processor("echo", func() framework.Processor {
					return framework.ProcessorFunc(func(ctx framework.Context, rec framework.Record) error {
						v := fmt.Sprintf("%d/%d", rec.Timestamp.UnixMilli(), ctx.StreamTime().UnixMilli())
						return ctx.Forward(framework.Record{Key: rec.Key, Value: []byte(v)})
					})
				}, framework.From("in"), framework.ExtractTimestamp("in", fromValue, tt.policy), framework.To("out")).
				Build()
			require.NoError(t, err)
			d, err := driver.New(topo)
			require.NoError(t, err)
			for i, v := range tt.in {
				_, _, err := d.Pipe("in", framework.Record{Key: []byte("k"), Value: []byte(v), Timestamp: time.UnixMilli(1)})
				require.NoError(t, err)
				err = d.Run()
				if i == tt.failedAt {
					require.ErrorIs(t, err, framework.ErrInvalidTimestamp)
					assert.Contains(t, err.Error(), `value "x"`, "the error says why")
					break
				}
				require.NoError(t, err)
			}
			out, err := d.Records("out")
			require.NoError(t, err)
			var got []string
			for _, r := range out {
				got = append(got, string(r.Value))
				recTime, _, _ := strings.Cut(string(r.Value), "/")
				assert.Equal(t, recTime, strconv.FormatInt(r.Timestamp.UnixMilli(), 10), "the output carries the extracted time")
			}
			assert.Equal(t, tt.want, got)
			skipped := 0
			for _, x := range d.Dropped() {
				if x.Event.Reason == "invalid-timestamp" {
					skipped++
				}
			}
			assert.Equal(t, tt.skipped, skipped)
		})
	}
}

// An extractor for a topic the processor does not read is refused.
func TestExtractTimestampOfAnUnknownInput(t *testing.T) {
	_, err := framework.NewBuilder("times").
		Processor("echo", func() framework.Processor { return framework.ProcessorFunc(nil) },
			framework.From("in"), framework.ExtractTimestamp("other", func(framework.Record) (time.Time, error) { return time.Time{}, nil }, 0)).
		Build()
	require.ErrorIs(t, err, framework.ErrInvalidTopology)
	assert.Contains(t, err.Error(), `extracts timestamps of "other"`)
}
