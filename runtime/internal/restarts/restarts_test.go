package restarts

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestAttemptsBackOffExponentiallyUpToTheCap(t *testing.T) {
	start := time.Unix(1_700_000_000, 0)
	for _, tc := range []struct {
		name string
		give Policy
		// want are the waits from each failure to its attempt, in a row.
		want []time.Duration
	}{
		{"doubling", Policy{Initial: time.Second, Max: time.Minute}, []time.Duration{1, 2, 4, 8, 16, 32, 60, 60}},
		{"capped at once", Policy{Initial: 2 * time.Minute, Max: time.Minute}, []time.Duration{60, 60}},
		{"default cap", Policy{Initial: time.Minute}, []time.Duration{60, 120, 240, 300, 300}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := New(tc.give)
			now := start
			for i, wait := range tc.want {
				wait *= time.Second
				assert.False(t, tr.Due("p/0", now), "attempt %d due at once", i+1)
				st, _ := tr.Status("p/0")
				assert.Equal(t, now.Add(wait), st.Next, "attempt %d", i+1)
				assert.False(t, tr.Due("p/0", now.Add(wait-time.Millisecond)))
				now = now.Add(wait)
				assert.True(t, tr.Due("p/0", now))
				tr.Restarted("p/0", now)
				st, _ = tr.Status("p/0")
				assert.Equal(t, Status{Attempts: i + 1}, st)
				now = now.Add(time.Second) // it fails again a second later
			}
		})
	}
}

func TestATaskThatRunsLongEnoughStartsOver(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	tr := New(Policy{Initial: time.Second, Max: time.Minute})
	for range 3 {
		tr.Due("p/0", now)
		now = now.Add(time.Minute)
		tr.Due("p/0", now)
		tr.Restarted("p/0", now)
	}
	tr.Running("p/0", now.Add(59*time.Second))
	st, ok := tr.Status("p/0")
	assert.True(t, ok)
	assert.Equal(t, 3, st.Attempts, "not yet")
	tr.Running("p/0", now.Add(time.Minute))
	_, ok = tr.Status("p/0")
	assert.False(t, ok, "ran a minute: starts over")
	tr.Due("p/0", now.Add(2*time.Minute))
	st, _ = tr.Status("p/0")
	assert.Equal(t, now.Add(2*time.Minute+time.Second), st.Next, "the first attempt's wait again")
}

func TestTheZeroPolicyRestartsNothing(t *testing.T) {
	tr := New(Policy{})
	assert.False(t, tr.Enabled())
	assert.False(t, tr.Due("p/0", time.Unix(0, 0).Add(time.Hour)))
	_, ok := tr.Status("p/0")
	assert.False(t, ok)
}

func TestForgetStartsTheCountOver(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	tr := New(Policy{Initial: time.Second, Max: time.Minute})
	for range 3 {
		tr.Due("p/0", now)
		now = now.Add(time.Minute)
		tr.Due("p/0", now)
		tr.Restarted("p/0", now)
	}
	tr.Forget("p/0") // an operator restarted it
	tr.Due("p/0", now)
	st, _ := tr.Status("p/0")
	assert.Equal(t, Status{Attempts: 0, Next: now.Add(time.Second)}, st)
}
