package mcphandler_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/session"
)

// specErrorRows reads the "Errors on the wire" table of SPEC.md: each
// row's condition, HTTP status and JSON-RPC code.
func specErrorRows(t *testing.T) map[string][2]int {
	t.Helper()
	b, err := os.ReadFile("SPEC.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(b), "**Errors on the wire**")
	if !ok {
		t.Fatal("SPEC.md has no \"Errors on the wire\" table")
	}
	table, _, _ = strings.Cut(table, "*Tests:*")
	row := regexp.MustCompile(`(?m)^\s*\| (.+?) \| (\d{3})[^|]* \| (-\d+) \|\s*$`)
	rows := map[string][2]int{}
	for _, m := range row.FindAllStringSubmatch(table, -1) {
		status, _ := strconv.Atoi(m[2])
		code, _ := strconv.Atoi(m[3])
		rows[m[1]] = [2]int{status, code}
	}
	if len(rows) < 10 {
		t.Fatalf("read %d rows from SPEC.md's error table", len(rows))
	}
	return rows
}

// flakyStore fails, on demand, the store calls a request makes after its
// session was found: Create and Update, and Subscribe.
type flakyStore struct {
	session.Store
	failUpdate, failSubscribe atomic.Bool
}

var errFlaky = errors.New("flaky: " + session.ErrUnavailable.Error())

func (s *flakyStore) Update(ctx context.Context, sess *session.Session) error {
	if s.failUpdate.Load() {
		return errFlaky
	}
	return s.Store.Update(ctx, sess)
}

func (s *flakyStore) Create(ctx context.Context, sess *session.Session) error {
	if s.failUpdate.Load() {
		return errFlaky
	}
	return s.Store.Create(ctx, sess)
}

func (s *flakyStore) Subscribe(ctx context.Context, channel string) (session.Subscription, error) {
	if s.failSubscribe.Load() {
		return nil, errFlaky
	}
	return s.Store.Subscribe(ctx, channel)
}

// TestSpecErrorTable holds SPEC.md's table of wire errors against the
// handler: every row has a probe here, and every probe answers the row's
// status and code. The store row is probed on every path that meets a
// store failure: it is 503 on all of them.
func TestSpecErrorTable(t *testing.T) {
	f := &fixture{}
	cfg := f.config()
	cfg.Limits.MaxBodyBytes = 1 << 10
	store := &flakyStore{Store: session.NewMemory()}
	cfg.Store = store
	cfg.StateKeys = [][]byte{[]byte("0123456789abcdef0123456789abcdef")}
	h := mcphandler.New(cfg)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c := connect(t, h, "acme-viewer")
	sid := c.SessionID()
	std := func() http.Header {
		return http.Header{
			"Authorization":        {"Bearer acme-viewer"},
			"Content-Type":         {"application/json"},
			"Accept":               {"application/json, text/event-stream"},
			"Mcp-Session-Id":       {sid},
			"Mcp-Protocol-Version": {"2025-11-25"},
		}
	}
	with := func(mod func(http.Header)) http.Header { h := std(); mod(h); return h }
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	type probe struct {
		method string
		header http.Header
		body   string
		before func() // sets up a fault, undone after the probe
	}
	loopback := httptest.NewServer(h)
	t.Cleanup(loopback.Close)
	probes := map[string][]probe{
		"body is not JSON": {{"POST", std(), `{"jsonrpc":`, nil}},
		"not a JSON-RPC message, `jsonrpc` ≠ \"2.0\", null id, params not an object": {
			{"POST", std(), `"hello"`, nil},
			{"POST", std(), `{"jsonrpc":"1.0","id":1,"method":"ping"}`, nil},
			{"POST", std(), `{"jsonrpc":"2.0","id":null,"method":"ping"}`, nil},
			{"POST", std(), `{"jsonrpc":"2.0","id":1,"method":"ping","params":[1]}`, nil},
		},
		"unknown method": {{"POST", std(), `{"jsonrpc":"2.0","id":1,"method":"nope/nope"}`, nil}},
		"missing `Mcp-Session-Id` (non-initialize)": {{"POST", with(func(h http.Header) { h.Del("Mcp-Session-Id") }), ping, nil}},
		"unknown, expired, deleted or foreign session": {
			{"POST", with(func(h http.Header) { h.Set("Mcp-Session-Id", "nope") }), ping, nil},
			{"POST", with(func(h http.Header) { h.Set("Authorization", "Bearer globex-editor") }), ping, nil},
		},
		"unsupported `MCP-Protocol-Version`": {{"POST", with(func(h http.Header) { h.Set("Mcp-Protocol-Version", "1999-01-01") }), ping, nil}},
		"`Accept` lacks `application/json` or `text/event-stream`": {
			{"POST", with(func(h http.Header) { h.Set("Accept", "text/html") }), ping, nil},
			{"POST", with(func(h http.Header) { h.Set("Accept", "application/json") }), ping, nil},
		},
		"`Content-Type` not `application/json`": {{"POST", with(func(h http.Header) { h.Set("Content-Type", "text/plain") }), ping, nil}},
		"disallowed `Origin`, or a non-loopback `Host` on a loopback listener": {
			{"POST", with(func(h http.Header) { h.Set("Origin", "https://evil.example") }), ping, nil},
			{"POST", with(func(h http.Header) { h.Set("Host", "evil.example") }), ping, nil},
		},
		"body over `Config.Limits.MaxBodyBytes` (default 4 MiB)": {{"POST", std(), `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"` + strings.Repeat("a", 2048) + `"}}`, nil}},
		"`MCP-Protocol-Version` other than the session's negotiated version (POST, GET, DELETE)": {
			{"POST", with(func(h http.Header) { h.Set("Mcp-Protocol-Version", "2025-03-26") }), ping, nil},
			{"GET", with(func(h http.Header) { h.Set("Mcp-Protocol-Version", "2025-03-26"); h.Set("Accept", "text/event-stream") }), "", nil},
			{"DELETE", with(func(h http.Header) { h.Set("Mcp-Protocol-Version", "2025-03-26") }), "", nil},
		},
		"request id longer than `Config.Limits.MaxIDBytes` (default 256); the error carries no id": {{"POST", std(), `{"jsonrpc":"2.0","id":"` + strings.Repeat("i", 300) + `","method":"ping"}`, nil}},
		"a response nobody waits for":       {{"POST", std(), `{"jsonrpc":"2.0","id":"mcph-nope","result":{}}`, nil}},
		"authentication failed":             {{"POST", with(func(h http.Header) { h.Del("Authorization") }), ping, nil}},
		"method other than GET/POST/DELETE": {{"PUT", std(), ping, nil}},
		"session store unreachable": {
			// logging/setLevel records the level in the session.
			{"POST", std(), `{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"info"}}`, func() { store.failUpdate.Store(true) }},
			// notifications/initialized is a notification: its failure is
			// only logged; initialize itself creates a session.
			{"POST", with(func(h http.Header) { h.Del("Mcp-Session-Id") }), `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`, func() { store.failUpdate.Store(true) }},
			// the GET stream subscribes to the session's channel.
			{"GET", with(func(h http.Header) { h.Set("Accept", "text/event-stream") }), "", func() { store.failSubscribe.Store(true) }},
			// 2026-07-28: subscriptions/listen subscribes to the changes.
			{"POST", with(func(h http.Header) {
				h.Del("Mcp-Session-Id")
				h.Set("Mcp-Protocol-Version", "2026-07-28")
				h.Set("Mcp-Method", "subscriptions/listen")
			}), `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`, func() { store.failSubscribe.Store(true) }},
		},
	}
	// The timeout row needs a slow body; TestAttackSlowBody holds it.
	skip := map[string]string{"body not received within `Config.Limits.ReadBodyTimeout` (default 30 s); the connection closes": "TestAttackSlowBody"}
	rows := specErrorRows(t)
	for cond, want := range rows {
		ps, ok := probes[cond]
		if !ok {
			if skip[cond] != "" {
				continue
			}
			t.Errorf("SPEC.md row %q has no probe", cond)
			continue
		}
		for i, p := range ps {
			t.Run(cond+"/"+strconv.Itoa(i), func(t *testing.T) {
				if p.before != nil {
					p.before()
					defer store.failUpdate.Store(false)
					defer store.failSubscribe.Store(false)
				}
				target := srv
				if p.header.Get("Host") != "" {
					target = loopback
				}
				req, _ := http.NewRequest(p.method, target.URL, strings.NewReader(p.body))
				req.Header = p.header
				if host := p.header.Get("Host"); host != "" {
					req.Host = host
				}
				resp, err := target.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				var body struct {
					Error *struct{ Code int } `json:"error"`
				}
				json.Unmarshal(b, &body)
				if resp.StatusCode != want[0] || body.Error == nil || body.Error.Code != want[1] {
					t.Fatalf("got HTTP %d %s, SPEC.md says %d and code %d", resp.StatusCode, b, want[0], want[1])
				}
			})
		}
	}
	for cond := range probes {
		if _, ok := rows[cond]; !ok {
			t.Errorf("probe %q names no row of SPEC.md's table", cond)
		}
	}
}
