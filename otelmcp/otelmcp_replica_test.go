package otelmcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/mcptest"
	"github.com/mcphandler/mcphandler/session/redisstore"
	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// replica is one handler of a pair sharing a real Redis, with its own
// telemetry and log.
type replica struct {
	o   *obs
	srv *httptest.Server
	log *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// lines returns the JSON log lines whose msg is msg.
func (s *syncBuffer) lines(t *testing.T, msg string) []map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, l := range bytes.Split(s.b.Bytes(), []byte("\n")) {
		var m map[string]any
		if len(l) > 0 && json.Unmarshal(l, &m) == nil && m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

func newReplicas(t *testing.T) (a, b *replica) {
	t.Helper()
	prefix := redistest.Prefix(t, redistest.Client(t))
	mk := func() *replica {
		r := &replica{o: newObs(t), log: &syncBuffer{}}
		cfg := r.o.config()
		st := redisstore.New(redistest.Client(t), redisstore.Options{Prefix: prefix})
		t.Cleanup(func() { st.Close() })
		cfg.Store = st
		cfg.StateKeys = [][]byte{[]byte("0123456789abcdef0123456789abcdef")}
		cfg.Logger = slog.New(slog.NewJSONHandler(r.log, nil))
		h := mcphandler.New(cfg)
		r.srv = httptest.NewServer(h)
		t.Cleanup(func() { r.srv.Close(); h.Close() })
		return r
	}
	return mk(), mk()
}

// splitProxy sends the tools/call POSTs that pick returns true for to a,
// every other request to b.
func splitProxy(t *testing.T, a, b *replica, pick func(n int) bool) *httptest.Server {
	t.Helper()
	ua, _ := url.Parse(a.srv.URL)
	ub, _ := url.Parse(b.srv.URL)
	var calls atomic.Int64
	rp := &httputil.ReverseProxy{FlushInterval: -1, Rewrite: func(pr *httputil.ProxyRequest) {
		body, _ := io.ReadAll(pr.In.Body)
		pr.Out.Body = io.NopCloser(bytes.NewReader(body))
		target := ub
		if strings.Contains(string(body), `"method":"tools/call"`) && pick(int(calls.Add(1))) {
			target = ua
		}
		pr.SetURL(target)
		pr.Out.Host = pr.In.Host
	}}
	p := httptest.NewServer(rp)
	t.Cleanup(p.Close)
	return p
}

func accept(context.Context, mcptest.ElicitParams) (mcptest.ElicitResult, error) {
	return mcptest.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
}

// On a 2025 session, the confirm is asked on A and answered through B;
// A, which waits, runs the tool. Both replicas' spans carry the confirm
// id, which joins them.
func TestConfirmChainAcrossReplicasSessions(t *testing.T) {
	a, b := newReplicas(t)
	proxy := splitProxy(t, a, b, func(int) bool { return true })
	c := mcptest.Dial(proxy.URL, mcptest.WithToken("acme-alice"), mcptest.WithElicitationHandler(accept))
	defer c.Close()
	ctx := context.Background()
	if _, err := c.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := c.CallTool(ctx, "delete_thing", nil)
	if err != nil || res.IsError {
		t.Fatalf("call: %+v %v", res, err)
	}
	asker := a.o.span(t, "tools/call delete_thing")
	asked := events(asker, "mcphandler.confirm.asked")
	if len(asked) != 1 || !strings.HasPrefix(asked[0], "mcphc-") {
		t.Fatalf("asked events %v", asked)
	}
	id := asked[0]
	if ran := events(asker, "mcphandler.confirm.ran"); len(ran) != 1 || ran[0] != id {
		t.Errorf("ran events on A %v, want [%s]", ran, id)
	}
	wantAttrs(t, asker, map[string]string{"mcphandler.confirm.id": id, "mcphandler.outcome": "confirmed", "mcp.session.id": c.SessionID()})
	if work := a.o.span(t, "delete work"); work.Parent().SpanID() != asker.SpanContext().SpanID() {
		t.Errorf("the tool's span is not a child of the call's")
	}
	answer := b.o.span(t, "elicitation/create")
	if got := events(answer, "mcphandler.confirm.answered"); len(got) != 1 || got[0] != id {
		t.Errorf("answered events on B %v, want [%s]", got, id)
	}
	wantAttrs(t, answer, map[string]string{"mcphandler.confirm.id": id, "mcp.session.id": c.SessionID(), "error.type": ""})
	if len(a.o.spans("elicitation/create")) != 0 || len(b.o.spans("tools/call delete_thing")) != 0 {
		t.Fatal("the proxy did not split the confirm across the replicas")
	}
	// A replayed answer, on B: refused, and its span says so.
	raw, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "result": map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}})
	if resp, err := c.Post(ctx, raw, nil); err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("replayed answer: %v %v", resp, err)
	}
	eventually(t, "the replay's span", func() bool { return len(b.o.spans("elicitation/create")) == 2 })
	replay := b.o.spans("elicitation/create")[1]
	wantAttrs(t, replay, map[string]string{"mcphandler.confirm.id": id, "error.type": "-32600"})
	if got := events(replay, "mcphandler.confirm.answered"); len(got) != 0 {
		t.Errorf("a refused answer reported as answered: %v", got)
	}
}

// On 2026-07-28 the first round (asked) is served by A, the retry that
// carries the answer (answered, ran) by B.
func TestConfirmChainAcrossReplicasStateless(t *testing.T) {
	a, b := newReplicas(t)
	proxy := splitProxy(t, a, b, func(n int) bool { return n == 1 })
	c := mcptest.DialModern(proxy.URL, mcptest.WithToken("acme-alice"), mcptest.WithElicitationHandler(accept))
	defer c.Close()
	res, err := c.CallTool(context.Background(), "delete_thing", nil)
	if err != nil || res.IsError {
		t.Fatalf("call: %+v %v", res, err)
	}
	first := a.o.span(t, "tools/call delete_thing")
	asked := events(first, "mcphandler.confirm.asked")
	if len(asked) != 1 {
		t.Fatalf("asked events on A %v", asked)
	}
	id := asked[0]
	wantAttrs(t, first, map[string]string{"mcphandler.outcome": "input_required", "mcphandler.confirm.id": id})
	retry := b.o.span(t, "tools/call delete_thing")
	if got := events(retry, "mcphandler.confirm.answered"); len(got) != 1 || got[0] != id {
		t.Errorf("answered on B %v, want [%s]", got, id)
	}
	if got := events(retry, "mcphandler.confirm.ran"); len(got) != 1 || got[0] != id {
		t.Errorf("ran on B %v, want [%s]", got, id)
	}
	wantAttrs(t, retry, map[string]string{"mcphandler.outcome": "confirmed", "mcphandler.confirm.id": id})
	if work := b.o.span(t, "delete work"); work.Parent().SpanID() != retry.SpanContext().SpanID() {
		t.Errorf("the tool's span is not a child of the retry's")
	}
}

// The handler's own log lines about a request carry its trace, session and
// confirm ids.
func TestLogLinesCarryIDs(t *testing.T) {
	for _, era := range []mcptest.Era{mcptest.Sessions, mcptest.Stateless} {
		t.Run(era.String(), func(t *testing.T) {
			a, _ := newReplicas(t)
			c := mcptest.Dial(a.srv.URL, mcptest.WithEra(era), mcptest.WithToken("acme-alice"), mcptest.WithElicitationHandler(accept))
			defer c.Close()
			ctx := context.Background()
			if era == mcptest.Sessions {
				if _, err := c.Initialize(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if res, err := c.CallTool(ctx, "broken", nil); err != nil || !res.IsError {
				t.Fatalf("broken: %+v %v", res, err)
			}
			// The span of the call that ran the tool (on 2026-07-28, the
			// retry).
			var last sdktrace.ReadOnlySpan
			eventually(t, "the span of the call that ran", func() bool {
				for _, s := range a.o.spans("tools/call broken") {
					if attrs(s)["mcphandler.outcome"] == "confirmed" {
						last = s
					}
				}
				return last != nil
			})
			lines := a.log.lines(t, "mcphandler: tool failed")
			if len(lines) != 1 {
				t.Fatalf("%d tool failed lines", len(lines))
			}
			l := lines[0]
			if l["trace_id"] != last.SpanContext().TraceID().String() || l["span_id"] != last.SpanContext().SpanID().String() {
				t.Errorf("line %v, want trace %s span %s", l, last.SpanContext().TraceID(), last.SpanContext().SpanID())
			}
			if id := attrs(last)["mcphandler.confirm.id"]; id == "" || l["confirm_id"] != id {
				t.Errorf("line %v, want confirm_id %q", l, id)
			}
			if sid := c.SessionID(); l["session_id"] != nil && l["session_id"] != sid || sid != "" && l["session_id"] != sid {
				t.Errorf("line %v, want session_id %q", l, sid)
			}
			if !strings.Contains(l["err"].(string), "disk on fire") {
				t.Errorf("line %v", l)
			}
		})
	}
}

// A session initialized on A and ended by a DELETE on B: B records its
// duration, from the creation time the session's record holds; A records
// none. A DELETE by another identity on B ends nothing and records nothing.
func TestSessionDurationAcrossReplicas(t *testing.T) {
	a, b := newReplicas(t)
	ctx := context.Background()
	c := mcptest.Dial(a.srv.URL, mcptest.WithToken("acme-alice"))
	defer c.Close()
	if _, err := c.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	forged := mcptest.Dial(b.srv.URL, mcptest.WithToken("acme-mallory"))
	defer forged.Close()
	forged.SetSessionID(c.SessionID())
	forged.SetProtocolVersion(c.ProtocolVersion())
	if err := forged.Delete(ctx); err == nil {
		t.Fatal("deleted another identity's session")
	}
	time.Sleep(60 * time.Millisecond)
	onB := mcptest.Dial(b.srv.URL, mcptest.WithToken("acme-alice"))
	defer onB.Close()
	onB.SetSessionID(c.SessionID())
	onB.SetProtocolVersion(c.ProtocolVersion())
	if err := onB.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	ms := b.o.collect(t)
	if _, ok := ms["mcp.server.session.duration"]; !ok {
		t.Fatal("no session duration on the replica that served the DELETE")
	}
	p := histogram(t, ms, "mcp.server.session.duration")
	if len(p) != 1 || p[0].Count != 1 || p[0].Sum < 0.06 || p[0].Sum > 10 ||
		value(p[0].Attributes, "mcp.protocol.version") != c.ProtocolVersion() {
		t.Fatalf("session duration on B: %+v", p)
	}
	if _, ok := a.o.collect(t)["mcp.server.session.duration"]; ok {
		t.Fatal("a session duration on the replica that did not see the DELETE")
	}
	if _, err := c.CallTool(ctx, "echo", nil); err == nil {
		t.Fatal("the session outlived its DELETE")
	}
}
