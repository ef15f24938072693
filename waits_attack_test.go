package mcphandler_test

// Attacks on waits: a POST whose answer waits for something other than its
// own tool's work — a task's result, a confirm, an approval, a question a
// tool put to the client — must not outlive its caller's token any more
// than a long-lived stream does. The attacker's token is revoked (or
// reissued, or cannot be checked any more, or expires) while the POST
// waits; the wait must end within about one KeepAlive without the result,
// and what it waited for must never reach that connection afterwards.
//
// The rig serves the handler in-process (ServeHTTP with a response that is
// read while it is written), so that every test runs in a synctest bubble:
// KeepAlive, expiries and the instants swept are exact.

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/approval"
	"github.com/mcphandler/mcphandler/elicitation"
	"github.com/mcphandler/mcphandler/mcptest"
	"github.com/mcphandler/mcphandler/session"
)

// liveWriter is a ResponseWriter whose response is read while the handler
// writes it. The header is copied when the status is written, so that the
// test reads what was sent, not the handler's map.
type liveWriter struct {
	hdr    http.Header
	mu     sync.Mutex
	status int
	sent   http.Header
	body   bytes.Buffer
}

func (w *liveWriter) Header() http.Header { return w.hdr }

func (w *liveWriter) WriteHeader(code int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.status == 0 {
		w.status, w.sent = code, w.hdr.Clone()
	}
}

func (w *liveWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.body.Write(b)
}

func (w *liveWriter) Flush() {}

// messages returns the status, the header sent and the JSON-RPC messages
// of the response so far (an SSE stream's events, or a JSON body).
func (w *liveWriter) messages() (int, http.Header, []mcptest.Message) {
	w.mu.Lock()
	status, hdr, b := w.status, w.sent, bytes.Clone(w.body.Bytes())
	w.mu.Unlock()
	var out []mcptest.Message
	if strings.HasPrefix(hdr.Get("Content-Type"), "text/event-stream") {
		r := mcptest.NewSSEReader(bytes.NewReader(b))
		for {
			ev, err := r.Next()
			if err != nil {
				break
			}
			out = append(out, ev.Messages()...)
		}
		return status, hdr, out
	}
	var m mcptest.Message
	if json.Unmarshal(b, &m) == nil {
		out = append(out, m)
	} else {
		json.Unmarshal(b, &out) // a batch's answers
	}
	return status, hdr, out
}

// liveReply is one request being served.
type liveReply struct {
	w      *liveWriter
	cancel context.CancelFunc // the client hangs up
	done   chan struct{}      // ServeHTTP returned
}

// waitRig is a handler whose tokens come from a tokenTable. "acme-viewer"
// is the attacker's token; "acme-viewer-fresh" is another token of the
// same identity that stays valid (its owner, signed in again).
type waitRig struct {
	t         *testing.T
	tt        *tokenTable
	f         *fixture
	h         *mcphandler.Handler
	mux       http.Handler
	approvals *approval.Store
	release   chan struct{} // closed: held tools and tasks finish
	released  sync.Once
	asked     chan error // what the asking tools' questions returned
	replies   []*liveReply
	session   string // the 2025-11-25 session of waitRig.initialize
	endpoint  string // the 2024-11-05 session's, once waitRig.legacy opened it
	// modernRetry is the params of the 2026-07-28 approval's retry.
	modernRetry  string
	taskID       string // the task of waitRig.startTask
	mu           sync.Mutex
	results      map[string]mcphandler.Result // what Config.Interceptors saw, by request id
	batchSession string                       // a 2025-03-26 session, for batches
	// down: the authorization server cannot check the attacker's token;
	// panics: Authenticate panics on it.
	down, panics atomic.Bool
}

const (
	attacker   = "acme-viewer"
	freshToken = "acme-viewer-fresh"
)

// newWaitRig builds the rig with the given KeepAlive; call it inside a
// synctest bubble.
func newWaitRig(t *testing.T, keepAlive time.Duration) *waitRig {
	rig := &waitRig{t: t, tt: newTokenTable(), f: &fixture{}, release: make(chan struct{}), asked: make(chan error, 16)}
	rig.tt.ids[freshToken] = users[attacker]
	cfg := rig.f.config()
	cfg.Authenticate = func(r *http.Request) (mcphandler.Identity, error) {
		if r.Header.Get("Authorization") == "Bearer "+attacker {
			if rig.down.Load() {
				return mcphandler.Identity{}, fmt.Errorf("introspection endpoint down: %w", mcphandler.ErrAuthUnavailable)
			}
			if rig.panics.Load() {
				panic("authorization hook bug")
			}
		}
		return rig.tt.authenticate(r)
	}
	cfg.Sessions.KeepAlive = keepAlive
	cfg.ConfirmTimeout = 10 * time.Minute
	cfg.Store = session.NewMemory()
	cfg.Logger = slog.New(slog.DiscardHandler)
	rig.results = map[string]mcphandler.Result{}
	cfg.Interceptors = []mcphandler.Interceptor{func(ctx context.Context, req *mcphandler.Request, next func(context.Context) mcphandler.Result) mcphandler.Result {
		res := next(ctx)
		rig.mu.Lock()
		rig.results[string(req.ID)] = res
		rig.mu.Unlock()
		return res
	}}
	as, err := approval.New(approval.Config{Store: cfg.Store, Keys: [][]byte{[]byte("0123456789abcdef0123456789abcdef")},
		URL: approvalPage, TTL: 5 * time.Minute, Roles: cfg.Roles, Poll: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	rig.approvals, cfg.Approvals = as, as
	cfg.BeforeCall = func(ctx context.Context, call *mcphandler.ToolCall) (mcphandler.Decision, error) {
		switch call.Tool.Name {
		case "delete_thing":
			return mcphandler.Confirm("Really delete?"), nil
		case "approve_thing":
			return mcphandler.Approve("Approve it?", approval.Policy{}), nil
		}
		return mcphandler.Allow(), nil
	}
	tools := cfg.ListTools
	cfg.ListTools = func(ctx context.Context) ([]mcphandler.Tool, error) {
		ts, err := tools(ctx)
		return append(ts, rig.f.tool("approve_thing", ""), rig.heldTool(), rig.taskTool(), rig.askTool(), rig.rootsTool(), rig.sampleTool(), rig.taskAskTool()), err
	}
	rig.h = mcphandler.New(cfg)
	sse, msgs := rig.h.LegacySSE("/messages")
	mux := http.NewServeMux()
	mux.Handle("/mcp", rig.h)
	mux.Handle("/sse", sse)
	mux.Handle("/messages", msgs)
	rig.mux = mux
	return rig
}

// heldTool is a tool whose own work lasts until the rig releases it.
func (rig *waitRig) heldTool() mcphandler.Tool {
	return mcphandler.Tool{Name: "held", Annotations: &mcphandler.ToolAnnotations{ReadOnlyHint: true},
		Handler: func(context.Context, *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
			<-rig.release
			return mcphandler.TextResult("held result"), nil
		}}
}

// taskTool becomes a 2025-11-25 task whose work lasts until the release.
func (rig *waitRig) taskTool() mcphandler.Tool {
	return mcphandler.Tool{Name: "task", TaskSupport: mcphandler.TaskOptional, Annotations: &mcphandler.ToolAnnotations{ReadOnlyHint: true},
		Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
			return call.RunAsTask(ctx, func(ctx context.Context, _ *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
				select {
				case <-rig.release:
					return mcphandler.TextResult("task result"), nil
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			})
		}}
}

// taskAskTool becomes a task whose work asks the client a question, which
// a tasks/result relays.
func (rig *waitRig) taskAskTool() mcphandler.Tool {
	return mcphandler.Tool{Name: "task_ask", TaskSupport: mcphandler.TaskOptional, Annotations: &mcphandler.ToolAnnotations{ReadOnlyHint: true},
		Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
			return call.RunAsTask(ctx, func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
				if _, err := call.Elicit(ctx, mcphandler.ElicitRequest{Key: "sure", Message: "Sure?", Schema: elicitation.Confirm("confirm", "Sure?")}); err != nil {
					return nil, err
				}
				return mcphandler.TextResult("task_ask result"), nil
			})
		}}
}

// askTool asks the client with Exchange.Elicit.
func (rig *waitRig) askTool() mcphandler.Tool {
	return rig.questionTool("ask", func(ctx context.Context, x *mcphandler.Exchange) error {
		_, err := x.Elicit(ctx, mcphandler.ElicitRequest{Message: "Sure?", Schema: elicitation.Confirm("confirm", "Sure?")})
		return err
	})
}

// rootsTool asks the client with Exchange.ListRoots, sampleTool with
// Exchange.CreateMessage.
func (rig *waitRig) rootsTool() mcphandler.Tool {
	return rig.questionTool("roots", func(ctx context.Context, x *mcphandler.Exchange) error {
		_, err := x.ListRoots(ctx)
		return err
	})
}

func (rig *waitRig) sampleTool() mcphandler.Tool {
	return rig.questionTool("sample", func(ctx context.Context, x *mcphandler.Exchange) error {
		_, err := x.CreateMessage(ctx, map[string]any{"messages": []any{}, "maxTokens": 10})
		return err
	})
}

// questionTool is a tool that asks the client with ask and reports what it
// got; its result is "<name> result".
func (rig *waitRig) questionTool(name string, ask func(context.Context, *mcphandler.Exchange) error) mcphandler.Tool {
	return mcphandler.Tool{Name: name, Annotations: &mcphandler.ToolAnnotations{ReadOnlyHint: true},
		Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
			err := ask(ctx, call.Exchange)
			rig.asked <- err
			if err != nil {
				return nil, err
			}
			return mcphandler.TextResult(name + " result"), nil
		}}
}

func (rig *waitRig) releaseTools() { rig.released.Do(func() { close(rig.release) }) }

// serve starts serving req on a goroutine of its own.
func (rig *waitRig) serve(req *http.Request) *liveReply {
	ctx, cancel := context.WithCancel(context.Background())
	rep := &liveReply{w: &liveWriter{hdr: http.Header{}}, cancel: cancel, done: make(chan struct{})}
	rig.replies = append(rig.replies, rep)
	go func() {
		defer close(rep.done)
		rig.mux.ServeHTTP(rep.w, req.WithContext(ctx))
	}()
	return rep
}

// post2025 POSTs body to the 2025-11-25 session as token.
func (rig *waitRig) post2025(token, body string) *liveReply {
	req := httptest.NewRequest("POST", "/mcp", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", mcphandler.Version20251125)
	if rig.session != "" {
		req.Header.Set("Mcp-Session-Id", rig.session)
	}
	return rig.serve(req)
}

// postModern POSTs a 2026-07-28 tools/call of tool as token.
func (rig *waitRig) postModern(token string, id int, tool, params string) *liveReply {
	caps := `{"elicitation":{"form":{},"url":{}}}`
	req := httptest.NewRequest("POST", "/mcp", strings.NewReader(modernBody(id, "tools/call", `"name":"`+tool+`"`+params, caps)))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", tool)
	return rig.serve(req)
}

// wait is how long the rig lets a bubble run before it looks again.
func (rig *waitRig) settle(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

// await serves a request that answers at once and returns its messages.
func (rig *waitRig) await(rep *liveReply) (int, http.Header, []mcptest.Message) {
	rig.t.Helper()
	synctest.Wait()
	select {
	case <-rep.done:
	default:
		rig.t.Fatal("a request that should answer at once is still served")
	}
	return rep.w.messages()
}

// initialize opens a 2025-11-25 session of the attacker that declared
// form and URL elicitation, roots and sampling.
func (rig *waitRig) initialize() {
	rig.t.Helper()
	_, hdr, msgs := rig.await(rig.post2025(attacker, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",`+
		`"capabilities":{"elicitation":{"form":{},"url":{}},"roots":{},"sampling":{}},"clientInfo":{"name":"t","version":"1"}}}`))
	rig.session = hdr.Get("Mcp-Session-Id")
	if rig.session == "" || len(msgs) != 1 || msgs[0].Result == nil {
		rig.t.Fatalf("initialize: %v", msgs)
	}
	rig.await(rig.post2025(attacker, `{"jsonrpc":"2.0","method":"notifications/initialized"}`))
}

// legacy opens a 2024-11-05 stream with the owner's fresh token (which
// stays valid: only the POSTs carry the attacker's) and initializes its
// session; it returns the stream and the message endpoint.
func (rig *waitRig) legacy() (*liveReply, string) {
	rig.t.Helper()
	req := httptest.NewRequest("GET", "/sse", nil)
	req.Header.Set("Authorization", "Bearer "+freshToken)
	req.Header.Set("Accept", "text/event-stream")
	stream := rig.serve(req)
	synctest.Wait()
	stream.w.mu.Lock()
	ev := stream.w.body.String()
	stream.w.mu.Unlock()
	i := strings.Index(ev, "/messages?")
	if i < 0 {
		rig.t.Fatalf("no endpoint event: %q", ev)
	}
	endpoint, _, _ := strings.Cut(ev[i:], "\n")
	rig.endpoint = endpoint
	rig.await(rig.postLegacy(attacker, endpoint, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05",`+
		`"capabilities":{"elicitation":{},"roots":{}},"clientInfo":{"name":"t","version":"1"}}}`))
	return stream, endpoint
}

func (rig *waitRig) postLegacy(token, endpoint, body string) *liveReply {
	req := httptest.NewRequest("POST", endpoint, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	return rig.serve(req)
}

// serverRequest returns the first request of method the server sent on
// rep (nil if none yet).
func serverRequest(rep *liveReply, method string) *mcptest.Message {
	_, _, msgs := rep.w.messages()
	for i := range msgs {
		if msgs[i].Method == method && msgs[i].IsRequest() {
			return &msgs[i]
		}
	}
	return nil
}

// answer answers the server's request q with result, as the owner's fresh
// token (to the session, or to the legacy endpoint), and returns the reply.
func (rig *waitRig) answer(endpoint string, q *mcptest.Message, result string) *liveReply {
	body := `{"jsonrpc":"2.0","id":` + string(q.ID) + `,"result":` + result + `}`
	if endpoint != "" {
		return rig.postLegacy(freshToken, endpoint, body)
	}
	return rig.post2025(freshToken, body)
}

// closeAll ends what the rig started: the held tools, the waiting
// request (cancelled, then hung up, like every other), the handler.
func (rig *waitRig) closeAll() {
	rig.releaseTools()
	cancel := `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}`
	if rig.endpoint != "" {
		rig.postLegacy(freshToken, rig.endpoint, cancel)
	} else if rig.session != "" {
		rig.post2025(freshToken, cancel)
	}
	synctest.Wait()
	for _, rep := range rig.replies {
		rep.cancel()
	}
	rig.settle(time.Hour) // every wait's own bound has passed
	rig.h.Close()
	// An approvals Store that hears other replicas holds a subscription
	// until it is closed.
	if c, ok := any(rig.approvals).(io.Closer); ok {
		c.Close()
	}
	synctest.Wait()
}

// outcomeOf is the final message for request id on rep, if any.
func finalOf(rep *liveReply, id string) *mcptest.Message {
	_, _, msgs := rep.w.messages()
	for i := range msgs {
		if string(msgs[i].ID) == id && msgs[i].IsResponse() {
			return &msgs[i]
		}
	}
	return nil
}

// waitKind opens one kind of wait for the attacker, on a rig whose session
// (if the kind needs one) is open. It returns the reply the answer arrives
// on, the id of the waiting request, a function that makes what the
// request waits for ready (the task ends, the human answers, the approver
// approves, the client answers), and the text that only the result holds.
type waitKind struct {
	name string
	// ownWork: the request waits for its tool's own work, which the
	// handler does not interrupt: only the result's delivery is checked.
	ownWork bool
	// asks: a tool's question to the client (Exchange) is what waits; it
	// must return an error matching ErrDisconnected when the caller fails.
	asks bool
	open func(rig *waitRig) (rep *liveReply, id string, ready func(), result string)
}

var waitKinds = []waitKind{
	{name: "2025-11-25 tasks/result", open: func(rig *waitRig) (*liveReply, string, func(), string) {
		return rig.post2025(attacker, tasksResult(rig.startTask("task"))), "7", rig.releaseTools, "task result"
	}},
	{name: "2025-11-25 tasks/result relaying the task's question", open: func(rig *waitRig) (*liveReply, string, func(), string) {
		rep, q := rig.ask(tasksResult(rig.startTask("task_ask")), "elicitation/create")
		return rep, "7", func() { rig.answer("", q, toJSONString(acceptConfirm)) }, "task_ask result"
	}},
	{name: "2025 confirm", open: func(rig *waitRig) (*liveReply, string, func(), string) {
		rep, q := rig.ask(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"delete_thing","arguments":{"id":"x"}}}`, "elicitation/create")
		return rep, "7", func() { rig.answer("", q, toJSONString(acceptConfirm)) }, "delete_thing ran for acme"
	}},
	{name: "2025-11-25 URL-mode approval", open: func(rig *waitRig) (*liveReply, string, func(), string) {
		rep, q := rig.ask(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"approve_thing","arguments":{"id":"x"}}}`, "elicitation/create")
		var p struct{ ElicitationID string }
		if json.Unmarshal(q.Params, &p) != nil || p.ElicitationID == "" {
			rig.t.Fatalf("not a URL elicitation: %s", q.Params)
		}
		return rep, "7", rig.approve(p.ElicitationID), "approve_thing ran for acme"
	}},
	{name: "2026-07-28 approval retry", open: func(rig *waitRig) (*liveReply, string, func(), string) {
		_, _, msgs := rig.await(rig.postModern(attacker, 6, "approve_thing", `,"arguments":{"id":"x"}`))
		var res struct {
			ResultType    string `json:"resultType"`
			RequestState  string `json:"requestState"`
			InputRequests map[string]struct {
				Params struct{ URL string } `json:"params"`
			} `json:"inputRequests"`
		}
		if len(msgs) != 1 || json.Unmarshal(msgs[0].Result, &res) != nil || res.ResultType != "input_required" || len(res.InputRequests) != 1 {
			rig.t.Fatalf("round 1: %v", msgs)
		}
		var key, id string
		for k, v := range res.InputRequests {
			key, id = k, strings.TrimPrefix(v.Params.URL, approvalPage)
		}
		rig.modernRetry = `,"arguments":{"id":"x"},"inputResponses":{"` + key + `":{"action":"accept"}},"requestState":"` + res.RequestState + `"`
		return rig.postModern(attacker, 7, "approve_thing", rig.modernRetry), "7", rig.approve(id), "approve_thing ran for acme"
	}},
	{name: "2025 Exchange.Elicit", asks: true, open: func(rig *waitRig) (*liveReply, string, func(), string) {
		return rig.toolAsks("ask", "elicitation/create", toJSONString(acceptConfirm), "ask result")
	}},
	{name: "2025 Exchange.ListRoots", asks: true, open: func(rig *waitRig) (*liveReply, string, func(), string) {
		return rig.toolAsks("roots", "roots/list", `{"roots":[]}`, "roots result")
	}},
	{name: "2025 Exchange.CreateMessage", asks: true, open: func(rig *waitRig) (*liveReply, string, func(), string) {
		return rig.toolAsks("sample", "sampling/createMessage", `{"role":"assistant","content":{"type":"text","text":"hi"},"model":"m"}`, "sample result")
	}},
	{name: "2024-11-05 confirm", open: func(rig *waitRig) (*liveReply, string, func(), string) {
		return rig.legacyAsks("delete_thing", "elicitation/create", toJSONString(acceptConfirm), "delete_thing ran for acme")
	}},
	{name: "2024-11-05 Exchange.Elicit", asks: true, open: func(rig *waitRig) (*liveReply, string, func(), string) {
		return rig.legacyAsks("ask", "elicitation/create", toJSONString(acceptConfirm), "ask result")
	}},
	{name: "2025 tool's own work", ownWork: true, open: func(rig *waitRig) (*liveReply, string, func(), string) {
		return rig.post2025(attacker, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"held"}}`), "7", rig.releaseTools, "held result"
	}},
	{name: "2026-07-28 tool's own work", ownWork: true, open: func(rig *waitRig) (*liveReply, string, func(), string) {
		return rig.postModern(attacker, 7, "held", ""), "7", rig.releaseTools, "held result"
	}},
	{name: "2025-03-26 batch member's own work", ownWork: true, open: func(rig *waitRig) (*liveReply, string, func(), string) {
		post := func(body string) *liveReply {
			req := httptest.NewRequest("POST", "/mcp", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+attacker)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if sid := rig.batchSession; sid != "" {
				req.Header.Set("Mcp-Session-Id", sid)
			}
			return rig.serve(req)
		}
		_, hdr, _ := rig.await(post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
		rig.batchSession = hdr.Get("Mcp-Session-Id")
		return post(`[{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"held"}},{"jsonrpc":"2.0","id":8,"method":"ping"}]`), "7", rig.releaseTools, "held result"
	}},
	{name: "2024-11-05 tool's own work", ownWork: true, open: func(rig *waitRig) (*liveReply, string, func(), string) {
		stream, endpoint := rig.legacy()
		rig.postLegacy(attacker, endpoint, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"held"}}`)
		return stream, "7", rig.releaseTools, "held result"
	}},
}

// startTask calls tool as a 2025-11-25 task and returns its id.
func (rig *waitRig) startTask(tool string) string {
	rig.t.Helper()
	_, _, msgs := rig.await(rig.post2025(attacker, `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"`+tool+`","task":{}}}`))
	var res struct{ Task struct{ TaskID string } }
	if len(msgs) != 1 || json.Unmarshal(msgs[0].Result, &res) != nil || res.Task.TaskID == "" {
		rig.t.Fatalf("task: %v", msgs)
	}
	rig.taskID = res.Task.TaskID
	return res.Task.TaskID
}

// approve returns what approves approval id, as another person of the
// tenant on the page.
func (rig *waitRig) approve(id string) func() {
	return func() {
		if _, err := rig.approvals.Decide(context.Background(), id, bobApproves, true); err != nil {
			rig.t.Errorf("approving: %v", err)
		}
	}
}

// tasksResult is the body of the waiting tasks/result of task id.
func tasksResult(id string) string {
	return `{"jsonrpc":"2.0","id":7,"method":"tasks/result","params":{"taskId":"` + id + `"}}`
}

// ask POSTs body to the session as the attacker and returns its reply
// and the request of method the server sent on it.
func (rig *waitRig) ask(body, method string) (*liveReply, *mcptest.Message) {
	rig.t.Helper()
	rep := rig.post2025(attacker, body)
	synctest.Wait()
	q := serverRequest(rep, method)
	if q == nil {
		rig.t.Fatalf("no %s asked for %s", method, body)
	}
	return rep, q
}

// toolAsks calls tool, which asks the client method on its 2025 stream.
func (rig *waitRig) toolAsks(tool, method, answer, result string) (*liveReply, string, func(), string) {
	rep, q := rig.ask(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"`+tool+`"}}`, method)
	return rep, "7", func() { rig.answer("", q, answer) }, result
}

// legacyAsks calls tool on the 2024-11-05 transport, which asks method on
// the session's stream.
func (rig *waitRig) legacyAsks(tool, method, answer, result string) (*liveReply, string, func(), string) {
	stream, endpoint := rig.legacy()
	rig.postLegacy(attacker, endpoint, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"`+tool+`","arguments":{"id":"x"}}}`)
	synctest.Wait()
	q := serverRequest(stream, method)
	if q == nil {
		rig.t.Fatalf("%s did not ask %s", tool, method)
	}
	return stream, "7", func() { rig.answer(endpoint, q, answer) }, result
}

// tokenChanges are what can happen to the attacker's token mid-wait.
var tokenChanges = []struct {
	name string
	do   func(rig *waitRig)
	code mcphandler.Code // of the error that ends the request
}{
	{"revoked", (*waitRig).revoke, mcphandler.CodeInvalidRequest},
	{"reissued to another user", func(rig *waitRig) {
		rig.tt.set(func(ids map[string]mcphandler.Identity) { ids[attacker] = users["globex-editor"] })
	}, mcphandler.CodeInvalidRequest},
	// Only the attacker's token cannot be checked: the owner's answers
	// still arrive.
	{"authorization server down", func(rig *waitRig) { rig.down.Store(true) }, mcphandler.CodeStoreUnavailable},
	// A check that panics, on a timer's goroutine, must not end the
	// process: it fails as one that could not be made.
	{"Authenticate panics", func(rig *waitRig) { rig.panics.Store(true) }, mcphandler.CodeStoreUnavailable},
}

func (rig *waitRig) revoke() {
	rig.tt.set(func(ids map[string]mcphandler.Identity) { delete(ids, attacker) })
}

// checkEnded fails unless request id on rep ended with the error of a
// caller that failed its check (code), and without the result.
func checkEnded(t *testing.T, rep *liveReply, id string, code mcphandler.Code, result string) {
	t.Helper()
	final := finalOf(rep, id)
	status, hdr, msgs := rep.w.messages()
	for _, m := range msgs {
		if strings.Contains(string(m.Result), result) {
			t.Fatalf("the result reached the attacker: %s", m.Result)
		}
	}
	if final == nil {
		t.Fatalf("the request outlived its caller's check (status %d, %d messages)", status, len(msgs))
	}
	if final.Error == nil || final.Error.Code != code {
		t.Fatalf("final message %+v, want error %d", final, code)
	}
	if !strings.HasPrefix(hdr.Get("Content-Type"), "text/event-stream") && status != http.StatusOK {
		want := map[mcphandler.Code]int{mcphandler.CodeInvalidRequest: 401, mcphandler.CodeStoreUnavailable: 503}[code]
		if status != want || want == 401 && hdr.Get("WWW-Authenticate") == "" {
			t.Fatalf("status %d (WWW-Authenticate %q), want %d", status, hdr.Get("WWW-Authenticate"), want)
		}
	}
}

// endsWithout checks, once the caller failed, that request id on rep
// ended with the failure (code) — for a tool's own work, once the work
// ends — and that what it waited for, made ready now, never reaches it.
func endsWithout(t *testing.T, rig *waitRig, kind waitKind, rep *liveReply, id string, ready func(), code mcphandler.Code, result string) {
	t.Helper()
	if kind.ownWork {
		ready()
		synctest.Wait()
	}
	checkEnded(t, rep, id, code, result)
	ready()
	rig.settle(time.Minute)
	checkEnded(t, rep, id, code, result)
	if kind.asks {
		if err := <-rig.asked; !errors.Is(err, mcphandler.ErrDisconnected) {
			t.Fatalf("the tool's question returned %v, want an error matching ErrDisconnected", err)
		}
	}
	rig.mu.Lock()
	res, ok := rig.results[id]
	rig.mu.Unlock()
	if !ok || res.ErrorCode != code {
		t.Fatalf("the interceptors saw %+v (ended %v), want error %d", res, ok, code)
	}
}

// TestAttackRevokedTokenKeepsWait: the attacker's token changes while
// their POST waits. The wait must end within one KeepAlive (and not
// before the change), with the error of an unauthenticated request; what
// it waited for, made ready afterwards, must never reach the attacker.
func TestAttackRevokedTokenKeepsWait(t *testing.T) {
	const keepAlive = 10 * time.Second
	for _, change := range tokenChanges {
		for _, kind := range waitKinds {
			t.Run(change.name+"/"+kind.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					rig := newWaitRig(t, keepAlive)
					defer rig.closeAll()
					rig.initialize()
					rep, id, ready, result := kind.open(rig)
					rig.settle(3 * keepAlive)
					if finalOf(rep, id) != nil {
						t.Fatalf("the wait of a valid token ended: %+v", finalOf(rep, id))
					}
					change.do(rig)
					rig.settle(keepAlive + time.Second)
					endsWithout(t, rig, kind, rep, id, ready, change.code, result)
				})
			})
		}
	}
}

// TestAttackExpiredTokenKeepsWait: the attacker's token carries an expiry
// (Identity.Expires) that passes while their POST waits; KeepAlive is long,
// so only the expiry can end the wait. It must end at the expiry, not a
// nanosecond before, and what it waited for must never reach the
// attacker.
func TestAttackExpiredTokenKeepsWait(t *testing.T) {
	const lifetime = 40 * time.Second
	for _, kind := range waitKinds {
		t.Run(kind.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rig := newWaitRig(t, 24*time.Hour)
				defer rig.closeAll()
				rig.initialize()
				expires := time.Now().Add(lifetime)
				rig.tt.set(func(ids map[string]mcphandler.Identity) {
					id := ids[attacker]
					id.Expires = expires
					ids[attacker] = id
				})
				rep, id, ready, result := kind.open(rig)
				time.Sleep(time.Until(expires) - time.Nanosecond)
				synctest.Wait()
				if finalOf(rep, id) != nil {
					t.Fatalf("the wait ended before its token expired: %+v", finalOf(rep, id))
				}
				rig.settle(time.Second)
				endsWithout(t, rig, kind, rep, id, ready, mcphandler.CodeInvalidRequest, result)
			})
		})
	}
}

// TestAttackRevocationMeetsResult: the attacker's token is revoked at the
// instant what the POST waits for becomes ready — a nanosecond before,
// at the same instant, and just after the result reached the client —
// with that instant on a KeepAlive tick and between two. Revoked before:
// the client never gets the result (and a confirmed or approved tool
// never runs); at the same instant: exactly one of the result and the
// error; after: the result.
func TestAttackRevocationMeetsResult(t *testing.T) {
	const keepAlive = 10 * time.Second
	for _, at := range []time.Duration{3 * keepAlive, 3*keepAlive + keepAlive/2} {
		for _, when := range []string{"before", "same instant", "after"} {
			for _, kind := range waitKinds {
				t.Run(fmt.Sprint(at, "/", when, "/", kind.name), func(t *testing.T) {
					synctest.Test(t, func(t *testing.T) {
						rig := newWaitRig(t, keepAlive)
						defer rig.closeAll()
						rig.initialize()
						rep, id, ready, result := kind.open(rig)
						runs := rig.f.count("delete_thing") + rig.f.count("approve_thing")
						switch when {
						case "before":
							time.AfterFunc(at-time.Nanosecond, rig.revoke)
							time.AfterFunc(at, ready)
						case "same instant":
							time.AfterFunc(at, rig.revoke)
							time.AfterFunc(at, ready)
						case "after":
							time.AfterFunc(at, ready)
						}
						time.Sleep(at)
						synctest.Wait()
						if when == "after" {
							for range 600 {
								if finalOf(rep, id) != nil {
									break
								}
								rig.settle(100 * time.Millisecond)
							}
							if f := finalOf(rep, id); f == nil || !strings.Contains(string(f.Result), result) {
								t.Fatalf("a valid token's wait did not get its result: %+v", f)
							}
							rig.revoke()
						}
						rig.settle(time.Minute)
						final := finalOf(rep, id)
						gotResult := final != nil && strings.Contains(string(final.Result), result)
						switch {
						case final == nil:
							t.Fatal("the request never ended")
						case when == "before":
							checkEnded(t, rep, id, mcphandler.CodeInvalidRequest, result)
							if n := rig.f.count("delete_thing") + rig.f.count("approve_thing"); n != runs {
								t.Fatalf("a tool confirmed or approved after its caller's revocation ran")
							}
						case when == "after" && !gotResult:
							t.Fatalf("the result went, then the request ended again: %+v", final)
						case !gotResult:
							checkEnded(t, rep, id, mcphandler.CodeInvalidRequest, result)
						}
						t.Logf("result delivered: %v", gotResult)
					})
				})
			}
		}
	}
}

// TestAttackRevokedWaitLeavesTheOwnersWork: what a revoked request waited
// for belongs to its owner (tenant and subject), not to the token. After
// the attacker's wait ended, the owner signed in again (a fresh token of
// the same identity) still gets it: the task's result from tasks/result,
// the approval (left standing, not withdrawn) for a repeated call or a
// retry of the round, which runs once. A confirm ends: OnCall reports it
// revoked, and a late answer is refused and runs nothing.
func TestAttackRevokedWaitLeavesTheOwnersWork(t *testing.T) {
	const keepAlive = 10 * time.Second
	// The owner's call or retry, after the revoked wait and what it
	// waited for.
	ownerRuns := func(tool string, post func(rig *waitRig) *liveReply) func(*testing.T, *waitRig) {
		return func(t *testing.T, rig *waitRig) {
			rep := post(rig)
			rig.settle(5 * time.Second)
			_, _, msgs := rep.w.messages()
			if len(msgs) != 1 || !strings.Contains(string(msgs[0].Result), tool+" ran for acme") || rig.f.count(tool) != 1 {
				t.Fatalf("the owner's call: %v (ran %d)", msgs, rig.f.count(tool))
			}
		}
	}
	for _, tc := range []struct {
		kind     int                        // of waitKinds
		outcomes []mcphandler.Outcome       // reported to OnCall by the attacker's calls
		owner    func(*testing.T, *waitRig) // what the owner then gets
	}{
		{0, nil, func(t *testing.T, rig *waitRig) {
			_, _, msgs := rig.await(rig.post2025(freshToken, `{"jsonrpc":"2.0","id":8,"method":"tasks/result","params":{"taskId":"`+rig.taskID+`"}}`))
			if len(msgs) != 1 || !strings.Contains(string(msgs[0].Result), "task result") {
				t.Fatalf("the owner's tasks/result: %v", msgs)
			}
		}},
		{3, []mcphandler.Outcome{mcphandler.OutcomeRevoked}, ownerRuns("approve_thing", func(rig *waitRig) *liveReply {
			return rig.post2025(freshToken, `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"approve_thing","arguments":{"id":"x"}}}`)
		})},
		{4, []mcphandler.Outcome{mcphandler.OutcomeInputRequired, mcphandler.OutcomeRevoked}, ownerRuns("approve_thing", func(rig *waitRig) *liveReply {
			return rig.postModern(freshToken, 8, "approve_thing", rig.modernRetry)
		})},
		// The late answer (ready) is refused: nothing runs.
		{2, []mcphandler.Outcome{mcphandler.OutcomeRevoked}, func(t *testing.T, rig *waitRig) {
			if ev := rig.f.event(t); ev.Outcome != mcphandler.OutcomeReplayRefused || rig.f.count("delete_thing") != 0 {
				t.Fatalf("a late answer: %+v (ran %d)", ev, rig.f.count("delete_thing"))
			}
		}},
	} {
		kind := waitKinds[tc.kind]
		t.Run(kind.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rig := newWaitRig(t, keepAlive)
				defer rig.closeAll()
				rig.initialize()
				rep, id, ready, result := kind.open(rig)
				rig.settle(keepAlive / 2)
				rig.revoke()
				rig.settle(keepAlive + time.Second)
				checkEnded(t, rep, id, mcphandler.CodeInvalidRequest, result)
				for _, want := range tc.outcomes {
					if ev := rig.f.event(t); ev.Outcome != want {
						t.Fatalf("OnCall: %+v, want %s", ev, want)
					}
				}
				ready() // the task ends, the approver approves, the human answers
				rig.settle(time.Minute)
				if n := rig.f.count("delete_thing") + rig.f.count("approve_thing"); n != 0 {
					t.Fatalf("ran %d times for the revoked request", n)
				}
				tc.owner(t, rig)
			})
		})
	}
}

// TestAttackRevokedApprovalWaitResumed: on real Redis, across replicas. The
// attacker's client asks for an approval, drops the POST stream (the call
// waits on, its answer logged for a resume) and its token is revoked. The
// owner, signed in again, resumes the stream on any replica after the
// approver approved: the stream ends with the error of the revoked
// request, not the result, and nothing ran; the owner's repeated call runs
// once.
func TestAttackRevokedApprovalWaitResumed(t *testing.T) {
	const keepAlive = 200 * time.Millisecond
	tt := newTokenTable()
	tt.ids[freshToken] = users[attacker]
	rig := newApprovalRig(t, 2, 5*time.Second, func(cfg *mcphandler.Config) {
		cfg.Authenticate = tt.authenticate
		cfg.Sessions.KeepAlive = keepAlive
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var asked atomic.Value
	accept := mcptest.WithElicitationHandler(func(_ context.Context, p mcptest.ElicitParams) (mcptest.ElicitResult, error) {
		asked.Store(p.ElicitationID)
		return mcptest.ElicitResult{Action: "accept"}, nil
	})
	c := mcptest.Dial(rig.cl.proxy.URL, mcptest.WithToken(attacker), mcptest.WithCapabilities(urlCaps), mcptest.WithAutoResume(false), accept)
	defer c.Close()
	if _, err := c.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	resp, err := c.Post(ctx, []byte(`{"jsonrpc":"2.0","id":"w","method":"tools/call","params":{"name":"delete_thing","arguments":{"id":"x"}}}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	r := mcptest.NewSSEReader(resp.Body)
	var last, approvalID string
	for approvalID == "" {
		ev, err := r.Next()
		if err != nil {
			t.Fatalf("the stream ended before the approval was asked: %v", err)
		}
		last = cmp.Or(ev.ID, last)
		if m := ev.Message; m != nil && m.Method == "elicitation/create" {
			var p struct{ ElicitationID string }
			json.Unmarshal(m.Params, &p)
			approvalID = p.ElicitationID
		}
	}
	resp.Body.Close() // the attacker's client leaves; the call waits on
	tt.set(func(ids map[string]mcphandler.Identity) { delete(ids, attacker) })
	time.Sleep(3 * keepAlive)
	if _, err := rig.stores[1].Decide(ctx, approvalID, bobApproves, true); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * keepAlive)
	owner := mcptest.Dial(rig.cl.proxy.URL, mcptest.WithToken(freshToken), mcptest.WithCapabilities(urlCaps), accept)
	defer owner.Close()
	owner.SetSessionID(c.SessionID())
	owner.SetProtocolVersion(c.ProtocolVersion())
	s, err := owner.Resume(ctx, last)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var final *mcptest.Message
	for final == nil {
		ev, err := s.Next(ctx)
		if err != nil {
			t.Fatalf("the resumed stream ended without a final message: %v", err)
		}
		if m := ev.Message; m != nil && m.IsResponse() {
			final = m
		}
	}
	if final.Error == nil || final.Error.Code != mcphandler.CodeInvalidRequest || rig.f.count("delete_thing") != 0 {
		t.Fatalf("the resumed stream's answer: %+v (ran %d)", final, rig.f.count("delete_thing"))
	}
	waitOutcome(t, rig.f, mcphandler.OutcomeRevoked)
	res, err := owner.CallTool(ctx, "delete_thing", map[string]any{"id": "x"})
	if err != nil || res.IsError || res.Text() != "delete_thing ran for acme" || rig.f.count("delete_thing") != 1 {
		t.Fatalf("the owner's repeated call: %+v, %v (ran %d)", res, err, rig.f.count("delete_thing"))
	}
}
