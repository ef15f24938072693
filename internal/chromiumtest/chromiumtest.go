// Package chromiumtest starts a headless Chromium for tests that drive a
// page in a real browser (through chromedp).
package chromiumtest

import (
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/chromedp/chromedp"
)

// Path finds a Chromium: $CHROMIUM, else chromium, chromium-browser or
// google-chrome on PATH. Without one the test fails when CI is set (CI
// installs Debian's chromium), and is skipped otherwise.
func Path(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no Chromium found (set CHROMIUM, or apt-get install chromium): the browser tests must run in CI")
	}
	t.Skip("no Chromium found (set CHROMIUM, or apt-get install chromium)")
	return ""
}

// New starts a headless Chromium with a fresh profile and without the
// background connections a closed network refuses, closed when the test
// ends, and returns the context of its first tab. more adds options.
func New(t testing.TB, more ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(Path(t)),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.UserDataDir(t.TempDir()),
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(opts, more...)...)
	ctx, cancelCtx := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancelCtx(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("starting Chromium: %v", err)
	}
	return ctx
}
