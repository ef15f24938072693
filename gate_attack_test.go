package mcphandler_test

// Attacks on the promise "hidden means not found": something the caller
// cannot see is never run, and refusing it looks exactly like something
// that does not exist, whatever path reaches it (2025 sessions, batches,
// 2026-07-28, the legacy transport, subscriptions, completion).

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/mcptest"
)

// shadowHost serves a role-gated and a scope-gated concrete resource whose
// URIs also match a template every caller sees, and counts what runs.
type shadowHost struct {
	mu        sync.Mutex
	reads     map[string]int // URI -> ReadResource runs
	listRes   atomic.Int64   // ListResources calls
	listTmpl  atomic.Int64   // ListResourceTemplates calls
	completes atomic.Int64
}

func (s *shadowHost) readsOf(uri string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads[uri]
}

func (s *shadowHost) config() mcphandler.Config {
	s.reads = map[string]int{}
	return mcphandler.Config{
		Authenticate: bearer,
		Roles:        []string{"viewer", "editor", "admin"},
		Scopes:       mcphandler.ScopeOptions{Hide: true},
		ListResources: func(context.Context) ([]mcphandler.Resource, error) {
			s.listRes.Add(1)
			return []mcphandler.Resource{
				{URI: "docs://board-minutes", Name: "board minutes", MinRole: "admin"},
				{URI: "docs://payroll", Name: "payroll", Scopes: []string{"hr:read"}},
				{URI: "docs://welcome", Name: "welcome"},
			}, nil
		},
		ListResourceTemplates: func(context.Context) ([]mcphandler.ResourceTemplate, error) {
			s.listTmpl.Add(1)
			return []mcphandler.ResourceTemplate{{URITemplate: "docs://{id}", Name: "doc"}}, nil
		},
		ReadResource: func(_ context.Context, req *mcphandler.ResourceRequest) ([]mcphandler.ResourceContents, error) {
			s.mu.Lock()
			s.reads[req.URI]++
			s.mu.Unlock()
			return []mcphandler.ResourceContents{{URI: req.URI, Text: "contents of " + req.URI}}, nil
		},
		ListPrompts: func(context.Context) ([]mcphandler.Prompt, error) {
			return []mcphandler.Prompt{
				{Name: "salary_review", MinRole: "admin", Arguments: []mcphandler.PromptArgument{{Name: "employee"}}},
				{Name: "hr_report", Scopes: []string{"hr:read"}, Arguments: []mcphandler.PromptArgument{{Name: "employee"}}},
			}, nil
		},
		GetPrompt: func(context.Context, *mcphandler.PromptRequest) (*mcphandler.PromptResult, error) {
			return &mcphandler.PromptResult{}, nil
		},
		Complete: func(context.Context, *mcphandler.CompleteRequest) (*mcphandler.CompleteResult, error) {
			s.completes.Add(1)
			return &mcphandler.CompleteResult{Values: []string{"alice", "bob"}}, nil
		},
	}
}

// The attacker, a viewer without the hr:read scope, reads an admin-only
// and a scope-gated document by their URIs, which also match the visible
// template docs://{id}. They must get exactly the answer for a URI that
// matches nothing, on every revision and transport, and ReadResource must
// never run for them.
func TestAttackHiddenResourceThroughTemplate(t *testing.T) {
	s := &shadowHost{}
	h := mcphandler.New(s.config())
	ctx := context.Background()
	hidden := []string{"docs://board-minutes", "docs://payroll"}
	const unknown = "other://nothing"

	read := map[string]func(uri string) (string, error){}
	c25 := connect(t, h, "acme-viewer")
	read["2025-11-25"] = func(uri string) (string, error) {
		raw, err := c25.Call(ctx, "resources/read", map[string]any{"uri": uri})
		return string(raw), err
	}
	batch := connect(t, h, "acme-viewer", mcptest.WithProtocolVersion("2025-03-26"))
	read["2025-03-26 batch"] = func(uri string) (string, error) {
		msgs, err := batch.Batch(ctx, mcptest.BatchRequest{Method: "resources/read", Params: map[string]any{"uri": uri}})
		if err != nil {
			return "", err
		}
		if msgs[0].Error != nil {
			return "", msgs[0].Error
		}
		return string(msgs[0].Result), nil
	}
	c26 := mcptest.NewModern(t, h, mcptest.WithToken("acme-viewer"))
	read["2026-07-28"] = func(uri string) (string, error) {
		raw, err := c26.ReadResource(ctx, uri)
		return string(raw), err
	}
	legacy := mcptest.NewLegacy(t, legacyMux(h), "/sse", mcptest.WithToken("acme-viewer"))
	if _, err := legacy.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	read["2024-11-05"] = func(uri string) (string, error) {
		raw, err := legacy.Call(ctx, "resources/read", map[string]any{"uri": uri})
		return string(raw), err
	}

	for path, rd := range read {
		t.Run(path, func(t *testing.T) {
			// The template is visible: an ordinary document reads.
			if got, err := rd("docs://q3-plan"); err != nil || !strings.Contains(got, "contents of docs://q3-plan") {
				t.Fatalf("template read: %s %v", got, err)
			}
			_, err := rd(unknown)
			want := refusal(t, err, unknown)
			for _, uri := range hidden {
				_, err := rd(uri)
				if got := refusal(t, err, uri); got != want {
					t.Errorf("hidden %s answered %q, an unknown URI %q", uri, got, want)
				}
			}
		})
	}
	for _, uri := range hidden {
		if n := s.readsOf(uri); n != 0 {
			t.Errorf("ReadResource ran %d times for hidden %s", n, uri)
		}
	}
	// The admin reads the board minutes as the concrete resource.
	admin := connect(t, h, "acme-admin")
	if raw, err := admin.Call(ctx, "resources/read", map[string]any{"uri": "docs://board-minutes"}); err != nil || !strings.Contains(string(raw), "contents of") {
		t.Fatalf("admin read: %s %v", raw, err)
	}
}

// The attacker subscribes to a hidden document through the visible
// template, on a 2025 session and on a 2026-07-28 listen stream, hoping to
// learn when it changes. The subscription must be refused like one to an
// unknown URI, and no update for it may reach them.
func TestAttackSubscribeHiddenThroughTemplate(t *testing.T) {
	s := &shadowHost{}
	h := mcphandler.New(s.config())
	ctx := context.Background()

	c := connect(t, h, "acme-viewer")
	_, err := c.Call(ctx, "resources/subscribe", map[string]any{"uri": "other://nothing"})
	want := refusal(t, err, "other://nothing")
	for _, uri := range []string{"docs://board-minutes", "docs://payroll"} {
		_, err := c.Call(ctx, "resources/subscribe", map[string]any{"uri": uri})
		if got := refusal(t, err, uri); got != want {
			t.Errorf("subscribing to hidden %s: %q, unknown: %q", uri, got, want)
		}
	}

	m := mcptest.NewModern(t, h, mcptest.WithToken("acme-viewer"))
	st, err := m.Listen(ctx, map[string]any{"resourceSubscriptions": []string{"docs://board-minutes", "docs://payroll", "docs://q3-plan"}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ack := nextMessage(t, st, 5*time.Second)
	if ack == nil || !strings.Contains(string(ack.Params), `"resourceSubscriptions":["docs://q3-plan"]`) {
		t.Fatalf("ack %+v: only the visible document may be agreed", ack)
	}
	h.NotifyResourceUpdated(ctx, "docs://board-minutes", mcphandler.Everyone())
	h.NotifyResourceUpdated(ctx, "docs://q3-plan", mcphandler.Everyone())
	if u := nextMessage(t, st, 5*time.Second); u == nil || !strings.Contains(string(u.Params), "docs://q3-plan") {
		t.Fatalf("update %+v, want only docs://q3-plan", u)
	}
}

// The attacker sends a listen filter naming many URIs so that each costs
// the host two list hook calls. The handler must resolve the whole filter
// with one call of each list hook.
func TestAttackListenFilterCostsOneListCall(t *testing.T) {
	s := &shadowHost{}
	h := mcphandler.New(s.config())
	ctx := context.Background()
	m := mcptest.NewModern(t, h, mcptest.WithToken("acme-viewer"))
	uris := make([]string, 10)
	for i := range uris {
		uris[i] = "docs://d" + string(rune('a'+i))
	}
	st, err := m.Listen(ctx, map[string]any{"resourceSubscriptions": uris})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if ack := nextMessage(t, st, 5*time.Second); ack == nil {
		t.Fatal("no acknowledgement")
	}
	if r, tm := s.listRes.Load(), s.listTmpl.Load(); r != 1 || tm != 1 {
		t.Fatalf("a listen filter of %d URIs cost %d ListResources and %d ListResourceTemplates calls, want 1 and 1", len(uris), r, tm)
	}
}

// The attacker asks for completions of a prompt above their role and of a
// prompt whose scope their token lacks, hoping the Complete hook reveals
// argument values (employee names). They must get the unknown-prompt
// answer, and Complete must not run. With scopes listed but not hidden,
// completion is a use like prompts/get: 403 insufficient_scope.
func TestAttackCompleteHiddenPrompt(t *testing.T) {
	s := &shadowHost{}
	cfg := s.config()
	h := mcphandler.New(cfg)
	ctx := context.Background()
	c := connect(t, h, "acme-viewer")
	complete := func(c *mcptest.Client, name string) error {
		_, err := c.Call(ctx, "completion/complete", map[string]any{
			"ref": map[string]any{"type": "ref/prompt", "name": name}, "argument": map[string]any{"name": "employee", "value": ""},
		})
		return err
	}
	want := refusal(t, complete(c, "no_such_prompt"), "no_such_prompt")
	for _, name := range []string{"salary_review", "hr_report"} {
		if got := refusal(t, complete(c, name), name); got != want {
			t.Errorf("completing hidden %s: %q, unknown: %q", name, got, want)
		}
	}
	if n := s.completes.Load(); n != 0 {
		t.Fatalf("Complete ran %d times for hidden prompts", n)
	}

	cfg.Scopes.Hide = false
	c = connect(t, mcphandler.New(cfg), "acme-viewer")
	err := complete(c, "hr_report")
	var he *mcptest.HTTPError
	if !errors.As(err, &he) || he.Status != http.StatusForbidden || !strings.Contains(he.Header.Get("WWW-Authenticate"), "insufficient_scope") {
		t.Fatalf("completing a prompt without its scope: %v, want 403 insufficient_scope", err)
	}
	if n := s.completes.Load(); n != 0 {
		t.Fatalf("Complete ran %d times without the prompt's scope", n)
	}
}

// The attacker calls a tool above their role by names that differ from its
// own only in case, spacing or invisible characters, and through every
// transport. None of them may run it, and each answer is the one for an
// unknown name.
func TestAttackHiddenToolOtherNames(t *testing.T) {
	f := &fixture{}
	h := mcphandler.New(f.config())
	ctx := context.Background()
	c := connect(t, h, "globex-editor")
	m := mcptest.NewModern(t, h, mcptest.WithToken("globex-editor"))
	legacy := mcptest.NewLegacy(t, legacyMux(h), "/sse", mcptest.WithToken("globex-editor"))
	if _, err := legacy.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	batch := connect(t, h, "globex-editor", mcptest.WithProtocolVersion("2025-03-26"))
	calls := map[string]func(name string) error{
		"2025-11-25": func(name string) error { _, err := c.CallTool(ctx, name, nil); return err },
		"2026-07-28": func(name string) error { _, err := m.CallTool(ctx, name, nil); return err },
		"2024-11-05": func(name string) error { _, err := legacy.CallTool(ctx, name, nil); return err },
		"2025-03-26 batch": func(name string) error {
			msgs, err := batch.Batch(ctx, mcptest.BatchRequest{Method: "tools/call", Params: map[string]any{"name": name}})
			if err != nil {
				return err
			}
			if msgs[0].Error != nil {
				return msgs[0].Error
			}
			return nil
		},
	}
	for path, call := range calls {
		want := refusal(t, call("no_such_tool"), "no_such_tool")
		for _, name := range []string{"admin_op", "acme_only", "Admin_op", "admin_op ", " admin_op", "admin_op\u200b", "admin_op\x00", "ADMIN_OP"} {
			if got := refusal(t, call(name), name); got != want {
				t.Errorf("%s: %q answered %q, an unknown tool %q", path, name, got, want)
			}
		}
	}
	for _, name := range []string{"admin_op", "acme_only"} {
		if n := f.count(name); n != 0 {
			t.Errorf("hidden tool %s ran %d times", name, n)
		}
	}
}
