package mcphandler_test

// Attacks on the promise "a definition the handler cannot serve never
// breaks the wire": a host's ListTools returns tools with broken schemas,
// names outside the spec's characters, duplicated names, no handler or a
// role nobody has. Each is left out of tools/list and answers like an
// unknown tool on tools/call, on every revision and transport, while the
// rest of the list stays intact and valid JSON; each is logged once, and
// what is remembered to log it once is bounded.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/mcptest"
)

// badDefs are tool definitions no handler can serve, by the name a client
// would call them with and a word their logged reason must contain.
var badDefs = []struct {
	tool   mcphandler.Tool
	reason string
}{
	{mcphandler.Tool{Name: "bad_json", InputSchema: []byte(`{"type":"object",`)}, "input schema"},
	{mcphandler.Tool{Name: "null_schema", InputSchema: []byte(`null`)}, "input schema"},
	{mcphandler.Tool{Name: "array_schema", InputSchema: []byte(`[{"type":"object"}]`)}, "input schema"},
	{mcphandler.Tool{Name: "repeated_key", InputSchema: []byte(`{"type":"object","type":"string"}`)}, "input schema"},
	{mcphandler.Tool{Name: "trailing_output", OutputSchema: []byte(`{"type":"object"}}`)}, "output schema"},
	{mcphandler.Tool{Name: "string_output", OutputSchema: []byte(`"object"`)}, "output schema"},
	{mcphandler.Tool{Name: "lookbehind", InputSchema: []byte(`{"type":"object","properties":{"a":{"type":"string","pattern":"(?<=x)a"}}}`)}, "input schema"},
	{mcphandler.Tool{Name: "dangling_ref", InputSchema: []byte(`{"$ref":"#/$defs/missing"}`)}, "input schema"},
	{mcphandler.Tool{Name: "long_error", InputSchema: []byte(`{"type":"object","properties":{"a":{"type":"string","pattern":"(?<=` + strings.Repeat("x", 10000) + `)"}}}`)}, "input schema"},
	{mcphandler.Tool{Name: "self_ref", InputSchema: []byte(`{"type":"object","allOf":[{"$ref":"#"}]}`)}, "loop"},
	{mcphandler.Tool{Name: "bad_header", InputSchema: []byte(`{"type":"object","properties":{"a":{"type":"object","x-mcp-header":"A"}}}`)}, "x-mcp-header"},
	{mcphandler.Tool{Name: strings.Repeat("n", 129)}, "129 bytes"},
	{mcphandler.Tool{Name: "has space"}, "character"},
	{mcphandler.Tool{Name: "ns/tool"}, "character"},
	{mcphandler.Tool{Name: "naïve"}, "character"},
	{mcphandler.Tool{Name: `quo"te`}, "character"},
	{mcphandler.Tool{Name: "no_handler"}, "Handler"},
	{mcphandler.Tool{Name: "unknown_role", MinRole: "root"}, "MinRole"},
	{mcphandler.Tool{Name: "odd_tasks", TaskSupport: "sometimes"}, "TaskSupport"},
	{mcphandler.Tool{Name: "twice"}, "2 tools"},
}

// badToolHost lists good tools around every bad definition (and a second
// "twice"), each with a handler that counts its runs.
type badToolHost struct {
	mu   sync.Mutex
	runs map[string]int
}

func (b *badToolHost) ran(name string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.runs[name]
}

func (b *badToolHost) handler(name string) mcphandler.ToolHandler {
	return func(context.Context, *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
		b.mu.Lock()
		b.runs[name]++
		b.mu.Unlock()
		return mcphandler.TextResult(name + " ran"), nil
	}
}

func (b *badToolHost) tools() []mcphandler.Tool {
	readOnly := &mcphandler.ToolAnnotations{ReadOnlyHint: true}
	good := func(name string, schema string) mcphandler.Tool {
		t := mcphandler.Tool{Name: name, Annotations: readOnly, Handler: b.handler(name)}
		if schema != "" {
			t.InputSchema = []byte(schema)
		}
		return t
	}
	tools := []mcphandler.Tool{good("first", "")}
	for i, d := range badDefs {
		t := d.tool
		if t.Name != "no_handler" {
			t.Handler = b.handler(t.Name)
		}
		tools = append(tools, t)
		if i == len(badDefs)/2 {
			tools = append(tools, good("middle", `{"type":"object","properties":{"q":{"type":"string"}}}`))
		}
	}
	twice := mcphandler.Tool{Name: "twice", Annotations: readOnly, Handler: b.handler("twice (second)")}
	return append(tools, twice, good("last", ""))
}

func (b *badToolHost) config(log *syncBuffer) mcphandler.Config {
	b.runs = map[string]int{}
	return mcphandler.Config{
		Authenticate: bearer,
		Roles:        []string{"viewer", "editor", "admin"},
		Logger:       slog.New(slog.NewJSONHandler(log, nil)),
		ListTools:    func(context.Context) ([]mcphandler.Tool, error) { return b.tools(), nil },
	}
}

// leftOut counts the log records about tool definitions left out, by tool.
func leftOut(t *testing.T, log string) map[string]int {
	t.Helper()
	n := map[string]int{}
	for line := range strings.Lines(log) {
		var rec struct {
			Msg    string `json:"msg"`
			Tool   string `json:"tool"`
			Reason string `json:"reason"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if strings.Contains(rec.Msg, "tool definition") {
			n[rec.Tool+"\x00"+rec.Reason]++
		}
	}
	return n
}

// eraCalls are the ways a client reaches tools/list and tools/call: 2025
// sessions, a 2025-03-26 batch, 2026-07-28 and the legacy transport.
type eraCalls struct {
	list func() (json.RawMessage, error)
	call func(name string) error
}

func toolEras(t *testing.T, h *mcphandler.Handler, token string) map[string]eraCalls {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	c := connect(t, h, token)
	batch := connect(t, h, token, mcptest.WithProtocolVersion("2025-03-26"))
	m := mcptest.NewModern(t, h, mcptest.WithToken(token))
	legacy := mcptest.NewLegacy(t, legacyMux(h), "/sse", mcptest.WithToken(token))
	if _, err := legacy.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	client := func(c *mcptest.Client) eraCalls {
		return eraCalls{
			list: func() (json.RawMessage, error) { return c.Call(ctx, "tools/list", nil) },
			call: func(name string) error { _, err := c.CallTool(ctx, name, nil); return err },
		}
	}
	inBatch := func(method string, params any) (json.RawMessage, error) {
		msgs, err := batch.Batch(ctx, mcptest.BatchRequest{Method: "ping"}, mcptest.BatchRequest{Method: method, Params: params})
		if err != nil {
			return nil, err
		}
		if msgs[1].Error != nil {
			return nil, msgs[1].Error
		}
		return msgs[1].Result, nil
	}
	return map[string]eraCalls{
		"2025-11-25": client(c),
		"2026-07-28": client(m),
		"2024-11-05": client(legacy),
		"2025-03-26 batch": {
			list: func() (json.RawMessage, error) { return inBatch("tools/list", nil) },
			call: func(name string) error {
				_, err := inBatch("tools/call", map[string]any{"name": name})
				return err
			},
		},
	}
}

// The host's list holds every kind of bad definition between good tools.
// On every era the list must be valid JSON holding exactly the good tools
// in order, every bad one must answer exactly like an unknown tool and
// never run (neither of two tools sharing a name), and each must be logged
// exactly once with its name and reason, however many requests see it.
func TestAttackBadToolDefinitions(t *testing.T) {
	var log syncBuffer
	b := &badToolHost{}
	h := mcphandler.New(b.config(&log))
	for era, ec := range toolEras(t, h, "acme-admin") {
		t.Run(era, func(t *testing.T) {
			for range 2 {
				raw, err := ec.list()
				if err != nil {
					t.Fatalf("tools/list: %v", err)
				}
				var res struct {
					Tools []struct {
						Name        string          `json:"name"`
						InputSchema json.RawMessage `json:"inputSchema"`
					} `json:"tools"`
				}
				if !json.Valid(raw) || json.Unmarshal(raw, &res) != nil {
					t.Fatalf("tools/list is not valid JSON: %.300s", raw)
				}
				var names []string
				for _, tl := range res.Tools {
					names = append(names, tl.Name)
					if !json.Valid(tl.InputSchema) || tl.InputSchema[0] != '{' {
						t.Errorf("%s: inputSchema %s", tl.Name, tl.InputSchema)
					}
				}
				if got := strings.Join(names, ","); got != "first,middle,last" {
					t.Fatalf("tools/list lists %q, want first,middle,last", got)
				}
			}
			want := refusal(t, ec.call("no_such_tool"), "no_such_tool")
			for _, d := range badDefs {
				err := ec.call(d.tool.Name)
				if got := refusal(t, err, d.tool.Name); got != want {
					t.Errorf("calling %.40q answered %q, an unknown tool %q", d.tool.Name, got, want)
				}
			}
			if err := ec.call("first"); err != nil {
				t.Fatalf("the good tool: %v", err)
			}
		})
	}
	for _, d := range append(badDefs, struct {
		tool   mcphandler.Tool
		reason string
	}{mcphandler.Tool{Name: "twice (second)"}, ""}) {
		if n := b.ran(d.tool.Name); n != 0 {
			t.Errorf("bad definition %.40q ran %d times", d.tool.Name, n)
		}
	}
	logged := leftOut(t, log.String())
	if len(logged) != len(badDefs) {
		t.Errorf("%d distinct log records about left-out tools, want %d: %v", len(logged), len(badDefs), logged)
	}
	for _, d := range badDefs {
		found := false
		for k, n := range logged {
			name, reason, _ := strings.Cut(k, "\x00")
			if !strings.HasPrefix(d.tool.Name, strings.TrimSuffix(name, "…")) || !strings.Contains(reason, d.reason) {
				continue
			}
			found = true
			if n != 1 {
				t.Errorf("%.40q (%s) logged %d times, want once", d.tool.Name, reason, n)
			}
			if len(name) > 200 || len(reason) > 512 {
				t.Errorf("a logged tool name is %d bytes long, its reason %d", len(name), len(reason))
			}
		}
		if !found {
			t.Errorf("%.40q: no log record whose reason says %q in %v", d.tool.Name, d.reason, logged)
		}
	}
}

// The host returns, per request, bad definitions under ever new names (a
// catalogue built from tenants' input, say). What the handler remembers
// to log each once is bounded, and so are the log lines: past the bound,
// one line says that more are left out without a line each.
func TestAttackBadToolLogBounded(t *testing.T) {
	var log syncBuffer
	var mu sync.Mutex
	next := 0
	h := mcphandler.New(mcphandler.Config{
		Authenticate: bearer,
		Logger:       slog.New(slog.NewJSONHandler(&log, nil)),
		ListTools: func(context.Context) ([]mcphandler.Tool, error) {
			mu.Lock()
			defer mu.Unlock()
			tools := make([]mcphandler.Tool, 0, 700)
			for range 700 {
				next++
				tools = append(tools, mcphandler.Tool{Name: fmt.Sprintf("bad tool %d", next), Handler: echoTool.Handler})
			}
			return append(tools, echoTool), nil
		},
	})
	c := connect(t, h, "acme-viewer")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for range 4 {
		tools, err := c.ListTools(ctx)
		if err != nil || len(tools) != 1 || tools[0].Name != "echo" {
			t.Fatalf("tools/list: %v %v", tools, err)
		}
	}
	lines := strings.Count(log.String(), "\n")
	if lines > mcphandler.BadToolLogSize+1 {
		t.Fatalf("%d bad definitions made %d log lines, want at most %d", 4*700, lines, mcphandler.BadToolLogSize+1)
	}
	if got := mcphandler.BadToolLogLen(h); got > mcphandler.BadToolLogSize {
		t.Fatalf("the handler remembers %d bad definitions, bound %d", got, mcphandler.BadToolLogSize)
	}
	if !strings.Contains(log.String(), "without a log line each") {
		t.Fatal("no line says that further bad definitions are not logged")
	}
}

// A hand-written InputSchema is enforced like a derived one. The attacker
// calls a tool whose schema bounds an amount and names the recipients
// with arguments outside it: out of range, of another type, missing,
// with an extra member, a recipient not in the enum. On every era each
// gets a bad_args tool error, and neither BeforeCall nor the tool runs;
// valid arguments run the tool.
func TestAttackHandWrittenSchemaEnforced(t *testing.T) {
	var mu sync.Mutex
	ran, decided := 0, 0
	transfer := mcphandler.Tool{
		Name:        "transfer",
		Annotations: &mcphandler.ToolAnnotations{ReadOnlyHint: true},
		InputSchema: []byte(`{"type":"object","properties":{"amount":{"type":"integer","minimum":1,"maximum":100},` +
			`"to":{"type":"string","enum":["alice","bob"]}},"required":["amount"],"additionalProperties":false}`),
		Handler: func(context.Context, *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
			mu.Lock()
			ran++
			mu.Unlock()
			return mcphandler.TextResult("sent"), nil
		},
	}
	h := mcphandler.New(mcphandler.Config{
		Authenticate: bearer,
		ListTools:    func(context.Context) ([]mcphandler.Tool, error) { return []mcphandler.Tool{transfer}, nil },
		BeforeCall: func(context.Context, *mcphandler.ToolCall) (mcphandler.Decision, error) {
			mu.Lock()
			decided++
			mu.Unlock()
			return mcphandler.Allow(), nil
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	legacy := mcptest.NewLegacy(t, legacyMux(h), "/sse", mcptest.WithToken("acme-viewer"))
	if _, err := legacy.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	clients := map[string]*mcptest.Client{
		"2025-11-25": connect(t, h, "acme-viewer"),
		"2026-07-28": mcptest.NewModern(t, h, mcptest.WithToken("acme-viewer")),
		"2024-11-05": legacy,
	}
	bad := []map[string]any{
		{"amount": 1000000},
		{"amount": 0},
		{"amount": "5"},
		{"amount": 2.5},
		{},
		{"amount": 5, "extra": true},
		{"amount": 5, "to": "mallory"},
		{"amount": 5, "to": 7},
	}
	for era, c := range clients {
		for _, args := range bad {
			res, err := c.CallTool(ctx, "transfer", args)
			if err != nil {
				t.Fatalf("%s %v: %v", era, args, err)
			}
			if !res.IsError || !strings.Contains(res.Text(), `"bad_args"`) {
				t.Errorf("%s %v: %q (isError %v), want a bad_args tool error", era, args, res.Text(), res.IsError)
			}
		}
		if res, err := c.CallTool(ctx, "transfer", map[string]any{"amount": 5, "to": "bob"}); err != nil || res.IsError {
			t.Fatalf("%s: valid arguments: %v %v", era, res, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if ran != len(clients) || decided != len(clients) {
		t.Fatalf("the tool ran %d times and BeforeCall %d times, want %d each (the valid calls only)", ran, decided, len(clients))
	}
}

// CheckTools reports, before anything is served, every problem the
// handler would leave a tool out for: one error per tool (both tools of a
// shared name), each naming the tool and the reason; nil for a good set.
func TestCheckTools(t *testing.T) {
	b := &badToolHost{}
	cfg := b.config(&syncBuffer{})
	tools := b.tools()
	err := mcphandler.CheckTools(cfg, tools)
	var joined interface{ Unwrap() []error }
	if !errors.As(err, &joined) {
		t.Fatalf("CheckTools: %v, want joined errors", err)
	}
	errs := joined.Unwrap()
	if len(errs) != len(badDefs)+1 {
		t.Errorf("%d errors, want %d (one per bad definition, two for the shared name):\n%v", len(errs), len(badDefs)+1, err)
	}
	for _, d := range badDefs {
		n := 0
		for _, e := range errs {
			if strings.Contains(e.Error(), strconv.Quote(logName(d.tool.Name))) && strings.Contains(e.Error(), d.reason) {
				n++
			}
		}
		if want := map[bool]int{true: 2, false: 1}[d.tool.Name == "twice"]; n != want {
			t.Errorf("%.40q: %d errors say %q, want %d", d.tool.Name, n, d.reason, want)
		}
	}
	var good []mcphandler.Tool
	for _, tl := range tools {
		if tl.Name == "first" || tl.Name == "middle" || tl.Name == "last" {
			good = append(good, tl)
		}
	}
	if err := mcphandler.CheckTools(cfg, append(good, typedEcho, greet)); err != nil {
		t.Fatalf("CheckTools of good tools: %v", err)
	}
}

// logName is a tool name as a log line or CheckTools shows it.
func logName(name string) string {
	if len(name) > 128 {
		return name[:128] + "…"
	}
	return name
}

// The host builds schemas per request (an enum of the tenant's projects,
// say), so every request brings schemas the handler has not seen: what it
// keeps of them is bounded in count and bytes, a schema larger than the
// whole cache is still enforced, and a host that rewrites a schema in
// place, in the same slice, gets its new bytes enforced, never a verdict
// kept for the old ones.
func TestAttackSchemaCacheBounded(t *testing.T) {
	var mu sync.Mutex
	round, pad := 0, 0
	schema := []byte(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`)
	h := mcphandler.New(mcphandler.Config{
		Authenticate: bearer,
		Logger:       slog.New(slog.DiscardHandler),
		ListTools: func(context.Context) ([]mcphandler.Tool, error) {
			mu.Lock()
			defer mu.Unlock()
			round++
			tools := []mcphandler.Tool{{Name: "fixed", Handler: echoTool.Handler, InputSchema: schema}}
			for i := range 700 {
				s := fmt.Sprintf(`{"type":"object","properties":{"p":{"enum":["r%d-%d"]}},"description":%q}`, round, i, strings.Repeat("x", pad))
				tools = append(tools, mcphandler.Tool{Name: fmt.Sprintf("t%d", i), Handler: echoTool.Handler, InputSchema: []byte(s)})
			}
			return tools, nil
		},
	})
	c := connect(t, h, "acme-viewer")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	check := func(what string) {
		t.Helper()
		if n, b := mcphandler.SchemaCacheLen(h); n > mcphandler.SchemaCacheEntries || b > mcphandler.SchemaCacheBytes {
			t.Fatalf("%s: the schema cache holds %d schemas, %d bytes; bounds %d and %d", what, n, b, mcphandler.SchemaCacheEntries, mcphandler.SchemaCacheBytes)
		}
	}
	for range 6 { // 4200 schemas of ~100 bytes: past the count bound
		if tools, err := c.ListTools(ctx); err != nil || len(tools) != 701 {
			t.Fatalf("tools/list: %d tools, %v", len(tools), err)
		}
	}
	check("many small schemas")
	mu.Lock()
	pad = 2000 // 700 schemas of 2 KB: past the byte bound
	mu.Unlock()
	if tools, err := c.ListTools(ctx); err != nil || len(tools) != 701 {
		t.Fatalf("tools/list: %d tools, %v", len(tools), err)
	}
	check("large schemas")

	call := func(args map[string]any) bool {
		res, err := c.CallTool(ctx, "fixed", args)
		if err != nil {
			t.Fatal(err)
		}
		return !res.IsError
	}
	if call(map[string]any{"n": "one"}) || !call(map[string]any{"n": 1}) {
		t.Fatal("the integer schema is not enforced")
	}
	mu.Lock()
	copy(schema, `{"type":"object","properties":{"n":{"type":"string" }},"required":["n"]}`) // same length, in place
	mu.Unlock()
	if call(map[string]any{"n": 1}) || !call(map[string]any{"n": "one"}) {
		t.Fatal("after the host rewrote its schema in place, the old one is still enforced")
	}
	mu.Lock()
	// One schema larger than the whole cache: enforced on each use, not kept.
	schema = []byte(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"],"description":"` +
		strings.Repeat("y", mcphandler.SchemaCacheBytes) + `"}`)
	mu.Unlock()
	if call(map[string]any{"n": "one"}) || !call(map[string]any{"n": 1}) {
		t.Fatal("a schema larger than the cache is not enforced")
	}
	check("a huge schema")
}
