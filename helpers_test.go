package mcphandler_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/approval"
	"github.com/mcphandler/mcphandler/elicitation"
	"github.com/mcphandler/mcphandler/mcptest"
	"github.com/mcphandler/mcphandler/session"
	"github.com/mcphandler/mcphandler/session/redisstore"
	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
)

// fixture is a two-tenant host: acme and globex users, with role-gated and
// tenant-only tools whose runs are counted.
type fixture struct {
	runs     sync.Map // tool name -> *atomic.Int64
	events   chan mcphandler.CallEvent
	approver atomic.Value // string: the last run's ToolCall.ApprovedBy, "tenant/subject", or "-"
}

// approvedBy is what the last run's ToolCall.ApprovedBy said:
// "tenant/subject", "-" for no approval, "" for no run.
func (f *fixture) approvedBy() string {
	s, _ := f.approver.Load().(string)
	return s
}

var users = map[string]mcphandler.Identity{
	"acme-viewer":   {Tenant: "acme", Subject: "alice", Role: "viewer"},
	"acme-admin":    {Tenant: "acme", Subject: "bob", Role: "admin"},
	"globex-editor": {Tenant: "globex", Subject: "carol", Role: "editor"},
}

func bearer(r *http.Request) (mcphandler.Identity, error) {
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if id, ok := users[tok]; ok {
		return id, nil
	}
	return mcphandler.Identity{}, errors.New("bad token")
}

func (f *fixture) count(name string) int64 {
	v, _ := f.runs.LoadOrStore(name, new(atomic.Int64))
	return v.(*atomic.Int64).Load()
}

func (f *fixture) tool(name, minRole string) mcphandler.Tool {
	return mcphandler.Tool{
		Name:        name,
		Description: "test tool " + name,
		MinRole:     minRole,
		Annotations: &mcphandler.ToolAnnotations{ReadOnlyHint: !strings.HasPrefix(name, "delete")},
		Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
			v, _ := f.runs.LoadOrStore(name, new(atomic.Int64))
			v.(*atomic.Int64).Add(1)
			by := "-"
			if who, ok := call.ApprovedBy(); ok {
				by = who.Tenant + "/" + who.Subject
			}
			f.approver.Store(by)
			return mcphandler.TextResult(name + " ran for " + call.Identity.Tenant), nil
		},
	}
}

func (f *fixture) config() mcphandler.Config {
	f.events = make(chan mcphandler.CallEvent, 100)
	return mcphandler.Config{
		Name:         "test",
		Version:      "1.0",
		Authenticate: bearer,
		Roles:        []string{"viewer", "editor", "admin"},
		ListTools: func(ctx context.Context) ([]mcphandler.Tool, error) {
			id, _ := mcphandler.IdentityFrom(ctx)
			tools := []mcphandler.Tool{f.tool("read", "viewer"), f.tool("admin_op", "admin"), f.tool("delete_thing", "")}
			if id.Tenant == "acme" {
				tools = append(tools, f.tool("acme_only", ""))
			}
			return tools, nil
		},
		BeforeCall: func(ctx context.Context, call *mcphandler.ToolCall) (mcphandler.Decision, error) {
			if call.Tool.Destructive() {
				return mcphandler.Confirm("Really delete?"), nil
			}
			return mcphandler.Allow(), nil
		},
		OnCall:         func(ev mcphandler.CallEvent) { f.events <- ev },
		ConfirmTimeout: 2 * time.Second,
	}
}

func (f *fixture) event(t *testing.T) mcphandler.CallEvent {
	t.Helper()
	select {
	case ev := <-f.events:
		return ev
	case <-time.After(5 * time.Second):
		t.Fatal("no OnCall event")
		return mcphandler.CallEvent{}
	}
}

// connect returns an initialized client for token.
func connect(t *testing.T, h http.Handler, token string, opts ...mcptest.Option) *mcptest.Client {
	t.Helper()
	c := mcptest.New(t, h, append([]mcptest.Option{mcptest.WithToken(token)}, opts...)...)
	if _, err := c.Initialize(context.Background()); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	return c
}

func toolNames(t *testing.T, c *mcptest.Client) []string {
	t.Helper()
	tools, err := c.ListTools(context.Background())
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var names []string
	for _, tl := range tools {
		names = append(names, tl.Name)
	}
	return names
}

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

func isRPC(err error, code mcphandler.Code) bool {
	var re *mcptest.RPCError
	return errors.As(err, &re) && re.Code == code
}

func legacyMux(h *mcphandler.Handler) http.Handler {
	sse, msgs := h.LegacySSE("/messages")
	mux := http.NewServeMux()
	mux.Handle("/sse", sse)
	mux.Handle("/messages", msgs)
	return mux
}

// modernPost sends one 2026-07-28 request with the headers a conforming
// client sets (mod may change them) and returns the status and body.
func modernPost(t *testing.T, srv *httptest.Server, token, body string, mod func(http.Header)) (int, http.Header, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", srv.URL, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	var m struct {
		Method string `json:"method"`
		Params struct {
			Name string `json:"name"`
			URI  string `json:"uri"`
		} `json:"params"`
	}
	json.Unmarshal([]byte(body), &m)
	req.Header.Set("Mcp-Method", m.Method)
	if n := m.Params.Name + m.Params.URI; n != "" {
		req.Header.Set("Mcp-Name", n)
	}
	if mod != nil {
		mod(req.Header)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

const modernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":%s}`

func modernBody(id int, method, params, caps string) string {
	if params != "" {
		params += ","
	}
	return `{"jsonrpc":"2.0","id":` + itoa(id) + `,"method":"` + method + `","params":{` + params + strings.Replace(modernMeta, "%s", caps, 1) + `}}`
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

func rpcError(t *testing.T, b []byte) (int, string) {
	t.Helper()
	var m struct {
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &m) != nil || m.Error == nil {
		return 0, ""
	}
	return m.Error.Code, m.Error.Message
}

func answer(action string, content map[string]any) mcptest.ElicitationHandler {
	return func(context.Context, mcptest.ElicitParams) (mcptest.ElicitResult, error) {
		return mcptest.ElicitResult{Action: action, Content: content}, nil
	}
}

var accept = map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}

// confirmID returns the id of the confirm elicitation the client received.
func confirmID(t *testing.T, c *mcptest.Client) json.RawMessage {
	t.Helper()
	for _, m := range c.ServerRequests() {
		if m.Method == "elicitation/create" {
			return m.ID
		}
	}
	t.Fatal("no elicitation was received")
	return nil
}

// waitOutcome reads the reported events until one has outcome o.
func waitOutcome(t *testing.T, f *fixture, o mcphandler.Outcome) {
	t.Helper()
	for f.event(t).Outcome != o {
	}
}

func errorsAs(err error, target **mcptest.HTTPError) bool { return errors.As(err, target) }

func isHTTP(err error, status int) bool {
	var he *mcptest.HTTPError
	return errors.As(err, &he) && he.Status == status
}

func resultText(m map[string]any) string {
	res, _ := m["result"].(map[string]any)
	content, _ := res["content"].([]any)
	if len(content) == 0 {
		return ""
	}
	return content[0].(map[string]any)["text"].(string)
}

func errorCode(m map[string]any) int {
	e, _ := m["error"].(map[string]any)
	if e == nil {
		return 0
	}
	return int(e["code"].(float64))
}

// surface is a host with tenant-scoped resources, templates and prompts,
// some of them admin-only.
func surfaceConfig(reads *atomic.Int64) mcphandler.Config {
	docs := map[string]map[string]string{
		"acme":   {"a1": "Q3 roadmap text"},
		"globex": {"g1": "Price list text"},
	}
	return mcphandler.Config{
		Authenticate: bearer,
		Roles:        []string{"viewer", "editor", "admin"},
		ListResources: func(ctx context.Context) ([]mcphandler.Resource, error) {
			id, _ := mcphandler.IdentityFrom(ctx)
			return []mcphandler.Resource{
				{URI: "info://" + id.Tenant, Name: "info", MimeType: "text/plain"},
				{URI: "audit://" + id.Tenant, Name: "audit log", MinRole: "admin"},
			}, nil
		},
		ListResourceTemplates: func(ctx context.Context) ([]mcphandler.ResourceTemplate, error) {
			return []mcphandler.ResourceTemplate{{URITemplate: "docs://{id}", Name: "doc"}}, nil
		},
		ReadResource: func(ctx context.Context, req *mcphandler.ResourceRequest) ([]mcphandler.ResourceContents, error) {
			reads.Add(1)
			if req.Template != nil {
				text, ok := docs[req.Identity.Tenant][req.Params["id"]]
				if !ok {
					return nil, mcphandler.ErrResourceNotFound
				}
				return []mcphandler.ResourceContents{{URI: req.URI, MimeType: "text/plain", Text: text}}, nil
			}
			if strings.HasPrefix(req.URI, "audit://") {
				return []mcphandler.ResourceContents{{URI: req.URI, Blob: []byte{0, 1, 2}, MimeType: "application/octet-stream"}}, nil
			}
			return []mcphandler.ResourceContents{{URI: req.URI, Text: "tenant " + req.Identity.Tenant}}, nil
		},
		ListPrompts: func(ctx context.Context) ([]mcphandler.Prompt, error) {
			return []mcphandler.Prompt{
				{Name: "summarize", Description: "Summarize a doc", Arguments: []mcphandler.PromptArgument{{Name: "id", Required: true}, {Name: "tone"}}},
				{Name: "purge_plan", Description: "admin only", MinRole: "admin"},
			}, nil
		},
		GetPrompt: func(ctx context.Context, req *mcphandler.PromptRequest) (*mcphandler.PromptResult, error) {
			reads.Add(1)
			return &mcphandler.PromptResult{Messages: []mcphandler.PromptMessage{
				{Role: "user", Content: mcphandler.TextContent("Summarize " + req.Arguments["id"])},
				{Role: "user", Content: mcphandler.EmbeddedResourceContent(mcphandler.ResourceContents{URI: "docs://" + req.Arguments["id"], Text: "body"})},
			}}, nil
		},
		Complete: func(ctx context.Context, req *mcphandler.CompleteRequest) (*mcphandler.CompleteResult, error) {
			var vals []string
			for _, v := range []string{"a1", "a2", "b7"} {
				if strings.HasPrefix(v, req.Value) {
					vals = append(vals, v)
				}
			}
			return &mcphandler.CompleteResult{Values: vals}, nil
		},
	}
}

// nextMessage reads the next JSON-RPC message of a GET stream.
func nextMessage(t *testing.T, s *mcptest.Stream, wait time.Duration) *mcptest.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for {
		ev, err := s.Next(ctx)
		if err != nil {
			return nil
		}
		if ev.Message != nil {
			return ev.Message
		}
	}
}

// discardWriter is a ResponseWriter that keeps nothing, so benchmarks
// measure the handler and not a recorder.
type discardWriter struct {
	h    http.Header
	code int
	n    int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) { w.n += len(p); return len(p), nil }
func (w *discardWriter) WriteHeader(code int)        { w.code = code }
func (w *discardWriter) Flush()                      {}

func (w *discardWriter) reset() {
	clear(w.h)
	w.code, w.n = 0, 0
}

var echoTool = mcphandler.Tool{
	Name:        "echo",
	Description: "Echoes its text.",
	InputSchema: []byte(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`),
	Handler: func(_ context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
		return mcphandler.TextResult(string(call.Arguments)), nil
	},
}

// benchSession opens a session on h and returns the headers of a request in
// it.
func benchSession(_ testing.TB, h http.Handler) http.Header {
	w := &discardWriter{h: http.Header{}}
	req, _ := http.NewRequest("POST", "/", strings.NewReader(initBody))
	req.Header.Set("Authorization", "Bearer acme-viewer")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	h.ServeHTTP(w, req)
	hdr := req.Header.Clone()
	hdr.Set("Mcp-Session-Id", w.h.Get("Mcp-Session-Id"))
	hdr.Set("Mcp-Protocol-Version", "2025-11-25")
	return hdr
}

// serveLoop serves body b.N times in one live session, reusing the request.
func serveLoop(b *testing.B, h http.Handler, body string) {
	hdr := benchSession(b, h)
	rd := strings.NewReader(body)
	req, _ := http.NewRequest("POST", "/", rd)
	req.Header = hdr
	req.ContentLength = int64(len(body))
	w := &discardWriter{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		rd.Reset(body)
		req.Body = io.NopCloser(rd)
		w.reset()
		h.ServeHTTP(w, req)
		if w.code != 200 {
			b.Fatalf("status %d", w.code)
		}
	}
	b.SetBytes(int64(len(body)))
}

// modernCall is a 2026-07-28 tools/call of echo with its _meta.
const modernCall = `{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"},` +
	`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},` +
	`"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1"}}}}`

type typedEchoIn struct {
	Text string `json:"text" jsonschema:"Text to echo."`
}

// typedEcho is the echo tool as the load harness's server declares it:
// NewTool, so its arguments are validated against the derived schema.
var typedEcho = mcphandler.NewTool(mcphandler.Tool{Name: "echo", Description: "Echoes its text."},
	func(_ context.Context, _ *mcphandler.ToolCall, in typedEchoIn) (string, error) { return in.Text, nil })

// syncBuffer is a log destination safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// sharedHandler is a handler over its own view of a shared store.
func sharedHandler(t *testing.T, store session.Store, tools []mcphandler.Tool, log io.Writer) (*mcphandler.Handler, *faultStore, *httptest.Server) {
	t.Helper()
	st := &faultStore{Store: store}
	if log == nil {
		log = io.Discard
	}
	h := mcphandler.New(mcphandler.Config{
		Authenticate: bearer,
		StateKeys:    testStateKeys,
		Store:        st,
		Logger:       slog.New(slog.NewTextHandler(log, nil)),
		ListTools:    func(context.Context) ([]mcphandler.Tool, error) { return tools, nil },
		Sessions:     mcphandler.SessionOptions{KeepAlive: time.Hour},
	})
	srv := httptest.NewServer(h)
	t.Cleanup(func() { srv.Close(); h.Close() })
	return h, st, srv
}

// tokenTable is an authorization server whose tokens can be revoked,
// reissued or given an expiry while streams are open.
type tokenTable struct {
	mu     sync.Mutex
	ids    map[string]mcphandler.Identity
	down   bool // answer ErrAuthUnavailable
	panics bool // panic instead of answering
	checks atomic.Int64
}

func newTokenTable() *tokenTable {
	tt := &tokenTable{ids: map[string]mcphandler.Identity{}}
	for tok, id := range users {
		tt.ids[tok] = id
	}
	return tt
}

func (tt *tokenTable) authenticate(r *http.Request) (mcphandler.Identity, error) {
	tt.checks.Add(1)
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	tt.mu.Lock()
	defer tt.mu.Unlock()
	if tt.panics {
		panic("authorization hook bug")
	}
	if tt.down {
		return mcphandler.Identity{}, fmt.Errorf("introspection endpoint down: %w", mcphandler.ErrAuthUnavailable)
	}
	id, ok := tt.ids[tok]
	if !ok {
		return mcphandler.Identity{}, errors.New("revoked")
	}
	if !id.Expires.IsZero() && !time.Now().Before(id.Expires) {
		return mcphandler.Identity{}, errors.New("expired")
	}
	return id, nil
}

func (tt *tokenTable) set(f func(ids map[string]mcphandler.Identity)) {
	tt.mu.Lock()
	f(tt.ids)
	tt.mu.Unlock()
}

// newHTTPErrorFrom reads a response whose status the test checks; a
// stream (which must not be there) is read only until the test's timeout.
func newHTTPErrorFrom(resp *http.Response) *mcptest.HTTPError {
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return &mcptest.HTTPError{Status: resp.StatusCode, Body: b, Header: resp.Header}
}

// postRaw POSTs body in c's session and returns the answer.
func postRaw(t *testing.T, c *mcptest.Client, body string) *mcptest.HTTPError {
	t.Helper()
	resp, err := c.Post(context.Background(), []byte(body), nil)
	if err != nil {
		t.Fatal(err)
	}
	return newHTTPErrorFrom(resp)
}

// detachHost is the fixture with the given KeepAlive.
func detachHost(t *testing.T, keepAlive time.Duration, edit ...func(*mcphandler.Config)) *mcphandler.Handler {
	cfg := (&fixture{}).config()
	cfg.Sessions.KeepAlive = keepAlive
	for _, e := range edit {
		e(&cfg)
	}
	h := mcphandler.New(cfg)
	t.Cleanup(func() { h.Close() })
	return h
}

// rawSession initializes a 2025-06-18 session for token at url and
// returns its id.
func rawSession(t *testing.T, hc *http.Client, url, token string) string {
	t.Helper()
	return rawSessionAt(t, hc, url, token, "2025-06-18")
}

// rawSessionAt initializes a session of the given version for token at
// url and returns its id.
func rawSessionAt(t *testing.T, hc *http.Client, url, token, version string) string {
	t.Helper()
	post := func(sid, body string) *http.Response {
		req, _ := http.NewRequest("POST", url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+token)
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
			req.Header.Set("MCP-Protocol-Version", version)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	resp := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+version+`","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || sid == "" {
		t.Fatalf("initialize: %d, session %q", resp.StatusCode, sid)
	}
	if resp := post(sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); resp.StatusCode != 202 {
		t.Fatalf("initialized: %d", resp.StatusCode)
	}
	return sid
}

// refusal returns err's HTTP status (0 for 200), JSON-RPC code, message
// and data with name replaced (raw, Go-quoted and JSON-quoted), so that two
// refusals for different names compare equal when they say the same thing.
func refusal(t *testing.T, err error, name string) string {
	t.Helper()
	status := 0
	var re *mcptest.RPCError
	var he *mcptest.HTTPError
	if errors.As(err, &he) {
		status = he.Status
		var m mcptest.Message
		if json.Unmarshal(he.Body, &m) == nil && m.Error != nil {
			re = m.Error
		}
	} else {
		errors.As(err, &re)
	}
	if re == nil {
		t.Fatalf("%q: %v, want a JSON-RPC error", name, err)
	}
	text := re.Message + " " + string(re.Data)
	jq, _ := json.Marshal(name)
	for _, form := range []string{strconv.Quote(name), string(jq), name} {
		text = strings.ReplaceAll(text, form, "NAME")
	}
	return strconv.Itoa(status) + " " + strconv.Itoa(int(re.Code)) + " " + text
}

// skillsServer serves a public skill with a file in a subdirectory, and an
// admin-only skill, through Config.ListSkills.
func skillsServer(t *testing.T, list mcphandler.ListSkillsFunc) *httptest.Server {
	t.Helper()
	if list == nil {
		list = func(context.Context) ([]mcphandler.Skill, error) {
			return []mcphandler.Skill{
				{Name: "pdf-processing", Description: `Extract: "PDF" forms`, Body: "# PDF\n",
					Files: []mcphandler.SkillFile{
						{Path: "references/FORMS.md", MimeType: "text/markdown", Content: []byte("# Forms\n")},
						{Path: "logo.bin", Content: []byte{0xff, 0x00, 0xfe}},
					}},
				{Name: "board-minutes", Description: "Minutes", Body: "secret\n", MinRole: "admin",
					Files: []mcphandler.SkillFile{{Path: "references/2026.md", Content: []byte("secret")}}},
			}, nil
		}
	}
	h := mcphandler.New(mcphandler.Config{
		Authenticate: bearer, Roles: []string{"viewer", "editor", "admin"},
		ListTools:  func(context.Context) ([]mcphandler.Tool, error) { return nil, nil },
		ListSkills: list,
	})
	srv := httptest.NewServer(h)
	t.Cleanup(func() { srv.Close(); h.Close() })
	return srv
}

// skillCall posts one 2026-07-28 request and decodes its result or error.
func skillCall(t *testing.T, srv *httptest.Server, token, method, params string) (result map[string]any, rpcErr map[string]any, raw []byte) {
	t.Helper()
	_, _, b := modernPost(t, srv, token, modernBody(1, method, params, "{}"), nil)
	var m struct {
		Result map[string]any `json:"result"`
		Error  map[string]any `json:"error"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v: %s", method, err, b)
	}
	return m.Result, m.Error, b
}

// badSkills are skill definitions the handler cannot serve, by what is
// wrong with each; their names differ.
func badSkills() map[string]mcphandler.Skill {
	many := make([]mcphandler.SkillFile, mcphandler.MaxSkillFiles)
	for i := range many {
		many[i].Path = "f" + strconv.Itoa(i)
	}
	return map[string]mcphandler.Skill{
		"name":      {Name: "Bad_Name", Description: "d"},
		"hyphens":   {Name: "a--b", Description: "d"},
		"no desc":   {Name: "no-desc"},
		"traversal": {Name: "traversal", Description: "d", Files: []mcphandler.SkillFile{{Path: "../x"}}},
		"absolute":  {Name: "absolute", Description: "d", Files: []mcphandler.SkillFile{{Path: "/x"}}},
		"skill.md":  {Name: "skill-md", Description: "d", Files: []mcphandler.SkillFile{{Path: "SKILL.md"}}},
		"repeated":  {Name: "repeated", Description: "d", Files: []mcphandler.SkillFile{{Path: "x"}, {Path: "x"}}},
		"files":     {Name: "files", Description: "d", Files: many},
		"bytes":     {Name: "bytes", Description: "d", Files: []mcphandler.SkillFile{{Path: "x", Content: make([]byte, mcphandler.MaxSkillBytes)}}},
	}
}

// cluster is N handler replicas, each with its own Redis client and store,
// behind a round-robin proxy: no sticky routing, every request may land on
// another replica.
type cluster struct {
	replicas []*replica
	next     atomic.Int64
	proxy    *httptest.Server
	served   []atomic.Int64 // requests per replica
	lastCall atomic.Int64   // the replica that got the last tools/call
}

type replica struct {
	h      *mcphandler.Handler
	srv    *httptest.Server
	store  *redisstore.Store
	client redis.UniversalClient
	down   atomic.Bool
}

// kill takes the replica down as a crash would: its clients' connections
// drop, and it can neither reach Redis nor be reached again.
func (r *replica) kill() {
	r.down.Store(true)
	r.client.Close() // first: a dead replica writes nothing more to Redis
	r.srv.CloseClientConnections()
	r.store.Close()
}

func newCluster(t *testing.T, n int, cfg mcphandler.Config, client func() redis.UniversalClient) *cluster {
	t.Helper()
	return newClusterWith(t, n, cfg, client, redisstore.Options{OpTimeout: 500 * time.Millisecond})
}

// newClusterWith is newCluster with the replicas' store options (the
// prefix is the test's).
func newClusterWith(t *testing.T, n int, cfg mcphandler.Config, client func() redis.UniversalClient, opts redisstore.Options) *cluster {
	t.Helper()
	prefix := redistest.Prefix(t, client()) // its own client: replicas may die
	cfg.StateKeys = [][]byte{[]byte("0123456789abcdef0123456789abcdef")}
	cfg.Logger = slog.New(slog.DiscardHandler)
	cl := &cluster{served: make([]atomic.Int64, n)}
	opts.Prefix = prefix
	for range n {
		c := client()
		st := redisstore.New(c, opts)
		t.Cleanup(func() { st.Close() })
		cfg := cfg
		cfg.Store = st
		r := &replica{h: mcphandler.New(cfg), store: st, client: c}
		r.srv = httptest.NewServer(r.h)
		t.Cleanup(func() { r.srv.Close(); r.h.Close() })
		cl.replicas = append(cl.replicas, r)
	}
	cl.proxy = httptest.NewServer(http.HandlerFunc(cl.forward))
	t.Cleanup(cl.proxy.Close)
	return cl
}

// forward sends each request to the next live replica, round robin.
func (cl *cluster) forward(w http.ResponseWriter, r *http.Request) {
	var i int
	for range len(cl.replicas) {
		i = int(cl.next.Add(1)) % len(cl.replicas)
		if !cl.replicas[i].down.Load() {
			break
		}
	}
	cl.served[i].Add(1)
	target := cl.replicas[i].srv.URL
	body, _ := io.ReadAll(r.Body)
	if strings.Contains(string(body), `"method":"tools/call"`) {
		cl.lastCall.Store(int64(i))
	}
	req, _ := http.NewRequestWithContext(r.Context(), r.Method, target+r.URL.RequestURI(), bytes.NewReader(body))
	req.Header = r.Header.Clone()
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		w.WriteHeader(http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	rc := http.NewResponseController(w)
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			w.Write(buf[:n])
			rc.Flush()
		}
		if err != nil {
			return
		}
	}
}

// redisClient returns the clients of the replica tests: of the test Redis,
// or of the topology a topology test runs them on (see replica_topology_test.go).
func redisClient(t *testing.T) func() redis.UniversalClient {
	if topo := replicaTopology; topo != nil {
		return topo(t)
	}
	return func() redis.UniversalClient { return redistest.Client(t) }
}

// replicaTopology, while a topology test runs the replica tests, returns
// the clients redisClient gives them: of a Redis Cluster or of Sentinels
// instead of the test Redis.
var replicaTopology func(t *testing.T) func() redis.UniversalClient

// redisReplica returns a handler for cfg on a Redis store of c under
// prefix; both are closed when the test ends.
func redisReplica(t *testing.T, cfg mcphandler.Config, c redis.UniversalClient, prefix string, opts redisstore.Options) *mcphandler.Handler {
	t.Helper()
	opts.Prefix = prefix
	st := redisstore.New(c, opts)
	t.Cleanup(func() { st.Close() })
	cfg.Store = st
	cfg.StateKeys = testStateKeys // replicas share their keys
	cfg.Logger = slog.New(slog.DiscardHandler)
	h := mcphandler.New(cfg)
	t.Cleanup(func() { h.Close() })
	return h
}

// eachStore runs f against the memory store and against Redis.
func eachStore(t *testing.T, f func(t *testing.T, stores func(int) session.Store)) {
	t.Run("memory", func(t *testing.T) { f(t, memoryStores()) })
	t.Run("redis", func(t *testing.T) { f(t, redisStores(t)) })
}

func alwaysAlive(int) bool { return true }

// modernLab is one 2026-07-28 endpoint over a store the test can reach.
type modernLab struct {
	t   *testing.T
	srv *httptest.Server
	st  *faultStore
}

func newModernLab(t *testing.T, store session.Store, tool mcphandler.Tool, before mcphandler.BeforeCallFunc) *modernLab {
	st := &faultStore{Store: store}
	cfg := mcphandler.Config{
		Authenticate: bearer,
		Roles:        []string{"viewer", "editor", "admin"},
		StateKeys:    testStateKeys,
		Store:        st,
		ListTools:    func(context.Context) ([]mcphandler.Tool, error) { return []mcphandler.Tool{tool}, nil },
		BeforeCall:   before,
	}
	h := mcphandler.New(cfg)
	srv := httptest.NewServer(h)
	t.Cleanup(func() { srv.Close(); h.Close() })
	return &modernLab{t: t, srv: srv, st: st}
}

// call sends tools/call with the given inputResponses and state and
// returns the decoded result (or error) object.
func (ml *modernLab) call(id int, tool, args string, responses map[string]any, state string) (int, map[string]any) {
	ml.t.Helper()
	params := `"name":"` + tool + `","arguments":` + args
	if responses != nil {
		b, _ := json.Marshal(responses)
		params += `,"inputResponses":` + string(b)
	}
	if state != "" {
		params += `,"requestState":"` + state + `"`
	}
	status, _, b := modernPost(ml.t, ml.srv, "acme-admin", modernBody(id, "tools/call", params, `{"elicitation":{}}`), nil)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		ml.t.Fatalf("response %q: %v", b, err)
	}
	return status, m
}

// inputRound returns the keys asked and the state of an input_required
// result, or nil keys when m is not one.
func inputRound(m map[string]any) ([]string, string) {
	res, _ := m["result"].(map[string]any)
	if res == nil || res["resultType"] != "input_required" {
		return nil, ""
	}
	var keys []string
	for k := range res["inputRequests"].(map[string]any) {
		keys = append(keys, k)
	}
	return keys, res["requestState"].(string)
}

var acceptConfirm = map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}

// testStateKeys are the StateKeys every replica of a test shares.
var testStateKeys = [][]byte{[]byte("0123456789abcdef0123456789abcdef")}

// faultStore is one replica's view of a shared store, with faults a test
// can switch on: the replica's death (every call fails, as when its
// process is gone), added latency, a Publish that reports no receiver
// (Redis Cluster counts only the subscribers of the node that got the
// PUBLISH), lost answers, and a hook run before each CompareAndSwap.
type faultStore struct {
	session.Store
	dead      atomic.Bool
	delay     atomic.Int64 // nanoseconds added to every call
	zeroCount atomic.Bool
	dropReply atomic.Bool
	beforeCAS atomic.Pointer[func(key string, new []byte)]
	failKeys  atomic.Pointer[string] // records under this prefix cannot be reached

	mu        sync.Mutex // guards published and puts
	published []publishedMsg
	puts      []string // keys written by PutIfAbsent
}

type publishedMsg struct {
	channel string
	msg     []byte
}

var errDead = fmt.Errorf("%w: the replica is dead", session.ErrUnavailable)

// gateKey is gate for a record's key.
func (s *faultStore) gateKey(key string) error {
	if p := s.failKeys.Load(); p != nil && strings.HasPrefix(key, *p) {
		return errDead
	}
	return s.gate()
}

func (s *faultStore) gate() error {
	if d := time.Duration(s.delay.Load()); d > 0 {
		time.Sleep(d)
	}
	if s.dead.Load() {
		return errDead
	}
	return nil
}

func (s *faultStore) Create(ctx context.Context, sess *session.Session) error {
	if err := s.gate(); err != nil {
		return err
	}
	return s.Store.Create(ctx, sess)
}

func (s *faultStore) Get(ctx context.Context, id string) (*session.Session, error) {
	if err := s.gate(); err != nil {
		return nil, err
	}
	return s.Store.Get(ctx, id)
}

func (s *faultStore) Update(ctx context.Context, sess *session.Session) error {
	if err := s.gate(); err != nil {
		return err
	}
	return s.Store.Update(ctx, sess)
}

func (s *faultStore) Delete(ctx context.Context, id string) error {
	if err := s.gate(); err != nil {
		return err
	}
	return s.Store.Delete(ctx, id)
}

func (s *faultStore) Publish(ctx context.Context, channel string, msg []byte) (int, error) {
	if err := s.gate(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	s.published = append(s.published, publishedMsg{channel, append([]byte(nil), msg...)})
	s.mu.Unlock()
	if s.dropReply.Load() && strings.HasPrefix(channel, "reply/") {
		return 1, nil // lost on the way, as Redis Pub/Sub may lose it
	}
	n, err := s.Store.Publish(ctx, channel, msg)
	if s.zeroCount.Load() {
		n = 0
	}
	return n, err
}

func (s *faultStore) Subscribe(ctx context.Context, channel string) (session.Subscription, error) {
	if err := s.gate(); err != nil {
		return nil, err
	}
	return s.Store.Subscribe(ctx, channel)
}

func (s *faultStore) PutIfAbsent(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error) {
	if err := s.gateKey(key); err != nil {
		return false, err
	}
	s.mu.Lock()
	s.puts = append(s.puts, key)
	s.mu.Unlock()
	return s.Store.PutIfAbsent(ctx, key, value, ttl)
}

func (s *faultStore) Load(ctx context.Context, key string) ([]byte, error) {
	if err := s.gateKey(key); err != nil {
		return nil, err
	}
	return s.Store.Load(ctx, key)
}

func (s *faultStore) CompareAndSwap(ctx context.Context, key string, old, new []byte, ttl time.Duration) (bool, error) {
	if err := s.gateKey(key); err != nil {
		return false, err
	}
	if hook := s.beforeCAS.Load(); hook != nil {
		(*hook)(key, new)
	}
	return s.Store.CompareAndSwap(ctx, key, old, new, ttl)
}

func (s *faultStore) AppendEvent(ctx context.Context, stream string, data []byte, ttl time.Duration) (uint64, error) {
	if err := s.gate(); err != nil {
		return 0, err
	}
	return s.Store.AppendEvent(ctx, stream, data, ttl)
}

func (s *faultStore) EventsAfter(ctx context.Context, stream string, after uint64) ([]session.Event, error) {
	if err := s.gate(); err != nil {
		return nil, err
	}
	return s.Store.EventsAfter(ctx, stream, after)
}

// messages returns what was published on channels starting with prefix.
func (s *faultStore) messages(prefix string) []publishedMsg {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []publishedMsg
	for _, p := range s.published {
		if strings.HasPrefix(p.channel, prefix) {
			out = append(out, p)
		}
	}
	return out
}

// keys returns the keys written by PutIfAbsent that start with prefix.
func (s *faultStore) keys(prefix string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, k := range s.puts {
		if strings.HasPrefix(k, prefix) {
			out = append(out, k)
		}
	}
	return out
}

// overwrite replaces whatever key holds by value, as anything with write
// access to the store could. It reports false when key holds nothing.
func overwrite(st session.Store, key string, value []byte) bool {
	ctx := context.Background()
	for range 10 {
		old, err := st.Load(ctx, key)
		if err != nil {
			return false
		}
		if ok, _ := st.CompareAndSwap(ctx, key, old, value, time.Minute); ok {
			return true
		}
	}
	return false
}

// lab is a set of replicas sharing one store, each with its own view of it
// (a faultStore) behind its own test server. Its one tool, delete_thing,
// asks a confirm, counts its runs by the argument "i", and calls onRun
// with the index of the replica running it.
type lab struct {
	t     *testing.T
	reps  []*labReplica
	runs  sync.Map // i -> *atomic.Int64
	onRun atomic.Pointer[func(rep int)]

	mu     sync.Mutex // guards events
	events []mcphandler.CallEvent
}

type labReplica struct {
	idx      int
	h        *mcphandler.Handler
	srv      *httptest.Server
	st       *faultStore
	inFlight atomic.Int64
}

// labOptions shape a lab.
type labOptions struct {
	replicas       int
	confirmTimeout time.Duration
	lease, poll    time.Duration
	// store returns replica i's store; all of them must share their data.
	store func(i int) session.Store
	// tool, if set, replaces delete_thing's handler body (after counting).
	tool func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error)
	// beforeCall, if set, replaces the policy that confirms delete_thing.
	beforeCall mcphandler.BeforeCallFunc
}

func memoryStores() func(int) session.Store {
	m := session.NewMemory()
	return func(int) session.Store { return m }
}

func redisStores(t *testing.T) func(int) session.Store {
	first := redistest.Client(t)
	prefix := redistest.Prefix(t, first)
	return func(int) session.Store {
		st := redisstore.New(redistest.Client(t), redisstore.Options{Prefix: prefix})
		t.Cleanup(func() { st.Close() })
		return st
	}
}

func newLab(t *testing.T, o labOptions) *lab {
	t.Helper()
	l := &lab{t: t}
	for i := range max(o.replicas, 1) {
		r := &labReplica{idx: i, st: &faultStore{Store: o.store(i)}}
		cfg := mcphandler.Config{
			Name:           "lab",
			Authenticate:   bearer,
			Roles:          []string{"viewer", "editor", "admin"},
			ConfirmTimeout: o.confirmTimeout,
			StateKeys:      testStateKeys,
			Store:          r.st,
			Logger:         slog.New(slog.DiscardHandler),
			ListTools: func(context.Context) ([]mcphandler.Tool, error) {
				return []mcphandler.Tool{{
					Name:        "delete_thing",
					Annotations: &mcphandler.ToolAnnotations{DestructiveHint: ptr(true)},
					Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
						if o.tool != nil {
							return o.tool(ctx, call)
						}
						i := argI(call.Arguments)
						l.ran(i)
						if f := l.onRun.Load(); f != nil {
							(*f)(r.idx)
						}
						return mcphandler.TextResult(fmt.Sprintf("ran %d", i)), nil
					},
				}}, nil
			},
			BeforeCall: func(context.Context, *mcphandler.ToolCall) (mcphandler.Decision, error) {
				return mcphandler.Confirm("Really delete?"), nil
			},
			OnCall: func(ev mcphandler.CallEvent) {
				if r.st.dead.Load() {
					return // a dead replica reports nothing
				}
				l.mu.Lock()
				l.events = append(l.events, ev)
				l.mu.Unlock()
			},
		}
		if o.beforeCall != nil {
			cfg.BeforeCall = o.beforeCall
		}
		if o.confirmTimeout == 0 {
			cfg.ConfirmTimeout = 2 * time.Second
		}
		r.h = mcphandler.New(cfg)
		if o.lease > 0 {
			mcphandler.SetConfirmTimes(r.h, o.lease, o.poll)
		}
		r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			r.inFlight.Add(1)
			defer r.inFlight.Add(-1)
			defer func() {
				if v := recover(); v != nil {
					t.Errorf("replica %d panicked serving %s: %v", r.idx, req.Method, v)
				}
			}()
			r.h.ServeHTTP(w, req)
		}))
		t.Cleanup(func() { r.srv.Close(); r.h.Close() })
		l.reps = append(l.reps, r)
	}
	return l
}

func ptr[T any](v T) *T { return &v }

func argI(args json.RawMessage) int {
	var a struct{ I int }
	json.Unmarshal(args, &a)
	return a.I
}

func (l *lab) ran(i int) {
	v, _ := l.runs.LoadOrStore(i, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

func (l *lab) count(i int) int64 {
	v, _ := l.runs.LoadOrStore(i, new(atomic.Int64))
	return v.(*atomic.Int64).Load()
}

// kill takes replica i down as a crash would: it can no longer reach the
// store, its clients' connections drop, and it reports nothing.
func (l *lab) kill(i int) {
	l.reps[i].st.dead.Store(true)
	l.reps[i].srv.CloseClientConnections()
}

// idle waits until no replica serves a request (a dead replica's
// goroutines included), at most d.
func (l *lab) idle(d time.Duration) bool {
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		busy := false
		for _, r := range l.reps {
			busy = busy || r.inFlight.Load() > 0
		}
		if !busy {
			return true
		}
	}
	return false
}

// revive brings every replica back, once idle.
func (l *lab) revive() {
	for _, r := range l.reps {
		r.st.dead.Store(false)
	}
}

// eventsFor returns the reported events of confirm id.
func (l *lab) eventsFor(id string) []mcphandler.CallEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []mcphandler.CallEvent
	for _, ev := range l.events {
		if ev.ConfirmID == id {
			out = append(out, ev)
		}
	}
	return out
}

// session opens a session on replica 0 and returns a client per replica
// in it.
func (l *lab) session(token string) []*mcptest.Client {
	l.t.Helper()
	first := mcptest.Dial(l.reps[0].srv.URL, mcptest.WithToken(token), mcptest.WithAutoResume(false),
		mcptest.WithElicitationHandler(func(context.Context, mcptest.ElicitParams) (mcptest.ElicitResult, error) {
			return mcptest.ElicitResult{Action: "cancel"}, nil
		}))
	l.t.Cleanup(first.Close)
	if _, err := first.Initialize(context.Background()); err != nil {
		l.t.Fatalf("initialize: %v", err)
	}
	cs := []*mcptest.Client{first}
	for _, r := range l.reps[1:] {
		c := mcptest.Dial(r.srv.URL, mcptest.WithToken(token), mcptest.WithAutoResume(false))
		c.SetSessionID(first.SessionID())
		c.SetProtocolVersion(first.ProtocolVersion())
		l.t.Cleanup(c.Close)
		cs = append(cs, c)
	}
	return cs
}

// confirmCall is a tools/call of delete_thing in flight, read as SSE.
type pendingCall struct {
	resp    *http.Response
	rd      *mcptest.SSEReader
	cancel  context.CancelFunc
	id      json.RawMessage // the confirm's elicitation id
	lastID  string
	callID  int
	mu      sync.Mutex
	final   *mcptest.Message
	readErr error
	done    chan struct{}
}

// startCall posts tools/call delete_thing {"i": i} through c and reads
// its stream up to the confirm's question.
func startCall(t *testing.T, c *mcptest.Client, i int) *pendingCall {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"delete_thing","arguments":{"i":%d}}}`, 1000+i, i)
	resp, err := c.Post(ctx, []byte(body), nil)
	if err != nil {
		cancel()
		t.Fatalf("tools/call: %v", err)
	}
	pc := &pendingCall{resp: resp, rd: mcptest.NewSSEReader(resp.Body), cancel: cancel, callID: 1000 + i, done: make(chan struct{})}
	for {
		ev, err := pc.rd.Next()
		if err != nil {
			cancel()
			resp.Body.Close()
			t.Fatalf("reading the call's stream: %v (status %d)", err, resp.StatusCode)
		}
		if ev.HasID {
			pc.lastID = ev.ID
		}
		if m := ev.Message; m != nil && m.Method == "elicitation/create" {
			pc.id = m.ID
			break
		}
	}
	go pc.readRest()
	return pc
}

// readRest reads the rest of the POST stream until its response.
func (pc *pendingCall) readRest() {
	defer close(pc.done)
	defer pc.resp.Body.Close()
	for {
		ev, err := pc.rd.Next()
		if err != nil {
			pc.mu.Lock()
			pc.readErr = err
			pc.mu.Unlock()
			return
		}
		pc.mu.Lock()
		if ev.HasID {
			pc.lastID = ev.ID
		}
		if m := ev.Message; m != nil && m.IsResponse() {
			pc.final = m
			pc.mu.Unlock()
			return
		}
		pc.mu.Unlock()
	}
}

// disconnect drops the call's connection, as a client that goes away.
func (pc *pendingCall) disconnect() { pc.cancel() }

// confirmID is the confirm's id without quotes.
func (pc *pendingCall) confirmID() string { return strings.Trim(string(pc.id), `"`) }

// await returns the call's response: from its POST stream, or else by
// resuming the stream (Last-Event-ID) through the given clients in turn
// until wait has passed. nil means the client never got one.
func (pc *pendingCall) await(clients []*mcptest.Client, alive func(i int) bool, wait time.Duration) *mcptest.Message {
	deadline := time.Now().Add(wait)
	select {
	case <-pc.done:
	case <-time.After(wait):
		pc.cancel()
		<-pc.done
	}
	pc.mu.Lock()
	final, last := pc.final, pc.lastID
	pc.mu.Unlock()
	for n := 0; final == nil && last != "" && time.Now().Before(deadline); n++ {
		i := n % len(clients)
		if !alive(i) {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		s, err := clients[i].Resume(ctx, last)
		if err != nil {
			cancel()
			time.Sleep(10 * time.Millisecond)
			continue
		}
		for {
			ev, err := s.Next(ctx)
			if err != nil {
				break
			}
			if ev.HasID {
				last = ev.ID
			}
			if m := ev.Message; m != nil && m.IsResponse() {
				final = m
				break
			}
		}
		s.Close()
		cancel()
	}
	return final
}

// verdict is what a client was told about a call: it ran (the tool's own
// result), it did not run ("Not run…"), unknown, or nothing.
type verdict int

const (
	toldNothing verdict = iota
	toldRan
	toldNotRun
	toldUnknown
	toldError // a JSON-RPC error (e.g. the unknown-tool answer of a revoked call)
)

func (v verdict) String() string {
	return [...]string{"nothing", "ran", "not run", "unknown", "error"}[v]
}

func verdictOf(m *mcptest.Message) verdict {
	if m == nil {
		return toldNothing
	}
	if m.Error != nil {
		return toldError
	}
	var r mcptest.ToolResult
	if json.Unmarshal(m.Result, &r) != nil {
		return toldError
	}
	text := r.Text()
	switch {
	case !r.IsError && strings.HasPrefix(text, "ran "):
		return toldRan
	case strings.Contains(text, "is unknown"):
		return toldUnknown
	case strings.HasPrefix(text, "Not run"):
		return toldNotRun
	}
	return toldError
}

// checkConfirmInvariants checks what the confirm machinery promises about
// one call whatever happened: the tool ran at most once; a client told it
// did not run never sees it run, and one told it ran saw it run; a run has
// exactly one reported outcome, and no confirm has two contradicting ones.
func checkConfirmInvariants(t *testing.T, l *lab, pc *pendingCall, i int, told verdict, note string) {
	t.Helper()
	runs := l.count(i)
	var terminal []mcphandler.Outcome
	for _, ev := range l.eventsFor(pc.confirmID()) {
		if ev.Outcome != mcphandler.OutcomeReplayRefused {
			terminal = append(terminal, ev.Outcome)
		}
	}
	fail := func(format string, args ...any) {
		t.Helper()
		t.Errorf("%s: "+format+" (runs %d, told %v, outcomes %v)", append(append([]any{note}, args...), runs, told, terminal)...)
	}
	if runs > 1 {
		fail("the tool ran more than once")
	}
	if told == toldNotRun && runs != 0 {
		fail("the client was told it did not run, and it ran")
	}
	if told == toldRan && runs != 1 {
		fail("the client was told it ran, and it did not")
	}
	if len(terminal) > 1 {
		fail("more than one outcome reported for one confirm")
	}
	for _, o := range terminal {
		if o == mcphandler.OutcomeConfirmed && runs != 1 {
			fail("reported confirmed, but it did not run")
		}
		if runs == 1 && o != mcphandler.OutcomeConfirmed && o != mcphandler.OutcomeUnknown {
			fail("it ran, but the outcome reported is %s", o)
		}
	}
	checkConfirmAudits(t, l.eventsFor(pc.confirmID()), pc.confirmID(), i, runs, fail)
}

// checkConfirmAudits checks the Audit records of the events of one lab
// confirm (of delete_thing {"i": i}, which ran runs times): the event
// that ends the confirm carries one, no other does (a refused answer
// none); it says what the lab asked, the digest of what ran, and claims
// a run exactly when there was one; nobody but the client or nobody
// decides a confirm.
func checkConfirmAudits(t *testing.T, events []mcphandler.CallEvent, id string, i int, runs int64, fail func(string, ...any)) {
	t.Helper()
	args := sha256.Sum256([]byte(`{"i":` + strconv.Itoa(i) + `}`))
	var audits []*mcphandler.Audit
	terminal := 0
	for _, ev := range events {
		if ev.Outcome != mcphandler.OutcomeReplayRefused {
			terminal++
		} else if ev.Audit != nil {
			fail("a refused answer carries an audit record: %+v", *ev.Audit)
		}
		if ev.Audit != nil {
			audits = append(audits, ev.Audit)
		}
	}
	if len(audits) != terminal {
		fail("%d audit records for %d outcomes", len(audits), terminal)
	}
	for _, a := range audits {
		switch {
		case a.Decision != "confirm" || a.Tool != "delete_thing" || a.ConfirmID != id:
			fail("audit of another decision: %+v", *a)
		case a.Message != "Really delete?" || !bytes.Equal(a.Form, confirmFormBytes):
			fail("audit of another question: %q %s", a.Message, a.Form)
		case a.ArgsDigest != hex.EncodeToString(args[:]):
			fail("audit digest %s, not of the arguments {\"i\":%d}", a.ArgsDigest, i)
		case a.By != "client" && a.By != "":
			fail("a confirm decided by %q", a.By)
		case a.Outcome == mcphandler.OutcomeConfirmed && runs != 1:
			fail("the audit says it ran, and it did not")
		case runs == 1 && a.Outcome != mcphandler.OutcomeConfirmed && a.Outcome != mcphandler.OutcomeUnknown:
			fail("it ran, and the audit says %s", a.Outcome)
		case a.Outcome == mcphandler.OutcomeConfirmed && a.By != "client":
			fail("it ran, and the audit says nobody answered")
		case a.Asked.IsZero() || a.Decided.Before(a.Asked):
			fail("audit times: asked %v, decided %v", a.Asked, a.Decided)
		}
	}
}

// confirmFormBytes is the default confirm form as sent to the client.
var confirmFormBytes = []byte(`{"type":"object","properties":{"confirm":{"type":"boolean","title":"Confirm","default":false}},"required":["confirm"]}`)

// redisAttacker reaches the Redis the replicas share with a client of its
// own, as another application holding the Redis password would.
type redisAttacker struct {
	t      *testing.T
	c      redis.UniversalClient
	prefix string
}

// redisLabStores is redisStores with the attacker of their Redis.
func redisLabStores(t *testing.T) (func(int) session.Store, *redisAttacker) {
	c := redistest.Client(t)
	prefix := redistest.Prefix(t, c)
	return func(int) session.Store {
		st := redisstore.New(redistest.Client(t), redisstore.Options{Prefix: prefix})
		t.Cleanup(func() { st.Close() })
		return st
	}, &redisAttacker{t: t, c: c, prefix: prefix}
}

// record and log are the Redis keys of a record and of an event log.
func (a *redisAttacker) record(key string) string { return a.prefix + "{" + key + "}:r" }
func (a *redisAttacker) log(key string) string    { return a.prefix + "{" + key + "}:l" }

// dump snapshots a key (DUMP).
func (a *redisAttacker) dump(key string) string {
	v, err := a.c.Dump(context.Background(), key).Result()
	if err != nil {
		a.t.Errorf("DUMP %s: %v", key, err)
	}
	return v
}

// restore writes a snapshot back (RESTORE ... REPLACE) with no TTL: the
// key lives for ever.
func (a *redisAttacker) restore(key, snapshot string) {
	if err := a.c.RestoreReplace(context.Background(), key, 0, snapshot).Err(); err != nil {
		a.t.Fatalf("RESTORE %s: %v", key, err)
	}
}

// entries reads a list (an event log) whole.
func (a *redisAttacker) entries(key string) []string {
	v, err := a.c.LRange(context.Background(), key, 0, -1).Result()
	if err != nil {
		a.t.Fatalf("LRANGE %s: %v", key, err)
	}
	return v
}

// rewrite replaces a list by entries, kept for ever.
func (a *redisAttacker) rewrite(key string, entries []string) {
	ctx := context.Background()
	_, err := a.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, key)
		for _, e := range entries {
			p.RPush(ctx, key, e)
		}
		return nil
	})
	if err != nil {
		a.t.Fatalf("rewriting %s: %v", key, err)
	}
}

// The approver of the tests: another person of the caller's tenant (the
// caller is acme-viewer, alice).
var (
	bobApproves = approval.Identity{Tenant: "acme", Subject: "bob", Role: "admin"}
	urlCaps     = json.RawMessage(`{"elicitation":{"form":{},"url":{}}}`)
)

const approvalPage = "https://app.example/approvals/"

// approvalRig is n replicas on Redis, each with its own approval store
// on its own connection, behind the round-robin proxy of a cluster;
// delete_thing is decided Approve (the four-eyes default policy).
type approvalRig struct {
	f      *fixture
	cl     *cluster
	stores []*approval.Store
	prefix string // of every key in Redis
}

func newApprovalRig(t *testing.T, n int, ttl time.Duration, tweaks ...func(*mcphandler.Config)) *approvalRig {
	t.Helper()
	return newApprovalRigAt(t, n, ttl, approvalPage, tweaks...)
}

// newApprovalRigAt is newApprovalRig with the page at pageURL.
func newApprovalRigAt(t *testing.T, n int, ttl time.Duration, pageURL string, tweaks ...func(*mcphandler.Config)) *approvalRig {
	t.Helper()
	return newApprovalRigWith(t, n, ttl, pageURL, nil, tweaks...)
}

// newApprovalRigWith is newApprovalRigAt whose approval stores' Config
// acfg changes (if not nil).
func newApprovalRigWith(t *testing.T, n int, ttl time.Duration, pageURL string, acfg func(*approval.Config), tweaks ...func(*mcphandler.Config)) *approvalRig {
	t.Helper()
	rig := &approvalRig{f: &fixture{}}
	cfg := rig.f.config()
	cfg.ConfirmTimeout = max(ttl, 2*time.Second)
	cfg.BeforeCall = func(ctx context.Context, call *mcphandler.ToolCall) (mcphandler.Decision, error) {
		if call.Tool.Destructive() {
			return mcphandler.Approve("Delete it?", approval.Policy{}), nil
		}
		return mcphandler.Allow(), nil
	}
	keys := [][]byte{[]byte("0123456789abcdef0123456789abcdef")}
	cfg.StateKeys = keys
	cfg.Logger = slog.New(slog.DiscardHandler)
	for _, tweak := range tweaks {
		tweak(&cfg)
	}
	client := func() redis.UniversalClient { return redistest.Client(t) }
	prefix := redistest.Prefix(t, client())
	rig.prefix = prefix
	rig.cl = &cluster{served: make([]atomic.Int64, n)}
	for range n {
		c := client()
		st := redisstore.New(c, redisstore.Options{Prefix: prefix, OpTimeout: 500 * time.Millisecond})
		t.Cleanup(func() { st.Close() })
		ac := approval.Config{Store: st, Keys: keys, URL: pageURL, TTL: ttl, Roles: cfg.Roles, Poll: 100 * time.Millisecond}
		if acfg != nil {
			acfg(&ac)
		}
		as, err := approval.New(ac)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { as.Close() })
		cfg := cfg
		cfg.Store, cfg.Approvals = st, as
		r := &replica{h: mcphandler.New(cfg), store: st, client: c}
		mcphandler.SetConfirmTimes(r.h, 300*time.Millisecond, 50*time.Millisecond)
		r.srv = httptest.NewServer(r.h)
		t.Cleanup(func() { r.srv.Close(); r.h.Close() })
		rig.cl.replicas = append(rig.cl.replicas, r)
		rig.stores = append(rig.stores, as)
	}
	rig.cl.proxy = httptest.NewServer(http.HandlerFunc(rig.cl.forward))
	t.Cleanup(rig.cl.proxy.Close)
	return rig
}

// decideLater decides the approval of an elicitation from another
// goroutine, through store, as the page would.
func decideLater(t *testing.T, store *approval.Store, id string, approve bool) {
	go func() {
		time.Sleep(50 * time.Millisecond)
		if _, err := store.Decide(context.Background(), id, bobApproves, approve); err != nil {
			t.Errorf("decide %s: %v", id, err)
		}
	}()
}

// urlElicitations records the URL elicitations a client is asked.
type urlElicitations struct {
	asked atomic.Int64
	last  atomic.Value // mcptest.ElicitParams
}

func (u *urlElicitations) handler(then func(p mcptest.ElicitParams)) mcptest.Option {
	return mcptest.WithElicitationHandler(func(_ context.Context, p mcptest.ElicitParams) (mcptest.ElicitResult, error) {
		u.asked.Add(1)
		u.last.Store(p)
		if p.Mode != "url" || !strings.HasPrefix(p.URL, approvalPage) || p.ElicitationID == "" {
			return mcptest.ElicitResult{Action: "decline"}, nil
		}
		then(p)
		return mcptest.ElicitResult{Action: "accept"}, nil
	})
}

// dialAskerDies returns a client of the rig's cluster, declaring URL mode,
// that answers an approval's URL elicitation and then kills the replica the
// call waits on; bob approves on the other replica's store once it is down.
func (rig *approvalRig) dialAskerDies(t *testing.T) *mcptest.Client {
	var u urlElicitations
	return mcptest.Dial(rig.cl.proxy.URL, mcptest.WithToken("acme-viewer"), mcptest.WithCapabilities(urlCaps),
		u.handler(func(p mcptest.ElicitParams) {
			i := rig.cl.lastCall.Load()
			go func() {
				time.Sleep(100 * time.Millisecond) // the answer to the elicitation went out
				rig.cl.replicas[i].kill()
				time.Sleep(100 * time.Millisecond)
				if _, err := rig.stores[1-i].Decide(context.Background(), p.ElicitationID, bobApproves, true); err != nil {
					t.Errorf("decide: %v", err)
				}
			}()
		}))
}

var pageURL = regexp.MustCompile(regexp.QuoteMeta(approvalPage) + `([A-Za-z0-9_-]{22})`)

// approvalIn returns the approval id of the page URL a tool result names.
func approvalIn(t *testing.T, res *mcptest.ToolResult) string {
	t.Helper()
	m := pageURL.FindStringSubmatch(res.Text())
	if !res.IsError || m == nil {
		t.Fatalf("not a result naming an approval page: %+v", res)
	}
	return m[1]
}

func dialProxy(t *testing.T, rig *approvalRig, opts ...mcptest.Option) *mcptest.Client {
	return mcptest.Dial(rig.cl.proxy.URL, opts...)
}

// postModern sends one 2026-07-28 tools/call to url with the client
// capabilities caps and returns the status and the decoded body.
func postModern(t *testing.T, url, token string, id int, params, caps string) (int, map[string]any) {
	t.Helper()
	body := modernBody(id, "tools/call", params, caps)
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", "delete_thing")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatalf("body: %v", err)
	}
	return resp.StatusCode, m
}

// Client capabilities of 2026-07-28 requests with and without the tasks
// extension.
const (
	capsTasks   = `{"extensions":{"io.modelcontextprotocol/tasks":{}},"elicitation":{"form":{}}}`
	capsNoTasks = `{"elicitation":{"form":{}}}`
)

// taskFixture is a host whose tools run as tasks, counting their runs.
type taskFixture struct {
	runs    atomic.Int64
	started chan struct{}
	stopped chan error
}

func (tf *taskFixture) config() mcphandler.Config {
	tf.started, tf.stopped = make(chan struct{}, 10), make(chan error, 10)
	cfg := (&fixture{}).config()
	cfg.BeforeCall = nil
	confirm := elicitation.NewSchema().Boolean("confirm", elicitation.Title("Sure?"))
	cfg.ListTools = func(context.Context) ([]mcphandler.Tool, error) {
		return []mcphandler.Tool{
			{Name: "plain", Handler: func(context.Context, *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
				return mcphandler.TextResult("plain"), nil
			}},
			{Name: "quick", TaskSupport: mcphandler.TaskOptional, Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
				return call.RunAsTask(ctx, func(context.Context, *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
					tf.runs.Add(1)
					return mcphandler.TextResult("quick for " + call.Identity.Tenant), nil
				})
			}},
			{Name: "wait", TaskSupport: mcphandler.TaskOptional, Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
				return call.RunAsTask(ctx, func(ctx context.Context, _ *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
					tf.runs.Add(1)
					tf.started <- struct{}{}
					select {
					case <-ctx.Done():
						tf.stopped <- ctx.Err()
						return nil, ctx.Err()
					case <-time.After(30 * time.Second):
						tf.stopped <- nil
						return mcphandler.TextResult("waited"), nil
					}
				})
			}},
			{Name: "only_task", TaskSupport: mcphandler.TaskRequired, Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
				tf.runs.Add(1)
				return call.RunAsTask(ctx, func(context.Context, *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
					return mcphandler.TextResult("ran"), nil
				})
			}},
			{Name: "ask", TaskSupport: mcphandler.TaskOptional, Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
				return call.RunAsTask(ctx, func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
					res, err := call.Elicit(ctx, mcphandler.ElicitRequest{Key: "sure", Message: "Sure?", Schema: confirm})
					if err != nil {
						return nil, err
					}
					tf.runs.Add(1)
					return mcphandler.TextResult(fmt.Sprintf("answer %s %v", res.Action, res.Content["confirm"])), nil
				})
			}},
			{Name: "big", TaskSupport: mcphandler.TaskOptional, Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
				return call.RunAsTask(ctx, func(context.Context, *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
					return mcphandler.TextResult(strings.Repeat("x", 4096)), nil
				})
			}},
		}, nil
	}
	return cfg
}

// rpc is a decoded 2026-07-28 answer.
type rpc struct {
	Result map[string]any `json:"result"`
	Error  *struct {
		Code    mcphandler.Code `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

func taskCall(t *testing.T, srv *httptest.Server, token, method, params, caps string, mod func(http.Header)) (int, []byte, rpc) {
	t.Helper()
	status, _, b := modernPost(t, srv, token, modernBody(7, method, params, caps), mod)
	var r rpc
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("%s: %v: %s", method, err, b)
	}
	return status, b, r
}

// createTask calls tool as a task and returns its id.
func createTask(t *testing.T, srv *httptest.Server, token, tool string) string {
	t.Helper()
	_, b, r := taskCall(t, srv, token, "tools/call", `"name":"`+tool+`","arguments":{}`, capsTasks, nil)
	if r.Result == nil || r.Result["resultType"] != "task" {
		t.Fatalf("tools/call %s: want a CreateTaskResult, got %s", tool, b)
	}
	id, _ := r.Result["taskId"].(string)
	return id
}

func getTask(t *testing.T, srv *httptest.Server, token, id string) map[string]any {
	t.Helper()
	_, b, r := taskCall(t, srv, token, "tasks/get", `"taskId":"`+id+`"`, capsTasks, nil)
	if r.Result == nil {
		t.Fatalf("tasks/get %s: %s", id, b)
	}
	return r.Result
}

// awaitStatus polls task id until its status is want (or terminal), for
// at most d.
func awaitStatus(t *testing.T, srv *httptest.Server, token, id, want string, d time.Duration) map[string]any {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		res := getTask(t, srv, token, id)
		st := res["status"]
		if st == want || time.Now().After(deadline) || (st != "working" && st != "input_required") {
			if st != want {
				t.Fatalf("task %s: status %v, want %s: %v", id, st, want, res)
			}
			return res
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func v1Client(t *testing.T, h *mcphandler.Handler, token string, opts ...mcptest.Option) *mcptest.Client {
	t.Helper()
	c := mcptest.New(t, h, append([]mcptest.Option{mcptest.WithToken(token)}, opts...)...)
	res, err := c.Initialize(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if c.ProtocolVersion() != mcphandler.Version20251125 || !strings.Contains(toJSONString(res), `"tasks":{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}`) {
		t.Fatalf("initialize: %s %s", c.ProtocolVersion(), toJSONString(res))
	}
	return c
}

func callJSON(t *testing.T, c *mcptest.Client, method string, params any) (map[string]any, error) {
	t.Helper()
	raw, err := c.Call(context.Background(), method, params)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	json.Unmarshal(raw, &m)
	return m, nil
}

func toJSONString(v any) string { b, _ := json.Marshal(v); return string(b) }

// confirmTasks is a host whose purge tools need a confirm (or an
// approval) and then run as tasks, counting the runs of their work.
type confirmTasks struct {
	runs    atomic.Int64
	handled atomic.Int64 // Handler calls, rounds included
}

func (ct *confirmTasks) tools(context.Context) ([]mcphandler.Tool, error) {
	work := func(_ context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
		ct.runs.Add(1)
		return mcphandler.TextResult("purged " + string(call.Arguments) + " for " + call.Identity.Subject), nil
	}
	sure := elicitation.NewSchema().Boolean("confirm", elicitation.Title("Sure?"))
	destructive := &mcphandler.ToolAnnotations{DestructiveHint: ptr(true)}
	return []mcphandler.Tool{
		{Name: "purge", TaskSupport: mcphandler.TaskOptional, Annotations: destructive,
			Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
				ct.handled.Add(1)
				return call.RunAsTask(ctx, work)
			}},
		// purge_ask asks its own question in the request's rounds, after
		// the confirm, before the work becomes a task.
		{Name: "purge_ask", TaskSupport: mcphandler.TaskRequired, Annotations: destructive,
			Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
				ct.handled.Add(1)
				res, err := call.Elicit(ctx, mcphandler.ElicitRequest{Key: "really", Message: "Really?", Schema: sure})
				if err != nil {
					return nil, err
				}
				if res.Action != elicitation.Accept {
					return mcphandler.ErrorResult("not purged"), nil
				}
				return call.RunAsTask(ctx, work)
			}},
	}, nil
}

func (ct *confirmTasks) config() mcphandler.Config {
	cfg := (&fixture{}).config()
	cfg.OnCall = nil
	cfg.ListTools = ct.tools
	return cfg
}

func newServer(t *testing.T, h http.Handler) *httptest.Server {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}
