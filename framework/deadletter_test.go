package framework_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/causeway-stream/causeway/framework"
)

func TestFitDeadLetterCutsWhatDoesNotFit(t *testing.T) {
	hs := []framework.Header{{Key: framework.HeaderDLQError, Value: []byte("boom")}}
	for _, tc := range []struct {
		name      string
		key, val  string
		limit     int
		truncated string // "" when left whole
		wantSize  string
	}{
		{"fits", "k", "value", 100, "", ""},
		{"no bound", "k", strings.Repeat("v", 5000), 0, "", ""},
		{"value cut", "k", strings.Repeat("v", 5000), 200, "value", "5001"},
		{"key too large too", strings.Repeat("k", 300), "v", 200, "key,value", "301"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dl := framework.Record{Key: []byte(tc.key), Value: []byte(tc.val), Headers: hs}
			got := framework.FitDeadLetter(dl, tc.limit)
			trunc, cut := got.Header(framework.HeaderDLQTruncated)
			size, _ := got.Header(framework.HeaderDLQOriginalSize)
			assert.Equal(t, tc.truncated, string(trunc))
			assert.Equal(t, tc.truncated != "", cut)
			assert.Equal(t, tc.wantSize, string(size))
			n := len(got.Key) + len(got.Value)
			for _, h := range got.Headers {
				n += len(h.Key) + len(h.Value)
			}
			if tc.limit > 0 {
				assert.LessOrEqual(t, n, tc.limit, "it fits")
			}
			assert.True(t, strings.HasPrefix(tc.val, string(got.Value)), "what is kept is the start")
			// Cut again whole, it keeps the first original size.
			again := framework.CutDeadLetter(got)
			size, _ = again.Header(framework.HeaderDLQOriginalSize)
			n, err := strconv.Atoi(string(size))
			assert.NoError(t, err)
			assert.Equal(t, len(tc.key)+len(tc.val), n)
			assert.Empty(t, again.Value)
		})
	}
}

// errRefused wraps a cause, as a sink's or a processor's error would.
type errRefused struct{ cause error }

func (e *errRefused) Error() string { return "refused: " + e.cause.Error() }
func (e *errRefused) Unwrap() error { return e.cause }

func TestNewDeadLetterWritesEachVocabulary(t *testing.T) {
	cause := &errRefused{cause: errors.New("no such column")}
	in := framework.Record{Topic: "orders", Key: []byte("k"), Value: []byte("v"), Headers: []framework.Header{
		{Key: "app", Value: []byte("kept")},
		{Key: framework.HeaderDLQError, Value: []byte("an earlier failure")},
	}}
	for _, tc := range []struct {
		name string
		f    framework.Failure
		v    framework.DeadLetterVocabulary
		want map[string]string // every header, by key
	}{
		{"stream, input read", framework.Failure{Topic: "orders", Partition: 2, Offset: 7, Stage: framework.StageProcess, Err: cause},
			framework.StreamHeaders, map[string]string{"app": "kept",
				framework.HeaderDLQTopic: "orders", framework.HeaderDLQPartition: "2", framework.HeaderDLQOffset: "7",
				framework.HeaderDLQStage: framework.StageProcess, framework.HeaderDLQError: "refused: no such column"}},
		{"stream, an output refused", framework.Failure{Topic: "orders", Partition: 2, Offset: 7, Stage: framework.StageProduce, Err: cause, Output: "totals"},
			framework.StreamHeaders, map[string]string{"app": "kept",
				framework.HeaderDLQTopic: "orders", framework.HeaderDLQPartition: "2", framework.HeaderDLQOffset: "7",
				framework.HeaderDLQStage: framework.StageProduce, framework.HeaderDLQError: "refused: no such column", framework.HeaderDLQOutput: "totals"}},
		{"stream, of a punctuation", framework.Failure{Stage: framework.StageProcess, Err: cause},
			framework.StreamHeaders, map[string]string{"app": "kept",
				framework.HeaderDLQStage: framework.StageProcess, framework.HeaderDLQError: "refused: no such column"}},
		{"connect", framework.Failure{Topic: "orders", Partition: 2, Offset: 7, Stage: "TASK_PUT", Err: cause, Connector: "shop", Task: 1, Class: "PostgresSink"},
			framework.ConnectHeaders, map[string]string{"app": "kept", framework.HeaderDLQError: "an earlier failure",
				framework.ConnectHeaderTopic: "orders", framework.ConnectHeaderPartition: "2", framework.ConnectHeaderOffset: "7",
				framework.ConnectHeaderConnector: "shop", framework.ConnectHeaderTask: "1", framework.ConnectHeaderStage: "TASK_PUT",
				framework.ConnectHeaderClass: "PostgresSink", framework.ConnectHeaderExceptionClass: "*framework_test.errRefused",
				framework.ConnectHeaderExceptionMessage:    "refused: no such column",
				framework.ConnectHeaderExceptionStacktrace: "*framework_test.errRefused\n*errors.errorString"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := framework.NewDeadLetter(in, tc.f, tc.v, 0)
			headers := map[string]string{}
			for _, h := range got.Headers {
				_, twice := headers[h.Key]
				assert.False(t, twice, "one %s", h.Key)
				headers[h.Key] = string(h.Value)
			}
			assert.Equal(t, tc.want, headers)
			assert.Equal(t, "k", string(got.Key))
			assert.Equal(t, "v", string(got.Value))
			assert.Len(t, in.Headers, 2, "the record read is left as it was")
		})
	}
}

// A dead letter is cut to fit whichever vocabulary it carries.
func TestNewDeadLetterFitsItsLimit(t *testing.T) {
	in := framework.Record{Key: []byte("k"), Value: []byte(strings.Repeat("v", 5000))}
	for _, v := range []framework.DeadLetterVocabulary{framework.StreamHeaders, framework.ConnectHeaders} {
		got := framework.NewDeadLetter(in, framework.Failure{Topic: "t", Stage: "s", Err: errors.New("boom")}, v, 1000)
		trunc, _ := got.Header(framework.HeaderDLQTruncated)
		assert.Equal(t, "value", string(trunc))
		n := len(got.Key) + len(got.Value)
		for _, h := range got.Headers {
			n += len(h.Key) + len(h.Value)
		}
		assert.LessOrEqual(t, n, 1000)
	}
}
