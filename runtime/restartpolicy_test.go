package runtime_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/runtime"
)

// With the restart policy on, a FAILED task is restarted without an
// operator, the waits doubling while it keeps failing; /status and the
// metrics say how many attempts were made and when the next comes. Once
// what failed it is mended, the next attempt brings it back, and its
// outputs come once. Without the policy (the default, as Kafka Streams)
// it stays FAILED.
func TestTheRestartPolicyRestartsAFailedTaskWithBackoff(t *testing.T) {
	t.Parallel()
	for _, on := range []bool{true, false} {
		t.Run(map[bool]string{true: "on", false: "off"}[on], func(t *testing.T) {
			t.Parallel()
			b := startBroker(t)
			createTopics(t, b.Addr(), 1, "in", "out")
			var broken atomic.Bool
			broken.Store(true)
			topo, err := framework.NewBuilder("echo").Processor("echo", func() framework.Processor {
				return framework.ProcessorFunc(func(ctx framework.Context, rec framework.Record) error {
					if string(rec.Value) == "b" && broken.Load() {
						return errors.New("the service it needs is down")
					}
					return ctx.Forward(framework.Record{Key: rec.Key, Value: rec.Value})
				})
			}, framework.From("in"), framework.To("out")).Build()
			require.NoError(t, err)
			sendTo(t, b.Addr(), "in", 0, "a", "b", "c")

			cfg := testConfigFor(t, "franz", b.Addr(), "echo-restarts")
			if on {
				cfg.TaskRestartBackoff, cfg.TaskRestartBackoffMax = 200*time.Millisecond, time.Second
			}
			m := runtime.NewMetrics()
			w := startTopology(t, cfg, topo, m)
			waitForTask(t, w, "echo/0", runtime.StateFailed, 30*time.Second)
			if !on {
				time.Sleep(2 * time.Second)
				ts := waitForTask(t, w, "echo/0", runtime.StateFailed, time.Second)
				assert.Nil(t, ts.Restarts)
				assert.Zero(t, testutil.ToFloat64(m.TaskRestarts.WithLabelValues("echo/0")))
				return
			}
			var st runtime.TaskStatus
			require.Eventually(t, func() bool {
				for _, ts := range w.Status().Tasks {
					if ts.ID == "echo/0" && ts.State == runtime.StateFailed && ts.Restarts != nil && ts.Restarts.Attempts >= 2 && ts.Restarts.NextAttempt != nil {
						st = ts
						return true
					}
				}
				return false
			}, 30*time.Second, 20*time.Millisecond, "the task was not restarted twice")
			assert.WithinDuration(t, time.Now(), *st.Restarts.NextAttempt, 2*time.Second, "the next attempt within the cap")
			assert.GreaterOrEqual(t, testutil.ToFloat64(m.TaskRestarts.WithLabelValues("echo/0")), 2.0)

			broken.Store(false)
			out := readCommitted(t, b.Addr(), "out", 3, 30*time.Second)
			var got []string
			for _, r := range out {
				got = append(got, string(r.Value))
			}
			assert.Equal(t, []string{"a", "b", "c"}, got, "each once, in order")
			waitForTask(t, w, "echo/0", runtime.StateRunning, 10*time.Second)
		})
	}
}
