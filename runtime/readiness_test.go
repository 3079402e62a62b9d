package runtime

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
)

func TestHealthJudgesTheGravestReasonFirst(t *testing.T) {
	tests := []struct {
		name        string
		h           health
		ready, degr bool
		reasonHas   string
	}{
		{"all running", health{assigned: 2}, true, false, ""},
		{"fatal beats everything", health{fatal: errors.New("fenced"), assigned: 2, failed: []string{"a/0 (x)"}}, false, true, "fatal error: fenced"},
		{"nothing assigned", health{}, false, false, "no partitions assigned"},
		{"commits failing", health{assigned: 1, failedCommits: 3, lastCommitErr: errors.New("broker gone")}, false, false, "3 transactions in a row failed, the last: broker gone"},
		{"two commits failing is a blip", health{assigned: 1, failedCommits: 2}, true, false, ""},
		{"restoring", health{assigned: 1, restoring: []string{"a/0", "a/1"}}, false, false, "restoring 2 tasks: a/0, a/1"},
		{"a failed task", health{assigned: 1, failed: []string{"a/0 (poisoned)"}}, false, true, "1 task FAILED: a/0 (poisoned)"},
		{"a failed task, relaxed", health{assigned: 1, failed: []string{"a/0 (poisoned)"}, readyIfFailed: true}, true, true, "a/0 (poisoned)"},
		{"restoring and failed: restoring first", health{assigned: 1, restoring: []string{"b/0"}, failed: []string{"a/0 (p)"}, readyIfFailed: true}, false, true, "restoring 1 task: b/0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ready, degraded, reason := tt.h.judge()
			assert.Equal(t, tt.ready, ready, "ready")
			assert.Equal(t, tt.degr, degraded, "degraded")
			if tt.reasonHas == "" {
				assert.Empty(t, reason)
			} else {
				assert.Contains(t, reason, tt.reasonHas)
			}
		})
	}
}

// readyz is what the worker's /readyz answers: the status code and body.
func readyz(t *testing.T, w Served) (int, string) {
	t.Helper()
	s := NewServer("127.0.0.1:0", w, zaptest.NewLogger(t))
	require.NoError(t, s.Start(context.Background()))
	defer func() { assert.NoError(t, s.Stop(context.Background())) }()
	res, err := http.Get("http://" + s.Addr() + "/readyz")
	require.NoError(t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res.StatusCode, strings.TrimSpace(string(body))
}

// A FAILED task makes the worker unready (503, naming the task and its
// error) and degraded, unless ReadyWithFailedTasks relaxes readiness; a
// restart that brings it back makes the worker ready again.
func TestAFailedTaskMakesTheWorkerUnready(t *testing.T) {
	for _, relaxed := range []bool{false, true} {
		t.Run(map[bool]string{false: "default", true: "ready with failed tasks"}[relaxed], func(t *testing.T) {
			var poisoned atomic.Bool
			poisoned.Store(true)
			topo, counts := twoReaders(t, &poisoned)
			fake := newFakeKafka(t)
			w := newFakeWorker(t, fake, topo, counts, func(c *Config) { c.ReadyWithFailedTasks = relaxed })
			fake.send(in0, "x")
			drainAndCommit(t, w)
			w.publishStatus()
			code, _ := readyz(t, w)
			require.Equal(t, http.StatusOK, code, "ready before anything failed: %+v", w.Status())

			fake.send(in0, "poison")
			drainAndCommit(t, w)
			w.publishStatus()
			st := w.Status()
			assert.True(t, st.Degraded)
			assert.Contains(t, st.Reason, "a/0 (")
			assert.Contains(t, st.Reason, "poisoned")
			code, body := readyz(t, w)
			if relaxed {
				assert.True(t, st.Ready)
				assert.Equal(t, http.StatusOK, code, body)
				assert.Contains(t, body, "degraded")
			} else {
				assert.False(t, st.Ready)
				assert.Equal(t, http.StatusServiceUnavailable, code, body)
				assert.Contains(t, body, "a/0")
			}

			poisoned.Store(false)
			require.NoError(t, restart(w, "a/0"))
			drainAndCommit(t, w)
			w.publishStatus()
			st = w.Status()
			assert.True(t, st.Ready, st.Reason)
			assert.False(t, st.Degraded)
		})
	}
}
