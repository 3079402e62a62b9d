package runtime

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
)

// A worker that has no task yet (it is starting, or the group gave it
// none) lists its tasks as an empty list, never null: a client that
// iterates over them needs no special case.
func TestStatusListsNoTasksAsAnEmptyList(t *testing.T) {
	topo, _ := shippingTopology(t)
	cfg := DefaultConfig()
	cfg.ApplicationID, cfg.StateDir = "starting", t.TempDir()
	w, err := NewStreamThread(cfg, topo, zaptest.NewLogger(t), nil)
	require.NoError(t, err)
	b, err := json.Marshal(w.Status())
	require.NoError(t, err)
	assert.Contains(t, string(b), `"tasks":[]`)
}
