package statedir

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// One holder at a time: a second Take is refused naming the first, and
// succeeds once the first is released.
func TestTakeRefusesASecondHolderUntilReleased(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	first, err := Take(dir, "application shop")
	require.NoError(t, err)
	_, err = Take(dir, "application other")
	require.ErrorIs(t, err, ErrInUse)
	assert.ErrorContains(t, err, "application shop")
	require.NoError(t, first.Release())
	second, err := Take(dir, "application other")
	require.NoError(t, err)
	require.NoError(t, second.Release())
	var none *Lock
	assert.NoError(t, none.Release())
}
