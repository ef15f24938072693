package mcphandler_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/mcptest"
	"github.com/mcphandler/mcphandler/session"
)

// ClientCapabilitiesFrom tells a hook what the client of the request
// declared, in every era, and nothing another client declared.
func TestClientCapabilitiesFrom(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]session.Capabilities{} // by hook
	note := func(ctx context.Context, where string) {
		mu.Lock()
		defer mu.Unlock()
		seen[where] = mcphandler.ClientCapabilitiesFrom(ctx)
	}
	cfg := mcphandler.Config{
		Authenticate: bearer,
		ListTools: func(ctx context.Context) ([]mcphandler.Tool, error) {
			note(ctx, "ListTools")
			return []mcphandler.Tool{{Name: "probe", Annotations: &mcphandler.ToolAnnotations{ReadOnlyHint: true},
				Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
					note(ctx, "Handler")
					return mcphandler.TextResult("ok"), nil
				}}}, nil
		},
	}
	h := mcphandler.New(cfg)
	defer h.Close()
	reset := func() {
		mu.Lock()
		clear(seen)
		mu.Unlock()
	}
	check := func(t *testing.T, want session.Capabilities) {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		for _, where := range []string{"ListTools", "Handler"} {
			if got, ok := seen[where]; !ok || got != want {
				t.Errorf("%s saw %b (seen %v), want %b", where, got, ok, want)
			}
		}
	}
	ctx := context.Background()
	t.Run("2025 session", func(t *testing.T) {
		reset()
		c := mcptest.New(t, h, mcptest.WithToken("acme-admin"), mcptest.WithElicitationHandler(answer("accept", nil)))
		if _, err := c.Initialize(ctx); err != nil {
			t.Fatal(err)
		}
		// Another client without capabilities, in between.
		other := mcptest.New(t, h, mcptest.WithToken("acme-admin"))
		if _, err := other.Initialize(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := c.CallTool(ctx, "probe", nil); err != nil {
			t.Fatal(err)
		}
		check(t, session.CapElicitationForm)
		reset()
		if _, err := other.CallTool(ctx, "probe", nil); err != nil {
			t.Fatal(err)
		}
		check(t, 0)
	})
	t.Run("2026-07-28", func(t *testing.T) {
		reset()
		srv := httptest.NewServer(h)
		defer srv.Close()
		_, _, body := modernPost(t, srv, "acme-admin", modernBody(1, "tools/call", `"name":"probe"`, `{"sampling":{},"roots":{}}`), nil)
		var m map[string]json.RawMessage
		if json.Unmarshal(body, &m) != nil || m["result"] == nil {
			t.Fatalf("%s", body)
		}
		check(t, session.CapSampling|session.CapRoots)
	})
	t.Run("outside a request", func(t *testing.T) {
		if got := mcphandler.ClientCapabilitiesFrom(ctx); got != 0 {
			t.Fatalf("%b", got)
		}
	})
}

// An upstream's hints do not make its tool safe unless the host trusts
// them.
func TestToolOriginHints(t *testing.T) {
	ro := &mcphandler.ToolAnnotations{ReadOnlyHint: true}
	for _, c := range []struct {
		name string
		tool mcphandler.Tool
		want bool
	}{
		{"local read-only", mcphandler.Tool{Annotations: ro}, false},
		{"upstream read-only, untrusted", mcphandler.Tool{Annotations: ro, Origin: &mcphandler.ToolOrigin{Upstream: "u"}}, true},
		{"upstream read-only, trusted", mcphandler.Tool{Annotations: ro, Origin: &mcphandler.ToolOrigin{Upstream: "u", TrustHints: true}}, false},
		{"upstream without hints, trusted", mcphandler.Tool{Origin: &mcphandler.ToolOrigin{Upstream: "u", TrustHints: true}}, true},
	} {
		if got := c.tool.Destructive(); got != c.want {
			t.Errorf("%s: Destructive() = %v", c.name, got)
		}
	}
}
