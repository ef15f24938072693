package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/gateway"
	"github.com/mcphandler/mcphandler/mcptest"
)

// slowUpstream is an upstream whose one tool, "work", reports progress
// twice, then waits until released or cancelled, and says which.
type slowUpstream struct {
	srv       *httptest.Server
	started   chan struct{}
	release   chan struct{}
	cancelled chan struct{}
}

func newSlowUpstream(t *testing.T) *slowUpstream {
	s := &slowUpstream{started: make(chan struct{}, 1), release: make(chan struct{}), cancelled: make(chan struct{}, 1)}
	h := mcphandler.New(mcphandler.Config{
		Authenticate: func(*http.Request) (mcphandler.Identity, error) { return mcphandler.Identity{Subject: "gw"}, nil },
		ListTools: func(context.Context) ([]mcphandler.Tool, error) {
			return []mcphandler.Tool{{Name: "work", Annotations: &mcphandler.ToolAnnotations{ReadOnlyHint: true},
				Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
					call.Progress(1, 2, "half")
					call.Progress(2, 2, "all")
					s.started <- struct{}{}
					select {
					case <-s.release:
						return mcphandler.TextResult("done"), nil
					case <-ctx.Done():
						s.cancelled <- struct{}{}
						return nil, ctx.Err()
					}
				}}}, nil
		},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	s.srv = httptest.NewServer(h)
	t.Cleanup(func() { s.srv.Close(); h.Close() })
	return s
}

func slowGateway(t *testing.T, s *slowUpstream, era gateway.Era) *gatewayHost {
	return newGateway(t, gateway.Config{Upstreams: func(ctx context.Context, id mcphandler.Identity) ([]gateway.Upstream, error) {
		return []gateway.Upstream{{ID: "slow", URL: s.srv.URL, Era: era}}, nil
	}})
}

// The upstream's progress reaches a client that asked for it, with the
// client's own progressToken.
func TestProgressRelayed(t *testing.T) {
	for _, era := range []gateway.Era{gateway.EraSessions, gateway.EraStateless} {
		t.Run(string(era), func(t *testing.T) {
			s := newSlowUpstream(t)
			close(s.release)
			gh := slowGateway(t, s, era)
			c := connect(t, gh.h, "acme-admin")
			if _, err := c.Call(context.Background(), "tools/call", map[string]any{"name": "slow_work",
				"_meta": map[string]any{"progressToken": "mine-7"}}); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, n := range c.Notifications() {
				if n.Method != "notifications/progress" {
					continue
				}
				var p struct {
					Token    json.RawMessage `json:"progressToken"`
					Progress float64         `json:"progress"`
					Message  string          `json:"message"`
				}
				json.Unmarshal(n.Params, &p)
				got = append(got, string(p.Token)+" "+p.Message)
			}
			if len(got) != 2 || got[0] != `"mine-7" half` || got[1] != `"mine-7" all` {
				t.Fatalf("progress relayed: %q", got)
			}
		})
	}
}

// A client that gives up cancels the call upstream, in every upstream era.
func TestCancelReachesUpstream(t *testing.T) {
	for _, era := range []gateway.Era{gateway.EraSessions, gateway.EraStateless} {
		t.Run(string(era), func(t *testing.T) {
			s := newSlowUpstream(t)
			gh := slowGateway(t, s, era)
			c := connect(t, gh.h, "acme-admin")
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { _, err := c.CallTool(ctx, "slow_work", nil); done <- err }()
			select {
			case <-s.started:
			case <-time.After(5 * time.Second):
				t.Fatal("the call never reached the upstream")
			}
			cancel()
			select {
			case <-s.cancelled:
			case <-time.After(5 * time.Second):
				t.Fatal("the upstream call was not cancelled")
			}
			<-done
		})
	}
}

// The upstream's log messages reach a client at the level it asked for,
// and the upstream is asked for none when the client asked for none.
func TestLogRelayed(t *testing.T) {
	for _, era := range []gateway.Era{gateway.EraSessions, gateway.EraStateless} {
		t.Run(string(era), func(t *testing.T) {
			h := mcphandler.New(mcphandler.Config{
				Authenticate: func(*http.Request) (mcphandler.Identity, error) { return mcphandler.Identity{Subject: "gw"}, nil },
				ListTools: func(context.Context) ([]mcphandler.Tool, error) {
					return []mcphandler.Tool{{Name: "talk", Annotations: &mcphandler.ToolAnnotations{ReadOnlyHint: true},
						Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
							call.Log(mcphandler.LevelDebug, "up", "too low")
							call.Log(mcphandler.LevelWarning, "up", map[string]any{"disk": "low"})
							return mcphandler.TextResult("ok"), nil
						}}}, nil
				},
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			})
			srv := httptest.NewServer(h)
			t.Cleanup(func() { srv.Close(); h.Close() })
			gh := newGateway(t, gateway.Config{Upstreams: func(ctx context.Context, id mcphandler.Identity) ([]gateway.Upstream, error) {
				return []gateway.Upstream{{ID: "up", URL: srv.URL, Era: era}}, nil
			}})
			logs := func(level string) []string {
				c := connect(t, gh.h, "acme-admin")
				if level != "" {
					if _, err := c.Call(context.Background(), "logging/setLevel", map[string]any{"level": level}); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := c.CallTool(context.Background(), "up_talk", nil); err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, n := range c.Notifications() {
					if n.Method == "notifications/message" {
						got = append(got, string(n.Params))
					}
				}
				return got
			}
			if got := logs("info"); len(got) != 1 || got[0] != `{"level":"warning","logger":"up","data":{"disk":"low"}}` {
				t.Fatalf("at info: %q", got)
			}
			if got := logs(""); len(got) != 0 {
				t.Fatalf("without a level: %q", got)
			}
		})
	}
}

// An answer that reaches the gateway at the instant its Timeout ends the
// call: swept across the deadline, the upstream acts at most once, and
// exactly once when the client was told the call succeeded.
func TestAnswerAtTheTimeout(t *testing.T) {
	const timeout = 400 * time.Millisecond
	for _, era := range []gateway.Era{gateway.EraSessions, gateway.EraStateless} {
		for _, d := range []time.Duration{300, 390, 400, 410, 500} {
			delay := d * time.Millisecond
			t.Run(fmt.Sprint(era, "/", delay), func(t *testing.T) {
				docs := newUpstream(t, upstreamTool{name: "search", readOnly: true, ask: true})
				gh := newGateway(t, gateway.Config{Timeout: timeout, Upstreams: upstreamsFor(map[string]*fakeUpstream{"docs": docs}, era)})
				c := connect(t, gh.h, "acme-admin", mcptest.WithElicitationHandler(
					func(ctx context.Context, p mcptest.ElicitParams) (mcptest.ElicitResult, error) {
						time.Sleep(delay)
						return mcptest.ElicitResult{Action: "accept", Content: map[string]any{"sure": true}}, nil
					}))
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				res, err := c.CallTool(ctx, "docs_search", nil)
				ok := err == nil && !res.IsError
				time.Sleep(200 * time.Millisecond) // an answer still in flight upstream lands
				t.Logf("ok=%v acted=%d", ok, docs.count("search"))
				switch n := docs.count("search"); {
				case n > 1:
					t.Fatalf("the upstream acted %d times", n)
				case ok && n != 1:
					t.Fatalf("the client was told it ran, the upstream acted %d times", n)
				}
			})
		}
	}
}
