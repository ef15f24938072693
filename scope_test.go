package mcphandler_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/mcptest"
)

func scopedConfig(runs *atomic.Int64, hide bool) mcphandler.Config {
	return mcphandler.Config{
		Scopes: mcphandler.ScopeOptions{Hide: hide},
		Authenticate: func(r *http.Request) (mcphandler.Identity, error) {
			id := mcphandler.Identity{Tenant: "acme", Subject: "alice"}
			if s := r.Header.Get("X-Scopes"); s != "" {
				id.Scopes = strings.Fields(s)
			}
			return id, nil
		},
		ListTools: func(context.Context) ([]mcphandler.Tool, error) {
			return []mcphandler.Tool{{Name: "wipe", Scopes: []string{"docs:write", "docs:delete"},
				Handler: func(context.Context, *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
					runs.Add(1)
					return mcphandler.TextResult("wiped"), nil
				}}}, nil
		},
		ListPrompts: func(context.Context) ([]mcphandler.Prompt, error) {
			return []mcphandler.Prompt{{Name: "secret_prompt", Scopes: []string{"prompts:read"}}}, nil
		},
		GetPrompt: func(context.Context, *mcphandler.PromptRequest) (*mcphandler.PromptResult, error) {
			runs.Add(1)
			return &mcphandler.PromptResult{}, nil
		},
	}
}

func TestScopeStepUp(t *testing.T) {
	var runs atomic.Int64
	h := mcphandler.New(scopedConfig(&runs, false))
	ctx := context.Background()
	c := connect(t, h, "", mcptest.WithHeader("X-Scopes", "docs:write"))
	if names := toolNames(t, c); len(names) != 1 {
		t.Fatalf("an out-of-scope tool is listed by default: %v", names)
	}
	_, err := c.CallTool(ctx, "wipe", nil)
	var he *mcptest.HTTPError
	if !isHTTPErr(err, &he, 403) || he.Header.Get("WWW-Authenticate") != `Bearer error="insufficient_scope", scope="docs:write docs:delete"` {
		t.Fatalf("call without the scope: %v", err)
	}
	if re := he.RPCError(); re == nil || re.Code != mcphandler.CodeForbidden {
		t.Fatalf("403 body: %s", he.Body)
	}
	if _, err := c.Call(ctx, "prompts/get", map[string]any{"name": "secret_prompt"}); !isHTTPErr(err, &he, 403) {
		t.Fatalf("prompt without the scope: %v", err)
	}
	if runs.Load() != 0 {
		t.Fatal("an out-of-scope call ran")
	}
	full := connect(t, h, "", mcptest.WithHeader("X-Scopes", "docs:write docs:delete prompts:read"))
	if res, err := full.CallTool(ctx, "wipe", nil); err != nil || res.Text() != "wiped" {
		t.Fatalf("with the scopes: %+v, %v", res, err)
	}
	cfg := scopedConfig(&runs, false)
	cfg.Scopes.Challenge = func(r *http.Request, scopes []string) string { return "Bearer custom " + strings.Join(scopes, ",") }
	c = connect(t, mcphandler.New(cfg), "")
	if _, err := c.CallTool(ctx, "wipe", nil); !isHTTPErr(err, &he, 403) || he.Header.Get("WWW-Authenticate") != "Bearer custom docs:write,docs:delete" {
		t.Fatalf("custom challenge: %v", err)
	}
}

func TestScopeHidden(t *testing.T) {
	var runs atomic.Int64
	h := mcphandler.New(scopedConfig(&runs, true))
	c := connect(t, h, "", mcptest.WithHeader("X-Scopes", "docs:write"))
	if names := toolNames(t, c); len(names) != 0 {
		t.Fatalf("hidden out-of-scope tool listed: %v", names)
	}
	if _, err := c.CallTool(context.Background(), "wipe", nil); !isRPC(err, -32602) {
		t.Fatalf("hidden out-of-scope tool: %v, want the unknown-tool error", err)
	}
	if runs.Load() != 0 {
		t.Fatal("ran")
	}
}

func isHTTPErr(err error, target **mcptest.HTTPError, status int) bool {
	return errorsAs(err, target) && (*target).Status == status
}

// authParams parses the auth-params of a challenge ("Bearer a="x", b="y"")
// as RFC 9110 does, unescaping quoted-strings.
func authParams(t *testing.T, challenge string) map[string]string {
	t.Helper()
	rest, ok := strings.CutPrefix(challenge, "Bearer ")
	if !ok {
		t.Fatalf("challenge %q", challenge)
	}
	params := map[string]string{}
	for rest != "" {
		name, after, ok := strings.Cut(rest, `="`)
		if !ok {
			t.Fatalf("malformed challenge %q at %q", challenge, rest)
		}
		var val strings.Builder
		i := 0
		for ; i < len(after) && after[i] != '"'; i++ {
			if after[i] == '\\' && i+1 < len(after) {
				i++
			}
			val.WriteByte(after[i])
		}
		if i == len(after) {
			t.Fatalf("unterminated quoted-string in %q", challenge)
		}
		if _, dup := params[name]; dup {
			t.Fatalf("parameter %s twice in %q", name, challenge)
		}
		params[name] = val.String()
		rest = strings.TrimPrefix(after[i+1:], ", ")
	}
	return params
}

// The attacker controls a scope name (a host that derives scopes from
// tenant data) and puts a quote and a backslash in it, to end the scope
// parameter of the step-up challenge and add one of their own. The
// challenge must still carry exactly error and scope, and scope must name
// the scopes exactly.
func TestAttackScopeNameInChallenge(t *testing.T) {
	evil := []string{`docs:"write"`, `a\b`, `x", error="invalid_token`}
	cfg := mcphandler.Config{
		Authenticate: mcphandler.InsecureAnonymous,
		ListTools: func(context.Context) ([]mcphandler.Tool, error) {
			return []mcphandler.Tool{{Name: "wipe", Scopes: evil, Handler: echoTool.Handler}}, nil
		},
	}
	c := connect(t, mcphandler.New(cfg), "")
	_, err := c.CallTool(context.Background(), "wipe", nil)
	var he *mcptest.HTTPError
	if !isHTTPErr(err, &he, 403) {
		t.Fatalf("call without the scopes: %v", err)
	}
	got := authParams(t, he.Header.Get("WWW-Authenticate"))
	if len(got) != 2 || got["error"] != "insufficient_scope" || got["scope"] != strings.Join(evil, " ") {
		t.Fatalf("challenge %q parses as %q", he.Header.Get("WWW-Authenticate"), got)
	}
}
