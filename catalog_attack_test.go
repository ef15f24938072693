package mcphandler_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
)

// The host returns the same slices on every request, as a host with a
// fixed catalogue would. Serving them, whatever they hold (an app-only
// tool or a ui:// resource listed to a client without MCP Apps, a bad
// definition, a tool above the caller's role, skills listed after the
// resources), must leave the host's slices as they were, spare capacity
// included: other requests read them at the same time.
func TestAttackListLeavesHostSliceAlone(t *testing.T) {
	ro := &mcphandler.ToolAnnotations{ReadOnlyHint: true}
	panel := mcphandler.Tool{Name: "panel", Annotations: ro, Handler: echoTool.Handler, UI: &mcphandler.ToolUI{ResourceURI: "ui://panel", Visibility: []string{"app"}}}
	echo := mcphandler.Tool{Name: "echo", Annotations: ro, Handler: echoTool.Handler}
	bad := mcphandler.Tool{Name: "bad name", Annotations: ro, Handler: echoTool.Handler}
	admin := mcphandler.Tool{Name: "admin_only", Annotations: ro, Handler: echoTool.Handler, MinRole: "admin"}
	for _, shared := range [][]mcphandler.Tool{{panel, echo}, {bad, echo}, {panel, bad, admin, echo}} {
		resources := append(make([]mcphandler.Resource, 0, 4),
			mcphandler.Resource{URI: "ui://panel", Name: "panel"}, mcphandler.Resource{URI: "docs://a", Name: "a"})
		want := fmt.Sprint(shared, resources[:cap(resources)])
		h := mcphandler.New(mcphandler.Config{
			Authenticate:  bearer,
			Roles:         []string{"viewer", "editor", "admin"},
			Logger:        slog.New(slog.DiscardHandler),
			ListTools:     func(context.Context) ([]mcphandler.Tool, error) { return shared, nil },
			ListResources: func(context.Context) ([]mcphandler.Resource, error) { return resources, nil },
			ReadResource: func(context.Context, *mcphandler.ResourceRequest) ([]mcphandler.ResourceContents, error) {
				return nil, nil
			},
			ListSkills: func(context.Context) ([]mcphandler.Skill, error) {
				return []mcphandler.Skill{{Name: "howto", Description: "How to."}}, nil
			},
		})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		c := connect(t, h, "acme-viewer")
		raw, err := c.Call(ctx, "tools/list", nil)
		if err != nil || !strings.Contains(string(raw), `"echo"`) || strings.Contains(string(raw), `"panel"`) {
			t.Fatalf("tools/list %s %v", raw, err)
		}
		raw, err = c.Call(ctx, "resources/list", nil)
		if err != nil || !strings.Contains(string(raw), `"docs://a"`) || strings.Contains(string(raw), `"ui://panel"`) {
			t.Fatalf("resources/list %s %v", raw, err)
		}
		cancel()
		if got := fmt.Sprint(shared, resources[:cap(resources)]); got != want {
			t.Fatalf("after serving lists the host's slices hold\n%s\nwere\n%s", got, want)
		}
	}
}
