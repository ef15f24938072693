package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/elicitation"
	"github.com/mcphandler/mcphandler/gateway"
	"github.com/mcphandler/mcphandler/mcptest"
)

// A 2026-07-28 client, a 2026-07-28 upstream whose tool asks mid-call: the
// upstream's question reaches the client as a round of the gateway's, the
// client's answer reaches the upstream with its requestState, and the
// upstream's tool completes once; the gateway's own confirm comes first,
// under its own key.
func TestRelayedRound(t *testing.T) {
	for _, tc := range []struct {
		tool   string
		asked  []string
		keys   [][]string // the keys of each round the client answered
		rounds int
	}{
		{"search", []string{"Sure?"}, [][]string{{"upstream/1/elicit-1"}}, 2},
		{"delete", []string{"Forward docs_delete?", "Sure?"}, [][]string{{"mcphandler/confirm"}, {"upstream/1/elicit-1"}}, 3},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			docs := newUpstream(t, upstreamTool{name: "search", readOnly: true, ask: true}, upstreamTool{name: "delete", ask: true})
			gh := newGateway(t, gateway.Config{Upstreams: upstreamsFor(map[string]*fakeUpstream{"docs": docs}, gateway.EraStateless)})
			a := &answerer{}
			keys := &keyLog{}
			c := mcptest.NewModern(t, keys.serve(gh.h), mcptest.WithToken("acme-admin"), mcptest.WithElicitationHandler(keys.wrap(a.handler())))
			res, err := c.CallTool(context.Background(), "docs_"+tc.tool, map[string]any{"q": "x"})
			if err != nil || res.IsError {
				t.Fatalf("%+v %v", res, err)
			}
			if got := resultText(res); got != tc.tool+` ran for upstream-acme args={"q":"x"} answer=accept` {
				t.Fatalf("result %q", got)
			}
			if q := a.questions(); !slices.Equal(q, tc.asked) {
				t.Fatalf("asked %q", q)
			}
			if c.Rounds() != tc.rounds {
				t.Fatalf("%d rounds", c.Rounds())
			}
			if got := keys.rounds(); !equalRounds(got, tc.keys) {
				t.Fatalf("keys %q", got)
			}
			if n, calls := docs.count(tc.tool), docs.sawMethod("tools/call"); n != 1 || calls != 2 {
				t.Fatalf("the upstream tool completed %d times over %d calls; want once over 2 (the question, the answer)", n, calls)
			}
		})
	}
}

// The gateway's confirm, then an upstream that confirms too (under the
// same reserved key, there) and asks more: three rounds, every key apart,
// every answer where it belongs, and the upstream's tool runs once.
func TestRelayedRoundUpstreamConfirms(t *testing.T) {
	var ran atomic.Int32
	up := mcphandler.New(mcphandler.Config{
		Authenticate: func(*http.Request) (mcphandler.Identity, error) { return mcphandler.Identity{Subject: "gw"}, nil },
		ListTools: func(context.Context) ([]mcphandler.Tool, error) {
			return []mcphandler.Tool{{Name: "purge", Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
				res, err := call.Elicit(ctx, mcphandler.ElicitRequest{Message: "Sure?",
					Schema: elicitation.NewSchema().Boolean("sure", elicitation.Required())})
				if err != nil {
					return nil, err
				}
				ran.Add(1)
				return mcphandler.TextResult("purged, sure=" + string(res.Action)), nil
			}}}, nil
		},
		BeforeCall: func(ctx context.Context, call *mcphandler.ToolCall) (mcphandler.Decision, error) {
			return mcphandler.Confirm("Upstream: purge for real?"), nil
		},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	srv := httptest.NewServer(up)
	t.Cleanup(func() { srv.Close(); up.Close() })
	gh := newGateway(t, gateway.Config{Upstreams: func(ctx context.Context, id mcphandler.Identity) ([]gateway.Upstream, error) {
		return []gateway.Upstream{{ID: "docs", URL: srv.URL, Era: gateway.EraStateless}}, nil
	}})
	keys := &keyLog{}
	c := mcptest.NewModern(t, keys.serve(gh.h), mcptest.WithToken("acme-admin"), mcptest.WithElicitationHandler(keys.wrap(byForm)))
	res, err := c.CallTool(context.Background(), "docs_purge", nil)
	if err != nil || res.IsError || resultText(res) != "purged, sure=accept" {
		t.Fatalf("%+v %v", res, err)
	}
	want := [][]string{{"mcphandler/confirm"}, {"upstream/1/mcphandler/confirm"}, {"upstream/2/elicit-1"}}
	if got := keys.rounds(); !equalRounds(got, want) {
		t.Fatalf("keys %q, want %q", got, want)
	}
	if q := keys.messages(); !slices.Equal(q, []string{"Forward docs_purge?", "Upstream: purge for real?", "Sure?"}) {
		t.Fatalf("asked %q", q)
	}
	if ran.Load() != 1 {
		t.Fatalf("ran %d times", ran.Load())
	}
}

// What an attacker does with a relayed round's requestState: flip a byte,
// move it to another tool, another person, another upstream (another URL
// for the same id, another id under the same name), retry it after the
// call completed, retry it concurrently, or after it expired. Each is
// refused, and nothing reaches an upstream but the one retry that runs.
func TestAttackRelayedRound(t *testing.T) {
	docs := newUpstream(t, upstreamTool{name: "search", readOnly: true, ask: true}, upstreamTool{name: "find", readOnly: true, ask: true})
	other := newUpstream(t, upstreamTool{name: "search", readOnly: true, ask: true})
	var ups atomic.Pointer[[]gateway.Upstream]
	set := func(u ...gateway.Upstream) { ups.Store(&u) }
	home := gateway.Upstream{ID: "docs", URL: docs.srv.URL, Era: gateway.EraStateless}
	set(home)
	gh := newGateway(t, gateway.Config{ListTTL: -1, Upstreams: func(ctx context.Context, id mcphandler.Identity) ([]gateway.Upstream, error) {
		return *ups.Load(), nil
	}}, func(c *mcphandler.Config) { c.ConfirmTimeout = 2 * time.Second })
	ask := mcptest.WithElicitationHandler((&answerer{}).handler())
	admin := mcptest.NewModern(t, gh.h, mcptest.WithToken("acme-admin"), ask)
	calls := func() int { return docs.sawMethod("tools/call") + other.sawMethod("tools/call") }
	args := map[string]any{"q": "x"}

	refused := func(name string, c *mcptest.Client, tool string, state json.RawMessage, want int) {
		t.Helper()
		before := calls()
		m, _, err := c.CallOnce(context.Background(), "tools/call", answered(tool, args, "upstream/1/elicit-1", state))
		switch want {
		case -32602:
			var he *mcptest.HTTPError
			if !errors.As(err, &he) || he.RPCError() == nil || he.RPCError().Code != -32602 {
				t.Errorf("%s: %v %+v", name, err, m)
			}
		default: // a tool error, recorded
			if err != nil || m.Error != nil || !strings.Contains(string(m.Result), `"isError":true`) {
				t.Errorf("%s: %v %+v", name, err, m)
			}
		}
		if n := calls(); n != before {
			t.Errorf("%s: %d calls reached an upstream", name, n-before)
		}
	}

	state := firstRound(t, admin, "docs_search", args)
	flipped := bytes.Clone(state)
	flipped[len(flipped)/2] ^= 1
	refused("flipped", admin, "docs_search", flipped, -32602)
	refused("another tool", admin, "docs_find", state, -32602)
	refused("another person", mcptest.NewModern(t, gh.h, mcptest.WithToken("acme-viewer"), ask), "docs_search", state, -32602)
	refused("another tenant", mcptest.NewModern(t, gh.h, mcptest.WithToken("globex-editor"), ask), "docs_search", state, -32602)

	// The same id and name, at another URL: the round is bound to the URL.
	set(gateway.Upstream{ID: "docs", URL: other.srv.URL, Era: gateway.EraStateless})
	refused("another URL", admin, "docs_search", state, 0)
	// Another upstream served under the same name.
	set(gateway.Upstream{ID: "wiki", URL: other.srv.URL, Era: gateway.EraStateless, Aliases: map[string]string{"search": "docs_search"}})
	state = firstRound(t, admin, "docs_search", args) // from other now
	set(home)
	refused("another upstream id", admin, "docs_search", state, 0)

	// The real retry runs once, however many come at once; after it, the
	// same state runs nothing.
	state = firstRound(t, admin, "docs_search", args)
	before, ran := calls(), docs.count("search")
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			admin.CallOnce(context.Background(), "tools/call", answered("docs_search", args, "upstream/1/elicit-1", state))
		})
	}
	wg.Wait()
	if n, r := calls()-before, docs.count("search")-ran; n != 1 || r != 1 {
		t.Fatalf("3 concurrent retries: %d calls upstream, the tool completed %d times", n, r)
	}
	m, _, err := admin.CallOnce(context.Background(), "tools/call", answered("docs_search", args, "upstream/1/elicit-1", state))
	if err != nil || !strings.Contains(string(m.Result), `search ran for  args={\"q\":\"x\"} answer=accept`) {
		t.Fatalf("a replay after the end is not the recorded result: %v %+v", err, m)
	}
	if n := calls() - before; n != 1 {
		t.Fatalf("the replay reached the upstream")
	}

	// Expired: past ConfirmTimeout (2 s here) the state opens no more.
	state = firstRound(t, admin, "docs_search", args)
	time.Sleep(2100 * time.Millisecond)
	refused("expired", admin, "docs_search", state, -32602)
}

// An upstream that asks round after round is relayed 8 times; the ninth
// round ends the call, and its tool never completes. Eight rounds finish.
func TestRelayedRoundsBounded(t *testing.T) {
	for _, asks := range []int{8, 9} {
		t.Run(strconv.Itoa(asks), func(t *testing.T) {
			var ran atomic.Int32
			up := mcphandler.New(mcphandler.Config{
				Authenticate: func(*http.Request) (mcphandler.Identity, error) { return mcphandler.Identity{Subject: "gw"}, nil },
				ListTools: func(context.Context) ([]mcphandler.Tool, error) {
					return []mcphandler.Tool{{Name: "quiz", Annotations: &mcphandler.ToolAnnotations{ReadOnlyHint: true},
						Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
							for i := range asks {
								if _, err := call.Elicit(ctx, mcphandler.ElicitRequest{Key: "q" + strconv.Itoa(i), Message: "Sure?",
									Schema: elicitation.NewSchema().Boolean("sure", elicitation.Required())}); err != nil {
									return nil, err
								}
							}
							ran.Add(1)
							return mcphandler.TextResult("all answered"), nil
						}}}, nil
				},
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			})
			srv := httptest.NewServer(up)
			t.Cleanup(func() { srv.Close(); up.Close() })
			gh := newGateway(t, gateway.Config{Upstreams: func(ctx context.Context, id mcphandler.Identity) ([]gateway.Upstream, error) {
				return []gateway.Upstream{{ID: "up", URL: srv.URL, Era: gateway.EraStateless}}, nil
			}})
			a := &answerer{}
			c := mcptest.NewModern(t, gh.h, mcptest.WithToken("acme-admin"), mcptest.WithElicitationHandler(a.handler()), mcptest.WithMaxRounds(20))
			res, err := c.CallTool(context.Background(), "up_quiz", nil)
			if err != nil {
				t.Fatal(err)
			}
			if asks == 8 {
				if res.IsError || resultText(res) != "all answered" || ran.Load() != 1 || len(a.questions()) != 8 {
					t.Fatalf("%+v: ran %d, asked %d", res, ran.Load(), len(a.questions()))
				}
				return
			}
			if !res.IsError || !strings.Contains(resultText(res), "more than 8 times") || ran.Load() != 0 || len(a.questions()) != 8 {
				t.Fatalf("%+v: ran %d, asked %d", res, ran.Load(), len(a.questions()))
			}
		})
	}
}

// An upstream's requestState of up to 48 KiB is relayed and echoed byte
// for byte, escapes and all; a larger one ends the call, nothing asked.
func TestRelayedStateBounded(t *testing.T) {
	const bound = 48 << 10
	for _, size := range []int{bound, bound + 1} {
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			// A JSON string of size bytes, with escapes a re-encoding would change.
			state := `"\u0041\/` + strings.Repeat("s", size-len(`"\u0041\/`)-1) + `"`
			up := newStateUpstream(t, state)
			gh := newGateway(t, gateway.Config{Upstreams: func(ctx context.Context, id mcphandler.Identity) ([]gateway.Upstream, error) {
				return []gateway.Upstream{{ID: "up", URL: up.srv.URL, Era: gateway.EraStateless}}, nil
			}})
			a := &answerer{}
			c := mcptest.NewModern(t, gh.h, mcptest.WithToken("acme-admin"), mcptest.WithElicitationHandler(a.handler()))
			res, err := c.CallTool(context.Background(), "up_big", nil)
			if err != nil {
				t.Fatal(err)
			}
			if size == bound {
				if res.IsError || resultText(res) != "echoed" || len(a.questions()) != 1 {
					t.Fatalf("%+v, asked %q", res, a.questions())
				}
				return
			}
			if !res.IsError || !strings.Contains(resultText(res), "requestState over 49152 bytes") || len(a.questions()) != 0 || up.calls.Load() != 1 {
				t.Fatalf("%+v, asked %q, %d calls", res, a.questions(), up.calls.Load())
			}
		})
	}
}

// stateUpstream is a 2026-07-28 upstream written by hand: its tool "big"
// asks one question with the requestState it was given, and completes
// when the retry echoes that state byte for byte.
type stateUpstream struct {
	srv   *httptest.Server
	calls atomic.Int32
}

func newStateUpstream(t *testing.T, state string) *stateUpstream {
	u := &stateUpstream{}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m struct {
			ID     json.RawMessage
			Method string
			Params struct {
				RequestState   json.RawMessage
				InputResponses map[string]json.RawMessage
			}
		}
		body, _ := io.ReadAll(r.Body)
		if json.Unmarshal(body, &m) != nil {
			http.Error(w, "bad", http.StatusBadRequest)
			return
		}
		result := `{"resultType":"complete","tools":[{"name":"big","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}]}`
		if m.Method == "tools/call" {
			u.calls.Add(1)
			switch {
			case m.Params.RequestState == nil:
				result = `{"resultType":"input_required","requestState":` + state +
					`,"inputRequests":{"q":{"method":"elicitation/create","params":{"mode":"form","message":"Sure?","requestedSchema":{"type":"object","properties":{"sure":{"type":"boolean"}}}}}}}`
			case string(m.Params.RequestState) == state && len(m.Params.InputResponses["q"]) > 0:
				result = `{"resultType":"complete","content":[{"type":"text","text":"echoed"}]}`
			default:
				result = `{"resultType":"complete","isError":true,"content":[{"type":"text","text":"state changed on the way"}]}`
			}
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":`+result+`}`)
	}))
	t.Cleanup(u.srv.Close)
	return u
}

// firstRound sends a call without answering it and returns the requestState
// of the round it gets, which must ask the upstream's question.
func firstRound(t *testing.T, c *mcptest.Client, tool string, args any) json.RawMessage {
	t.Helper()
	m, _, err := c.CallOnce(context.Background(), "tools/call", map[string]any{"name": tool, "arguments": args})
	if err != nil || m.Error != nil {
		t.Fatalf("%v %+v", err, m)
	}
	ir, err := mcptest.ParseInputRequired(m.Result)
	if err != nil || len(ir.InputRequests) != 1 || ir.InputRequests["upstream/1/elicit-1"].Method != "elicitation/create" {
		t.Fatalf("%v %s", err, m.Result)
	}
	return ir.RawRequestState
}

// answered is the params of a retry answering key with an accepted
// {"sure":true} and carrying state.
func answered(tool string, args any, key string, state json.RawMessage) map[string]any {
	return map[string]any{"name": tool, "arguments": args, "requestState": state,
		"inputResponses": map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{"sure": true}}}}
}

// byForm accepts every elicitation, filling its form: confirm for a
// confirm's, sure otherwise.
func byForm(ctx context.Context, p mcptest.ElicitParams) (mcptest.ElicitResult, error) {
	if strings.Contains(string(p.RequestedSchema), `"confirm"`) {
		return mcptest.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
	}
	return mcptest.ElicitResult{Action: "accept", Content: map[string]any{"sure": true}}, nil
}

// keyLog records, in front of a handler, the input keys of each
// input_required answer it gives, and the messages a client's elicitation
// handler is asked.
type keyLog struct {
	mu   sync.Mutex
	msgs []string
	keys [][]string
}

// serve wraps h: each answer is read as it goes to the client.
func (k *keyLog) serve(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		if i := strings.LastIndex(string(body), "data: "); strings.HasPrefix(rec.Header().Get("Content-Type"), "text/event-stream") && i >= 0 {
			body = []byte(strings.TrimSpace(string(body[i+len("data: "):])))
		}
		var m struct {
			Result struct {
				ResultType    string
				InputRequests map[string]json.RawMessage
			}
		}
		if json.Unmarshal(body, &m) == nil && m.Result.ResultType == "input_required" {
			keys := make([]string, 0, len(m.Result.InputRequests))
			for key := range m.Result.InputRequests {
				keys = append(keys, key)
			}
			slices.Sort(keys)
			k.mu.Lock()
			k.keys = append(k.keys, keys)
			k.mu.Unlock()
		}
		for name, vs := range rec.Header() {
			w.Header()[name] = vs
		}
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
	})
}

func (k *keyLog) wrap(h mcptest.ElicitationHandler) mcptest.ElicitationHandler {
	return func(ctx context.Context, p mcptest.ElicitParams) (mcptest.ElicitResult, error) {
		k.mu.Lock()
		k.msgs = append(k.msgs, p.Message)
		k.mu.Unlock()
		return h(ctx, p)
	}
}

func (k *keyLog) messages() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.msgs...)
}

func (k *keyLog) rounds() [][]string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.keys
}

func equalRounds(a, b [][]string) bool {
	return slices.EqualFunc(a, b, func(x, y []string) bool { return slices.Equal(x, y) })
}
