package connectworker

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/connect"
	"github.com/causeway-stream/causeway/connect/transform"
	"github.com/causeway-stream/causeway/runtime/internal/transport/transporttest"
)

// scripted is a source task that returns its batches in turn, then
// nothing, and remembers the offsets it was asked from.
type scripted struct {
	mu      sync.Mutex
	batches [][]connect.SourceRecord
	asked   [][]byte
}

func (s *scripted) Poll(ctx context.Context, offset []byte) ([]connect.SourceRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asked = append(s.asked, offset)
	if len(s.batches) == 0 {
		s.mu.Unlock()
		<-ctx.Done()
		s.mu.Lock()
		return nil, nil
	}
	b := s.batches[0]
	s.batches = s.batches[1:]
	return b, nil
}

func (s *scripted) Close() error { return nil }

// A source's records go to the topic their transforms route them to; with
// errors.tolerance=all a record the transforms refuse is left out, and its
// offset still counts, even when no record of its batch is written.
func TestSourceRecordsAreRoutedAndRefusedOnesLeftOut(t *testing.T) {
	t.Parallel()
	kafka := transporttest.New(t)
	w, err := New(Config{Bootstrap: kafka.Bootstrap(), Client: kafka.Client(), Listen: "127.0.0.1:0", Log: zaptest.NewLogger(t)})
	require.NoError(t, err)
	defer func() { _ = w.server.Stop(context.Background()) }()
	cfg := map[string]string{"errors.tolerance": "all", "topic.creation.default.partitions": "1",
		"transforms": "key,route", "transforms.key.type": "ValueToKey", "transforms.key.fields": "id",
		"transforms.route.type": "RegexRouter", "transforms.route.regex": "raw_(.*)", "transforms.route.replacement": "clean_$1"}
	chain, err := transform.Parse(cfg)
	require.NoError(t, err)
	var produced = new(taskCounters)
	r, err := w.newSourceRunner("src", cfg, chain, zaptest.NewLogger(t), &produced.produced)
	require.NoError(t, err)
	task := &scripted{batches: [][]connect.SourceRecord{
		{
			{Topic: "raw_a", Value: []byte(`{"id": 1}`), Offset: []byte(`1`)},
			{Topic: "raw_a", Value: []byte(`[1]`), Offset: []byte(`2`)}, // not an object: refused
			{Topic: "other", Value: []byte(`{"id": 3}`), Offset: []byte(`3`)},
		},
		{{Topic: "raw_a", Value: []byte(`"x"`), Offset: []byte(`4`)}}, // refused alone
	}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.run(ctx, task) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		task.mu.Lock()
		n := len(task.asked)
		task.mu.Unlock()
		if n >= 3 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	require.NoError(t, <-done)
	assert.Equal(t, [][]byte{nil, []byte(`3`), []byte(`4`)}, task.asked[:3], "each poll starts after the last offset, a refused record's too")
	assert.EqualValues(t, 2, produced.produced.Load())

	got := map[string]string{}
	for _, topic := range []string{"clean_a", "other", "raw_a"} {
		for _, m := range kafka.Records(causal.Channel{Topic: topic}) {
			got[m.Topic] = string(m.Key)
		}
	}
	var key map[string]any
	require.NoError(t, json.Unmarshal([]byte(got["clean_a"]), &key))
	assert.Equal(t, map[string]string{"clean_a": `{"id":1}`, "other": `{"id":3}`}, got, "routed, keyed, and nothing left in raw_a")
}
