package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/approval"
	"github.com/mcphandler/mcphandler/elicitation"
	"github.com/mcphandler/mcphandler/gateway"
	"github.com/mcphandler/mcphandler/mcptest"
	"github.com/mcphandler/mcphandler/session"
)

// asking is an upstream (this library) whose tool "wipe" asks "Sure?" (a
// form with one boolean) before it acts, "wipe_twice" asks it twice, and
// "name" asks for a string; each says what it was answered. It counts
// the wipes that acted.
type asking struct {
	srv   *httptest.Server
	wiped atomic.Int64
}

func newAsking(t *testing.T) *asking {
	u := &asking{}
	sure := func(ctx context.Context, call *mcphandler.ToolCall, key string) (bool, error) {
		res, err := call.Elicit(ctx, mcphandler.ElicitRequest{Key: key, Message: "Sure?",
			Schema: elicitation.NewSchema().Boolean("sure", elicitation.Required())})
		if err != nil {
			return false, err
		}
		return res.Action == elicitation.Accept && res.Content["sure"] == true, nil
	}
	tool := func(name string, run func(ctx context.Context, call *mcphandler.ToolCall) (string, error)) mcphandler.Tool {
		return mcphandler.Tool{Name: name, InputSchema: json.RawMessage(`{"type":"object"}`),
			// Read-only by its word, so that newGateway lets a viewer see
			// it; these tests decide each call themselves.
			Annotations: &mcphandler.ToolAnnotations{ReadOnlyHint: true},
			Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
				text, err := run(ctx, call)
				if err != nil {
					return nil, err
				}
				return mcphandler.TextResult(text), nil
			}}
	}
	h := mcphandler.New(mcphandler.Config{
		Name: "asking", Version: "1", Authenticate: mcphandler.InsecureAnonymous,
		ListTools: func(ctx context.Context) ([]mcphandler.Tool, error) {
			return []mcphandler.Tool{
				tool("wipe", func(ctx context.Context, call *mcphandler.ToolCall) (string, error) {
					ok, err := sure(ctx, call, "sure")
					if err != nil || !ok {
						return "kept", err
					}
					u.wiped.Add(1)
					return "wiped", nil
				}),
				tool("wipe_twice", func(ctx context.Context, call *mcphandler.ToolCall) (string, error) {
					first, err := sure(ctx, call, "first")
					if err != nil {
						return "", err
					}
					second, err := sure(ctx, call, "second")
					if err != nil {
						return "", err
					}
					return "first " + yes(first) + ", second " + yes(second), nil
				}),
				tool("mixed", func(ctx context.Context, call *mcphandler.ToolCall) (string, error) {
					// One round: "Sure?" and a sampling request together.
					_, err := call.Exchange.Ask(ctx,
						mcphandler.Input{Key: "sure", Elicit: &mcphandler.ElicitRequest{Message: "Sure?",
							Schema: elicitation.NewSchema().Boolean("sure", elicitation.Required())}},
						mcphandler.Input{Key: "roots", ListRoots: true})
					if err != nil {
						return "", err
					}
					u.wiped.Add(1)
					return "mixed answered", nil
				}),
				tool("name", func(ctx context.Context, call *mcphandler.ToolCall) (string, error) {
					res, err := call.Elicit(ctx, mcphandler.ElicitRequest{Message: "Name?",
						Schema: elicitation.NewSchema().String("name", elicitation.Required())})
					if err != nil {
						return "", err
					}
					return "named: " + string(res.Action), nil
				}),
			}, nil
		},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	sse, msgs := h.LegacySSE("/messages")
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	mux.Handle("/sse", sse)
	mux.Handle("/messages", msgs)
	u.srv = httptest.NewServer(mux)
	t.Cleanup(func() { u.srv.Close(); h.Close() })
	return u
}

func yes(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// confirmsGateway is a gateway in front of u (era) with mode, whose
// BeforeCall lets every call run, or asks for an approval on its page
// (approve); it returns the approvals, which a test decides.
func confirmsGateway(t *testing.T, u *asking, era gateway.Era, mode gateway.ConfirmMode, approve bool) (*gatewayHost, *approval.Store) {
	store := session.NewMemory()
	keys := [][]byte{[]byte("0123456789abcdef0123456789abcdef")}
	approvals, err := approval.New(approval.Config{Store: store, Keys: keys, URL: "https://gateway.test/approvals/",
		TTL: 5 * time.Second, Roles: []string{"viewer", "editor", "admin"}, Poll: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { approvals.Close() })
	gh := newGateway(t, gateway.Config{
		Upstreams: func(ctx context.Context, id mcphandler.Identity) ([]gateway.Upstream, error) {
			url := u.srv.URL + "/mcp"
			if era == gateway.EraLegacy {
				url = u.srv.URL + "/sse"
			}
			return []gateway.Upstream{{ID: "up", URL: url, Era: era, Confirms: mode}}, nil
		}}, func(c *mcphandler.Config) {
		c.Store, c.StateKeys, c.Approvals = store, keys, approvals
		c.BeforeCall = func(ctx context.Context, call *mcphandler.ToolCall) (mcphandler.Decision, error) {
			if approve {
				return mcphandler.Approve("Wipe?", approval.Policy{}), nil
			}
			return mcphandler.Allow(), nil
		}
	})
	return gh, approvals
}

// askedClient counts the questions alice (acme-viewer) was asked: the
// approval page's URL, which bob (an admin of the tenant) approves at
// once, and forms, answered yes.
type askedClient struct {
	forms, urls atomic.Int64
}

func (cl *askedClient) options(approvals *approval.Store) []mcptest.Option {
	return []mcptest.Option{mcptest.WithToken("acme-viewer"),
		mcptest.WithCapabilities(json.RawMessage(`{"elicitation":{"form":{},"url":{}}}`)),
		mcptest.WithElicitationHandler(func(ctx context.Context, p mcptest.ElicitParams) (mcptest.ElicitResult, error) {
			if p.URL != "" {
				cl.urls.Add(1)
				id := strings.TrimPrefix(p.URL, "https://gateway.test/approvals/") // the approval's id, in every era
				go approvals.Decide(context.Background(), id, approval.Identity{Tenant: "acme", Subject: "bob", Role: "admin"}, true)
				return mcptest.ElicitResult{Action: "accept"}, nil
			}
			cl.forms.Add(1)
			if p.Message == "Name?" {
				return mcptest.ElicitResult{Action: "accept", Content: map[string]any{"name": "x"}}, nil
			}
			return mcptest.ElicitResult{Action: "accept", Content: map[string]any{"sure": true}}, nil
		})}
}

// confirmCall calls tool through a client of gh (2025-11-25 or 2026-07-28)
// and returns its text.
func confirmCall(t *testing.T, gh *gatewayHost, modern bool, opts []mcptest.Option, tool string) string {
	t.Helper()
	var c *mcptest.Client
	if modern {
		c = mcptest.NewModern(t, gh.h, opts...)
	} else {
		c = connect(t, gh.h, "acme-viewer", opts...)
	}
	res, err := c.CallTool(context.Background(), tool, nil)
	if err != nil {
		return "error: " + err.Error()
	}
	return resultText(res)
}

// An upstream's own confirmation is the client's to answer by default;
// with ConfirmsDecline the gateway declines it and the client is never
// asked; with ConfirmsApproval the person who approved the call answers
// it — once, and only a yes/no — and without an approval it is declined:
// the client, which may be the agent itself, never answers it. In every
// cell of the era matrix: with an upstream older than a 2026-07-28 client,
// a confirmation the gateway answers needs no tasks.
func TestUpstreamConfirms(t *testing.T) {
	for _, era := range []gateway.Era{gateway.EraSessions, gateway.EraStateless, gateway.EraLegacy} {
		for _, modern := range []bool{false, true} {
			name := string(era) + map[bool]string{false: " upstream, 2025 client", true: " upstream, 2026-07-28 client"}[modern]
			t.Run(name, func(t *testing.T) {
				// A 2026-07-28 client answers an older upstream's
				// questions only through tasks (none here): relayed, the
				// question ends the call, saying so; answered by the
				// gateway, the call needs no client at all.
				older := modern && era != gateway.EraStateless
				u := newAsking(t)
				for _, tc := range []struct {
					mode    gateway.ConfirmMode
					approve bool
					tool    string
					want    string
					forms   int64 // questions the client answered
				}{
					{gateway.ConfirmsRelay, false, "wipe", "wiped", 1},
					{gateway.ConfirmsDecline, false, "wipe", "kept", 0},
					{gateway.ConfirmsApproval, false, "wipe", "kept", 0},
					{gateway.ConfirmsApproval, true, "wipe", "wiped", 0},
					{gateway.ConfirmsApproval, true, "wipe_twice", "first yes, second no", 0},
					{gateway.ConfirmsApproval, true, "name", "named: decline", 0},
				} {
					gh, approvals := confirmsGateway(t, u, era, tc.mode, tc.approve)
					cl := &askedClient{}
					got := confirmCall(t, gh, modern, cl.options(approvals), "up_"+tc.tool)
					if older && tc.mode == gateway.ConfirmsRelay && strings.Contains(got, "io.modelcontextprotocol/tasks") {
						got, tc.forms = tc.want, 0
					}
					if got != tc.want || cl.forms.Load() != tc.forms || (cl.urls.Load() > 0) != tc.approve {
						t.Errorf("%v, approve %v, %s: %q, the client answered %d forms and %d approval pages; want %q, %d forms",
							tc.mode, tc.approve, tc.tool, got, cl.forms.Load(), cl.urls.Load(), tc.want, tc.forms)
					}
				}
			})
		}
	}
}

// A 2026-07-28 upstream that asks, in one round relayed to a 2026-07-28
// client, a confirmation the gateway answers itself together with a
// question for the client gets neither: the call ends with an error
// saying why, and nothing acts upstream.
func TestUpstreamConfirmsMixedRound(t *testing.T) {
	u := newAsking(t)
	gh, approvals := confirmsGateway(t, u, gateway.EraStateless, gateway.ConfirmsDecline, false)
	cl := &askedClient{}
	got := confirmCall(t, gh, true, append(cl.options(approvals),
		mcptest.WithCapabilities(json.RawMessage(`{"elicitation":{"form":{}},"roots":{}}`))), "up_mixed")
	if !strings.Contains(got, "together with questions for the client") || u.wiped.Load() != 0 || cl.forms.Load() != 0 {
		t.Fatalf("%q; acted %d, %d forms asked", got, u.wiped.Load(), cl.forms.Load())
	}
}
