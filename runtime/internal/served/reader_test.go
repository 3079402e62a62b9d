package served

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/framework"
)

// A session store keeps each session under its end, its start leading
// the value: an answer labels it with both, and the value alone. A time
// window keeps its start, and a timestamped one its latest record's time.
func TestWindowEntriesLabelTheirWindows(t *testing.T) {
	start := time.Date(2024, 3, 1, 10, 0, 0, 0, time.UTC)
	end := start.Add(90 * time.Second)
	nanos := func(at time.Time) []byte { return binary.BigEndian.AppendUint64(nil, uint64(at.UnixNano())) }

	e := windowEntry(framework.StoreSpec{Kind: framework.WindowKind, Sessions: true}, []byte("u1"), end, append(nanos(start), `{"n":3}`...), 1)
	require.NotNil(t, e.Start)
	require.NotNil(t, e.End)
	assert.Equal(t, start, *e.Start)
	assert.Equal(t, end, *e.End)
	assert.Equal(t, `{"n":3}`, string(e.Value))
	assert.JSONEq(t, `{"n":3}`, string(e.ValueJSON))

	latest := start.Add(5 * time.Second)
	e = windowEntry(framework.StoreSpec{Kind: framework.WindowKind, Timestamped: true}, []byte("u1"), start, append(nanos(latest), "7"...), 0)
	assert.Equal(t, start, *e.Start)
	assert.Nil(t, e.End)
	assert.Equal(t, latest, *e.Timestamp)
	assert.Equal(t, "7", string(e.Value))
}
