package upstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler/gateway/internal/upstream"
)

// callEras are the eras a tools/call is attacked in (Legacy has its own
// stream, attacked in TestLegacyAttacks).
var callEras = []upstream.Era{upstream.Sessions, upstream.Stateless}

// A response body past MaxResponseBytes fails the call without being read
// whole, in every era, and the session still ends.
func TestHugeBody(t *testing.T) {
	for _, era := range callEras {
		t.Run(era.String(), func(t *testing.T) {
			f := newFake(t, func(w http.ResponseWriter, r *http.Request, m rpc) bool {
				if !m.is("tools/call") {
					return false
				}
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"`, m.ID)
				chunk := big("A", 64<<10)
				for i := 0; i < 160 && r.Context().Err() == nil; i++ { // 10 MiB
					fmt.Fprint(w, chunk)
				}
				fmt.Fprint(w, `"}]}}`)
				return true
			})
			ep := f.endpoint(era)
			ep.MaxResponseBytes = 1 << 20
			_, err := upstream.CallTool(context.Background(), ep, nil, "t", nil, nil)
			if !errors.Is(err, upstream.ErrTooLarge) {
				t.Fatalf("err %v", err)
			}
			if era == upstream.Sessions && f.deletes() != 1 {
				t.Error("the session was not deleted")
			}
		})
	}
}

// An SSE stream that never ends, with events or with comments only, fails
// the call when it reaches MaxResponseBytes, and the call is cancelled
// upstream.
func TestEndlessSSE(t *testing.T) {
	for _, kind := range []string{"events", "comments", "one line"} {
		for _, era := range callEras {
			t.Run(kind+"/"+era.String(), func(t *testing.T) {
				f := newFake(t, func(w http.ResponseWriter, r *http.Request, m rpc) bool {
					if !m.is("tools/call") {
						return false
					}
					startSSE(w)
					for r.Context().Err() == nil {
						switch kind {
						case "events":
							event(w, `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"`+big("x", 1000)+`"}}`)
						case "comments":
							fmt.Fprint(w, ":"+big(" ", 1000)+"\n")
						default:
							fmt.Fprint(w, big("d", 1000))
						}
					}
					return true
				})
				ep := f.endpoint(era)
				ep.MaxResponseBytes = 256 << 10
				var err error
				within(t, 5*time.Second, func() {
					_, err = upstream.CallTool(context.Background(), ep, nil, "t", nil, &asker{})
				})
				if !errors.Is(err, upstream.ErrTooLarge) {
					t.Fatalf("err %v", err)
				}
				if era == upstream.Sessions && countOf(f.methods(), "notifications/cancelled") != 1 {
					t.Errorf("posted %v, want a cancel", f.methods())
				}
			})
		}
	}
}

// Each malformed answer fails the call with ErrMalformed, in every era.
func TestMalformedAnswers(t *testing.T) {
	cases := []struct {
		name  string
		write func(w http.ResponseWriter, id json.RawMessage)
	}{
		{"1 MB number", func(w http.ResponseWriter, id json.RawMessage) {
			writeJSON(w, id, `{"content":[],"n":1`+big("0", 1<<20)+`}`)
		}},
		{"deep nesting", func(w http.ResponseWriter, id json.RawMessage) {
			writeJSON(w, id, `{"content":[],"x":`+big("[", 200)+big("]", 200)+`}`)
		}},
		{"repeated key", func(w http.ResponseWriter, id json.RawMessage) {
			writeJSON(w, id, `{"content":[],"content":[{"type":"text","text":"other"}]}`)
		}},
		{"invalid JSON", func(w http.ResponseWriter, id json.RawMessage) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{`, id)
		}},
		{"text/html", func(w http.ResponseWriter, id json.RawMessage) {
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[]}}`, id)
		}},
		{"no Content-Type", func(w http.ResponseWriter, id json.RawMessage) {
			w.Header()["Content-Type"] = nil
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[]}}`, id)
		}},
		{"another id", func(w http.ResponseWriter, id json.RawMessage) {
			writeJSON(w, json.RawMessage(`"not-`+strings.Trim(string(id), `"`)+`"`), `{"content":[]}`)
		}},
		{"another id on SSE", func(w http.ResponseWriter, id json.RawMessage) {
			startSSE(w)
			event(w, `{"jsonrpc":"2.0","id":999,"result":{"content":[]}}`)
		}},
		{"result not an object", func(w http.ResponseWriter, id json.RawMessage) {
			writeJSON(w, id, `[1,2]`)
		}},
		{"not JSON-RPC", func(w http.ResponseWriter, id json.RawMessage) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"hello":"world"}`)
		}},
		{"SSE ends before the response", func(w http.ResponseWriter, id json.RawMessage) {
			startSSE(w)
			event(w, `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}`)
		}},
		{"202 for a request", func(w http.ResponseWriter, id json.RawMessage) {
			w.WriteHeader(http.StatusAccepted)
		}},
		{"unknown resultType", func(w http.ResponseWriter, id json.RawMessage) {
			writeJSON(w, id, `{"resultType":"task","taskId":"t1","status":"working"}`)
		}},
	}
	for _, c := range cases {
		for _, era := range callEras {
			if c.name == "unknown resultType" && era != upstream.Stateless {
				continue // a 2025 result's resultType means nothing
			}
			t.Run(c.name+"/"+era.String(), func(t *testing.T) {
				f := newFake(t, func(w http.ResponseWriter, r *http.Request, m rpc) bool {
					if !m.is("tools/call") {
						return false
					}
					c.write(w, m.ID)
					return true
				})
				_, err := upstream.CallTool(context.Background(), f.endpoint(era), nil, "t", nil, nil)
				if !errors.Is(err, upstream.ErrMalformed) {
					t.Fatalf("err %v", err)
				}
				if len(err.Error()) > 600 {
					t.Errorf("error of %d bytes", len(err.Error()))
				}
			})
		}
	}
}

// An upstream that asks more than 64 questions in one call fails it after
// the 64th; the call is cancelled upstream and the session ended.
func TestTooManyQuestions(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, m rpc) bool {
		if !m.is("tools/call") {
			return false
		}
		startSSE(w)
		for i := range 100 {
			event(w, fmt.Sprintf(`{"jsonrpc":"2.0","id":"q%d","method":"elicitation/create","params":{"message":"?","requestedSchema":{"type":"object","properties":{}}}}`, i))
		}
		<-r.Context().Done()
		return true
	})
	a := &asker{}
	_, err := upstream.CallTool(context.Background(), f.endpoint(upstream.Sessions), allCaps, "t", nil, a)
	if !errors.Is(err, upstream.ErrTooMany) {
		t.Fatalf("err %v", err)
	}
	if n := len(a.askedMethods()); n != 64 {
		t.Errorf("asked %d times", n)
	}
	ms := f.methods()
	if countOf(ms, "") != 64 || countOf(ms, "notifications/cancelled") != 1 || f.deletes() != 1 {
		t.Errorf("posted %d responses, %d cancels, %d deletes", countOf(ms, ""), countOf(ms, "notifications/cancelled"), f.deletes())
	}
}

// A question the client did not declare never reaches the Asker: refused
// with -32601 in a session, a broken call on Stateless (which has no
// error answer).
func TestUndeclaredQuestion(t *testing.T) {
	const ask = `{"method":"sampling/createMessage","params":{"messages":[],"maxTokens":1}}`
	t.Run("sessions", func(t *testing.T) {
		f := newFake(t, func(w http.ResponseWriter, r *http.Request, m rpc) bool {
			switch {
			case m.is("tools/call"):
				startSSE(w)
				event(w, `{"jsonrpc":"2.0","id":"q1",`+ask[1:])
				<-r.Context().Done()
				return true
			case m.Method == "" && len(m.Error) > 0: // the refusal
				w.WriteHeader(http.StatusAccepted)
				if !strings.Contains(string(m.Error), "-32601") {
					t.Errorf("answered %s", m.Error)
				}
				return true
			}
			return false
		})
		a := &asker{}
		ep := f.endpoint(upstream.Sessions)
		ep.Timeout = 500 * time.Millisecond
		_, err := upstream.CallTool(context.Background(), ep, json.RawMessage(`{"elicitation":{}}`), "t", nil, a)
		if !errors.Is(err, context.DeadlineExceeded) || len(a.askedMethods()) != 0 {
			t.Errorf("err %v, asked %v", err, a.askedMethods())
		}
	})
	t.Run("stateless", func(t *testing.T) {
		f := newFake(t, func(w http.ResponseWriter, r *http.Request, m rpc) bool {
			writeJSON(w, m.ID, `{"resultType":"input_required","inputRequests":{"s":`+ask+`},"requestState":"x"}`)
			return true
		})
		a := &asker{}
		_, err := upstream.CallTool(context.Background(), f.endpoint(upstream.Stateless), json.RawMessage(`{"elicitation":{}}`), "t", nil, a)
		if !errors.Is(err, upstream.ErrMalformed) || len(a.askedMethods()) != 0 {
			t.Errorf("err %v, asked %v", err, a.askedMethods())
		}
	})
}

// A 2026-07-28 upstream that asks round after round is followed for 8
// rounds, each retry echoing the state, and then refused.
func TestInputRequiredLoop(t *testing.T) {
	var calls atomic.Int32
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, m rpc) bool {
		n := calls.Add(1)
		var p struct {
			RequestState   string
			InputResponses map[string]json.RawMessage
		}
		_ = json.Unmarshal(m.Params, &p)
		if n > 1 && (p.RequestState != fmt.Sprintf("state-%d", n-1) || len(p.InputResponses["c"]) == 0) {
			t.Errorf("retry %d: %s", n, m.Params)
		}
		writeJSON(w, m.ID, fmt.Sprintf(`{"resultType":"input_required","requestState":"state-%d",`+
			`"inputRequests":{"c":{"method":"elicitation/create","params":{"message":"again?","requestedSchema":{"type":"object","properties":{}}}}}}`, n))
		return true
	})
	a := &asker{}
	_, err := upstream.CallTool(context.Background(), f.endpoint(upstream.Stateless), allCaps, "t", nil, a)
	if !errors.Is(err, upstream.ErrTooMany) {
		t.Fatalf("err %v", err)
	}
	if len(a.askedMethods()) != 8 || calls.Load() != 9 {
		t.Errorf("asked %d times over %d calls", len(a.askedMethods()), calls.Load())
	}
}

// A slowloris upstream (the header never comes, or the body trickles)
// fails the operation at its Timeout.
func TestSlowloris(t *testing.T) {
	for _, kind := range []string{"header", "body", "sse"} {
		for _, era := range append(callEras, upstream.Legacy, upstream.Probe) {
			t.Run(kind+"/"+era.String(), func(t *testing.T) {
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					_, _ = io.Copy(io.Discard, r.Body) // so that the server notices the client leave
					switch kind {
					case "header":
					case "body":
						w.Header().Set("Content-Type", "application/json")
					default:
						w.Header().Set("Content-Type", "text/event-stream")
					}
					if kind != "header" {
						w.WriteHeader(http.StatusOK)
					}
					for end := time.Now().Add(5 * time.Second); r.Context().Err() == nil && time.Now().Before(end); {
						if kind != "header" {
							fmt.Fprint(w, ":")
							w.(http.Flusher).Flush()
						}
						time.Sleep(20 * time.Millisecond)
					}
				}))
				defer srv.Close()
				defer srv.CloseClientConnections()
				ep := upstream.Endpoint{URL: srv.URL, Era: era, Timeout: 300 * time.Millisecond}
				var err error
				start := time.Now()
				within(t, 3*time.Second, func() {
					_, err = upstream.CallTool(context.Background(), ep, nil, "t", nil, nil)
				})
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("err %v", err)
				}
				if d := time.Since(start); d > 2*time.Second {
					t.Errorf("took %v", d)
				}
			})
		}
	}
}

// An upstream's error text is cut to 256 bytes, and big error data is
// dropped.
func TestErrorTextCut(t *testing.T) {
	long := big("é", 10000)
	t.Run("rpc", func(t *testing.T) {
		f := newFake(t, func(w http.ResponseWriter, r *http.Request, m rpc) bool {
			if !m.is("tools/call") {
				return false
			}
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32602,"message":"%s\n\u0000","data":{"x":"%s"}}}`, m.ID, long, long)
			return true
		})
		_, err := upstream.CallTool(context.Background(), f.endpoint(upstream.Sessions), nil, "t", nil, nil)
		var re *upstream.RPCError
		if !errors.As(err, &re) || re.Code != -32602 {
			t.Fatalf("err %v", err)
		}
		if len(re.Message) > 260 || re.Data != nil || strings.ContainsAny(re.Message, "\n\x00") {
			t.Errorf("message of %d bytes, data %d bytes", len(re.Message), len(re.Data))
		}
	})
	t.Run("status", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, long, http.StatusBadGateway)
		}))
		defer srv.Close()
		_, err := upstream.CallTool(context.Background(), upstream.Endpoint{URL: srv.URL, Era: upstream.Stateless}, nil, "t", nil, nil)
		var se *upstream.StatusError
		if !errors.As(err, &se) || se.StatusCode != http.StatusBadGateway || !se.Transient() {
			t.Fatalf("err %v", err)
		}
		if len(err.Error()) > 400 {
			t.Errorf("error of %d bytes", len(err.Error()))
		}
	})
}

// The listed tools are checked one by one: a bad one is skipped, a name
// listed twice skips all its tools, and the rest is kept as sent.
func TestToolShapes(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, m rpc) bool {
		if !m.is("tools/list") {
			return false
		}
		writeJSON(w, m.ID, `{"tools":[
			{"name":"ok","inputSchema":{"type":"object"},"x":[1, 2]},
			"not an object", 42, null, [],
			{"inputSchema":{}},
			{"name":""},
			{"name":"has space"},
			{"name":"`+big("n", 129)+`"},
			{"name":7},
			{"name":"twice","description":"a"},
			{"name":"twice","description":"b"},
			{"name":"fine.name-2_x"}]}`)
		return true
	})
	ts, err := upstream.ListTools(context.Background(), f.endpoint(upstream.Sessions), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 2 || ts[0].Name != "ok" || ts[1].Name != "fine.name-2_x" {
		t.Fatalf("tools %v", ts)
	}
	if string(ts[0].Def) != `{"name":"ok","inputSchema":{"type":"object"},"x":[1, 2]}` {
		t.Errorf("def %s", ts[0].Def)
	}
}

// A list is bounded: a cursor given twice, more than 100 pages or more
// than 10,000 tools fail it rather than return part of it.
func TestListBounds(t *testing.T) {
	cases := []struct {
		name string
		page func(n int) string
		want error
	}{
		{"cursor twice", func(n int) string { return `{"tools":[],"nextCursor":"same"}` }, upstream.ErrMalformed},
		{"pages", func(n int) string { return fmt.Sprintf(`{"tools":[],"nextCursor":"c%d"}`, n) }, upstream.ErrTooMany},
		{"tools", func(n int) string {
			return `{"tools":[` + strings.TrimSuffix(strings.Repeat(`{"name":"a"},`, 2001), ",") + fmt.Sprintf(`],"nextCursor":"c%d"}`, n)
		}, upstream.ErrTooMany},
		{"no tools", func(n int) string { return `{"nextCursor":"x"}` }, upstream.ErrMalformed},
		{"cursor not a string", func(n int) string { return `{"tools":[],"nextCursor":5}` }, upstream.ErrMalformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var pages atomic.Int32
			f := newFake(t, func(w http.ResponseWriter, r *http.Request, m rpc) bool {
				if !m.is("tools/list") {
					return false
				}
				writeJSON(w, m.ID, c.page(int(pages.Add(1))))
				return true
			})
			_, err := upstream.ListTools(context.Background(), f.endpoint(upstream.Stateless), nil)
			if !errors.Is(err, c.want) {
				t.Fatalf("err %v", err)
			}
			if pages.Load() > 100 {
				t.Errorf("%d pages asked", pages.Load())
			}
		})
	}
}

// A 2026-07-28 answer must not carry a server-to-client request.
func TestStatelessRequestOnStream(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, m rpc) bool {
		startSSE(w)
		event(w, `{"jsonrpc":"2.0","id":"q","method":"roots/list"}`)
		event(w, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"content":[]}}`, m.ID))
		return true
	})
	a := &asker{}
	_, err := upstream.CallTool(context.Background(), f.endpoint(upstream.Stateless), allCaps, "t", nil, a)
	if !errors.Is(err, upstream.ErrMalformed) || len(a.askedMethods()) != 0 {
		t.Errorf("err %v, asked %v", err, a.askedMethods())
	}
}

// initialize's answer is checked: an unknown version, or a session id
// that is not visible ASCII, fails the operation; a session the upstream
// made is still ended.
func TestInitializeChecked(t *testing.T) {
	t.Run("version", func(t *testing.T) {
		f := newFake(t, nil)
		f.version = "1999-01-01"
		_, err := upstream.ListTools(context.Background(), f.endpoint(upstream.Sessions), nil)
		if !errors.Is(err, upstream.ErrUnsupported) || f.deletes() != 1 {
			t.Errorf("err %v, %d deletes", err, f.deletes())
		}
	})
	t.Run("session id", func(t *testing.T) {
		f := newFake(t, func(w http.ResponseWriter, r *http.Request, m rpc) bool {
			if !m.is("initialize") {
				return false
			}
			w.Header().Set("Mcp-Session-Id", "a b")
			writeJSON(w, m.ID, `{"protocolVersion":"2025-11-25","capabilities":{}}`)
			return true
		})
		_, err := upstream.ListTools(context.Background(), f.endpoint(upstream.Sessions), nil)
		if !errors.Is(err, upstream.ErrMalformed) {
			t.Errorf("err %v", err)
		}
	})
	t.Run("older revision", func(t *testing.T) {
		f := newFake(t, nil)
		f.version = "2025-06-18"
		if _, err := upstream.CallTool(context.Background(), f.endpoint(upstream.Sessions), nil, "t", nil, nil); err != nil {
			t.Fatal(err)
		}
		for _, m := range f.posted()[1:] {
			if v := m.header.Get("MCP-Protocol-Version"); v != "2025-06-18" {
				t.Errorf("%s with version %q", m.Method, v)
			}
		}
	})
}

// The legacy stream is held to its bounds too: its endpoint must be on its
// own origin (the credentials go there), and it is bounded in size.
func TestLegacyAttacks(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		w.WriteHeader(http.StatusAccepted)
	}))
	defer other.Close()
	cases := []struct {
		name     string
		endpoint string
		after    func(w http.ResponseWriter)
		want     error
	}{
		{"another origin", other.URL + "/messages", nil, upstream.ErrMalformed},
		{"scheme-relative", "//" + strings.TrimPrefix(other.URL, "http://") + "/m", nil, upstream.ErrMalformed},
		{"no endpoint", "", nil, upstream.ErrMalformed},
		{"endless", "/messages", func(w http.ResponseWriter) {
			for range 1000 {
				event(w, `{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"`+big("x", 1000)+`"}}`)
			}
		}, upstream.ErrTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodPost {
					w.WriteHeader(http.StatusAccepted)
					return
				}
				startSSE(w)
				if c.endpoint != "" {
					fmt.Fprintf(w, "event: endpoint\ndata: %s\n\n", c.endpoint)
				} else {
					event(w, `{"jsonrpc":"2.0","method":"notifications/message","params":{}}`)
				}
				w.(http.Flusher).Flush()
				if c.after != nil {
					c.after(w)
				}
				<-r.Context().Done()
			}))
			defer srv.Close()
			defer srv.CloseClientConnections()
			ep := upstream.Endpoint{URL: srv.URL + "/sse", Era: upstream.Legacy, Timeout: 5 * time.Second,
				MaxResponseBytes: 64 << 10, Header: http.Header{"Authorization": {"Bearer s3cret"}}}
			_, err := upstream.CallTool(context.Background(), ep, nil, "t", nil, nil)
			if !errors.Is(err, c.want) {
				t.Errorf("err %v", err)
			}
		})
	}
	if elsewhere.Load() != 0 {
		t.Errorf("another origin got %d requests", elsewhere.Load())
	}
}

// An upstream that breaks its stream off again and again is resumed 16
// times, not more.
func TestResumeLoop(t *testing.T) {
	var gets atomic.Int32
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, m rpc) bool {
		if r.Method == http.MethodGet || m.is("tools/call") {
			if r.Method == http.MethodGet {
				gets.Add(1)
			}
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "retry: 1\nid: e1\ndata: \n\n")
			return true
		}
		return false
	})
	_, err := upstream.CallTool(context.Background(), f.endpoint(upstream.Sessions), nil, "t", nil, nil)
	if !errors.Is(err, upstream.ErrTooMany) || gets.Load() != 16 {
		t.Errorf("err %v after %d resumes", err, gets.Load())
	}
}

// Without an Asker, a 2026-07-28 question ends the call with an error.
func TestStatelessQuestionWithoutAsker(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, m rpc) bool {
		writeJSON(w, m.ID, `{"resultType":"input_required","inputRequests":{"r":{"method":"roots/list"}}}`)
		return true
	})
	_, err := upstream.CallTool(context.Background(), f.endpoint(upstream.Stateless), allCaps, "t", nil, nil)
	if err == nil || !strings.Contains(err.Error(), "no Asker") {
		t.Errorf("err %v", err)
	}
}

// The caller's Header cannot replace the protocol's headers, however it
// spells their names.
func TestHeaderCannotOverrideProtocol(t *testing.T) {
	f := newFake(t, nil)
	ep := f.endpoint(upstream.Sessions)
	ep.Header = http.Header{"mcp-protocol-version": {"1999-01-01"}, "MCP-SESSION-ID": {"forged"}, "X-Api-Key": {"k"}}
	if _, err := upstream.CallTool(context.Background(), ep, nil, "t", nil, nil); err != nil {
		t.Fatal(err)
	}
	for i, m := range f.posted() {
		v, sid := "2025-11-25", "s1"
		if i == 0 {
			v, sid = "", "" // initialize
		}
		if strings.Join(m.header.Values("Mcp-Protocol-Version"), ",") != v || strings.Join(m.header.Values("Mcp-Session-Id"), ",") != sid ||
			m.header.Get("X-Api-Key") != "k" {
			t.Errorf("%s headers %v", m.Method, m.header)
		}
	}
}

// The Headers hook adds to every request of an operation, with the
// operation's context, but cannot replace the protocol's headers either;
// Meta reaches the _meta of every request but the protocol's keys.
func TestHeadersHookAndMeta(t *testing.T) {
	type ctxKey struct{}
	for _, era := range []upstream.Era{upstream.Sessions, upstream.Stateless} {
		t.Run(era.String(), func(t *testing.T) {
			f := newFake(t, nil)
			ep := f.endpoint(era)
			ep.Header = http.Header{"X-Api-Key": {"k"}}
			hooked := 0
			ep.Headers = func(ctx context.Context, h http.Header) {
				hooked++
				if ctx.Value(ctxKey{}) != "op" {
					t.Errorf("the hook got another context")
				}
				if h.Get("X-Api-Key") != "k" {
					t.Errorf("the hook ran before Header was applied: %v", h)
				}
				h.Set("Traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
				h["mcp-session-id"] = []string{"forged"}
				h.Set("Mcp-Method", "forged")
				h.Set("Content-Type", "text/plain")
			}
			ep.Meta = map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
				"progressToken": "forged", "io.modelcontextprotocol/protocolVersion": "forged", "": "x"}
			ctx := context.WithValue(context.Background(), ctxKey{}, "op")
			if _, err := upstream.CallTool(ctx, ep, nil, "t", nil, nil); err != nil {
				t.Fatal(err)
			}
			posted := f.posted()
			if hooked < len(posted) || len(posted) == 0 {
				t.Fatalf("hook ran %d times for %d POSTs", hooked, len(posted))
			}
			for _, m := range posted {
				h := m.header
				if h.Get("Traceparent") == "" || h.Get("X-Api-Key") != "k" || h.Get("Content-Type") != "application/json" ||
					slices.Contains(h.Values("Mcp-Session-Id"), "forged") || slices.Contains(h.Values("Mcp-Method"), "forged") {
					t.Errorf("%s headers %v", m.Method, h)
				}
				if len(m.ID) == 0 {
					continue // a notification or an answer: no _meta of the endpoint's
				}
				var p struct {
					Meta map[string]any `json:"_meta"`
				}
				if err := json.Unmarshal(m.Params, &p); err != nil {
					t.Fatal(err)
				}
				if p.Meta["traceparent"] != ep.Meta["traceparent"] || p.Meta["progressToken"] == "forged" ||
					p.Meta["io.modelcontextprotocol/protocolVersion"] == "forged" || p.Meta[""] != nil {
					t.Errorf("%s _meta %v", m.Method, p.Meta)
				}
			}
		})
	}
}
