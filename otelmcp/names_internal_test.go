package otelmcp

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mcphandler/mcphandler"
	"go.opentelemetry.io/otel/trace/noop"
)

func newTestInterceptor(t *testing.T) *interceptor {
	t.Helper()
	return newInterceptor(config{tp: noop.NewTracerProvider()}, newTestMetrics(t, 0))
}

// A client naming ever new tools cannot grow the kept span names past
// maxNames, nor make them hold its huge names: every name is still right
// and clipped, kept or not.
func TestSpanNamesBounded(t *testing.T) {
	i := newTestInterceptor(t)
	huge := strings.Repeat("é", 4<<10) // 8 KiB of two-byte runes, past any clip
	for n := range maxNames + 500 {
		target := fmt.Sprintf("tool_%05d_%s", n, huge)
		req := &mcphandler.Request{Method: "tools/call", Target: target}
		name := i.spanName(req, true)
		if want := "tools/call " + clip(target); name != want {
			t.Fatalf("name %.40q…, want %.40q…", name, want)
		}
		if len(name) > len("tools/call ")+maxNameBytes || !strings.HasPrefix(name, fmt.Sprintf("tools/call tool_%05d_", n)) {
			t.Fatalf("name of %d bytes: %.60q", len(name), name)
		}
	}
	kept := 0
	for key, v := range i.names.all() {
		kept++
		if len(key.target) > maxNameBytes || len(v) > len("tools/call ")+maxNameBytes {
			t.Errorf("kept a key of %d bytes", len(key.target))
		}
	}
	if kept != maxNames {
		t.Fatalf("%d span names kept, want the bound %d", kept, maxNames)
	}
}

// Names of targets the request did not find are made per request and not
// kept; methods without a target keep nothing either.
func TestSpanNamesOfUnknownTargetsNotKept(t *testing.T) {
	i := newTestInterceptor(t)
	for n := range 100 {
		if got := i.spanName(&mcphandler.Request{Method: "tools/call", Target: fmt.Sprint("nosuch_", n)}, false); got != fmt.Sprint("tools/call nosuch_", n) {
			t.Fatalf("name %q", got)
		}
		if got := i.spanName(&mcphandler.Request{Method: "resources/read", Target: fmt.Sprint("file:///", n)}, true); got != "resources/read" {
			t.Fatalf("name %q", got)
		}
	}
	for k := range i.names.all() {
		t.Errorf("kept %v", k)
	}
	// A kept name is the same for the same method and target, and another
	// method's is its own.
	a := i.spanName(&mcphandler.Request{Method: "tools/call", Target: "greet"}, true)
	b := i.spanName(&mcphandler.Request{Method: "prompts/get", Target: "greet"}, true)
	if a != "tools/call greet" || b != "prompts/get greet" || i.spanName(&mcphandler.Request{Method: "tools/call", Target: "greet"}, false) != a {
		t.Fatalf("names %q, %q", a, b)
	}
}
