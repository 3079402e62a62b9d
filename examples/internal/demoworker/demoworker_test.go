package demoworker

import (
	"bytes"
	"flag"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A demo's --help is no error; a bad flag is; good flags run the demo.
func TestParseFlags(t *testing.T) {
	for _, tt := range []struct {
		args   []string
		status int
		run    bool
	}{
		{[]string{"--help"}, 0, false},
		{[]string{"-h"}, 0, false},
		{[]string{"--nope"}, 2, false},
		{[]string{"--n", "3"}, 0, true},
		{nil, 0, true},
	} {
		fs := flag.NewFlagSet("demo", flag.ContinueOnError)
		fs.Int("n", 1, "a number")
		status, run := ParseFlags(fs, tt.args)
		assert.Equal(t, tt.status, status, "%v", tt.args)
		assert.Equal(t, tt.run, run, "%v", tt.args)
	}
}

// Neither a buffer nor a plain file is a terminal, so no progress line is
// rewritten in place there.
func TestIsTerminal(t *testing.T) {
	assert.False(t, IsTerminal(new(bytes.Buffer)))
	f, err := os.CreateTemp(t.TempDir(), "out")
	if assert.NoError(t, err) {
		defer f.Close()
		assert.False(t, IsTerminal(f))
	}
	if tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0); err == nil {
		defer tty.Close()
		assert.True(t, IsTerminal(tty), "the controlling terminal")
	}
}
