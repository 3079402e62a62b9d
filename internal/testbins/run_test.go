// Package testbins holds run, the script with which make test builds each
// test binary once and runs it as go test would; this test runs it.
package testbins

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runScript runs the script over pkgs with the build flags build and the
// test flags flags, its binaries in dir, and returns its output and exit
// code.
func runScript(t *testing.T, dir, build string, pkgs []string, flags ...string) (string, int) {
	t.Helper()
	// One at a time: the first package is built alone and runs while
	// the others are built.
	args := append(append([]string{dir, "1", build}, pkgs...), "--")
	cmd := exec.Command("./run", append(args, flags...)...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return string(out), exit.ExitCode()
	}
	require.NoError(t, err, "%s", out)
	return string(out), 0
}

const fixtures = "github.com/causeway-stream/causeway/internal/testbins/testdata/"

// A failing test fails the run, with its output and FAIL for its package,
// while the other packages still say ok.
func TestAFailingPackageFailsTheRun(t *testing.T) {
	dir := t.TempDir()
	out, code := runScript(t, dir, "", []string{"./testdata/pass", "./testdata/fail"}, "-test.count=1")
	assert.Equal(t, 1, code, out)
	assert.Contains(t, out, "fails on purpose")
	assert.Regexp(t, `(?m)^FAIL\t`+fixtures+`fail\t`, out)
	assert.Regexp(t, `(?m)^ok  \t`+fixtures+`pass\t`, out)

	out, code = runScript(t, dir, "", []string{"./testdata/fail"}, "-test.count=1", "-test.run=TestPasses")
	assert.Equal(t, 0, code, out)
	assert.Regexp(t, `(?m)^ok  \t`+fixtures+`fail\t`, out)
}

// A package whose test binary does not build fails the run, while the
// packages that built still run; a binary left from an earlier run in its
// place is not run.
func TestAPackageThatDoesNotBuildFailsTheRun(t *testing.T) {
	dir := t.TempDir()
	_, code := runScript(t, dir, "", []string{"./testdata/pass"})
	require.Equal(t, 0, code)
	stale, err := os.ReadFile(filepath.Join(dir, "pass.test"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "broken.test"), stale, 0o755))

	out, code := runScript(t, dir, "", []string{"./testdata/pass", "./testdata/broken"}, "-test.count=1")
	assert.NotEqual(t, 0, code, out)
	assert.Regexp(t, `(?m)^FAIL\t`+fixtures+`broken\t`, out)
	assert.Regexp(t, `(?m)^ok  \t`+fixtures+`pass\t`, out)
}

// A binary whose inputs did not change is not linked again: go test -c
// -x shows the linker's run the first time only.
func TestABinaryIsLinkedOnce(t *testing.T) {
	dir := t.TempDir()
	out, code := runScript(t, dir, "-x", []string{"./testdata/pass"})
	require.Equal(t, 0, code, out)
	require.Regexp(t, linked, out, "the first run links the binary")
	out, code = runScript(t, dir, "-x", []string{"./testdata/pass"})
	require.Equal(t, 0, code, out)
	assert.NotRegexp(t, linked, out, "the second run linked the binary again")
}

// linked is how go test -x shows a run of the linker.
var linked = regexp.MustCompile(`/link -o `)
