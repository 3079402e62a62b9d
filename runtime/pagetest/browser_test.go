package pagetest

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// chromium is the one headless Chromium the package's tests drive, each
// in a tab of its own: started by the first test that asks for it
// (browser) and stopped when the tests end (TestMain). A browser of its
// own for each test cost about 2 CPU-seconds to start, which make test
// pays while every core is busy.
var chromium struct {
	once sync.Once
	ctx  context.Context // the browser's first tab, which owns it
	err  error
	stop func()
}

func TestMain(m *testing.M) {
	code := m.Run()
	if chromium.stop != nil {
		chromium.stop()
	}
	os.Exit(code)
}

// startChromium starts the shared browser with the flags this machine's
// closed network needs.
func startChromium() {
	const path = "/usr/bin/chromium"
	if _, err := os.Stat(path); err != nil {
		chromium.err = fmt.Errorf("Chromium is not installed at %s (Debian package chromium): %w", path, err)
		return
	}
	profile, err := os.MkdirTemp("", "causeway-chromium-")
	if err != nil {
		chromium.err = err
		return
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-quic", true), chromedp.UserDataDir(profile),
		chromedp.WindowSize(1280, 1000))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	chromium.stop = func() {
		cancel()
		cancelAlloc()
		_ = os.RemoveAll(profile)
	}
	chromium.ctx = ctx
	chromium.err = chromedp.Do(ctx) // starts it
}

// browser returns a context for driving a new tab of the shared headless
// Chromium, closed when t ends.
func browser(t *testing.T) context.Context {
	t.Helper()
	chromium.once.Do(startChromium)
	require.NoError(t, chromium.err)
	ctx, cancel := chromedp.NewContext(chromium.ctx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(func() { cancelTimeout(); cancel() })
	return ctx
}
