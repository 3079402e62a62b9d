package runtime

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/causeway-stream/causeway/framework"
)

// A task logs the first record without a key it skips, and counts every
// one; other reasons are logged each time.
func TestNullKeysAreLoggedOncePerTask(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	w := &StreamThread{metrics: NewMetrics(), log: zap.New(core)}
	obs := func() taskObserver { return taskObserver{w: w, nullKeys: new(bool)} }
	a, b := obs(), obs()
	for range 3 {
		a.Dropped("p/0", framework.DropEvent{Reason: framework.DropNullKey})
	}
	b.Dropped("p/1", framework.DropEvent{Reason: framework.DropNullKey})
	a.Dropped("p/0", framework.DropEvent{Reason: "late"})
	a.Dropped("p/0", framework.DropEvent{Reason: "late"})

	warns := map[string]int{}
	for _, e := range logs.FilterLevelExact(zapcore.WarnLevel).All() {
		warns[e.ContextMap()["task"].(string)+" "+e.ContextMap()["reason"].(string)]++
	}
	assert.Equal(t, map[string]int{"p/0 null-key": 1, "p/1 null-key": 1, "p/0 late": 2}, warns)
	assert.Equal(t, 2, logs.FilterLevelExact(zapcore.DebugLevel).Len(), "the other null keys at debug level")
	assert.Equal(t, 3.0, testutil.ToFloat64(w.metrics.Dropped.WithLabelValues("p/0", framework.DropNullKey)), "every one counted")
}
