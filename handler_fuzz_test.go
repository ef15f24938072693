package mcphandler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/mcptest"
)

// FuzzServeHTTP feeds arbitrary methods, headers and bodies to ServeHTTP:
// it must never panic, and every answer must be well formed (an empty body,
// one JSON value, or an SSE stream of JSON messages).
func FuzzServeHTTP(f *testing.F) {
	fx := &fixture{}
	cfg := fx.config()
	cfg.OnCall = nil
	cfg.ConfirmTimeout = 10 * time.Millisecond
	cfg.Logger = slog.New(slog.DiscardHandler)
	h := mcphandler.New(cfg)

	rec := httptest.NewRecorder()
	req := httptest.NewRequest("POST", "/", strings.NewReader(initBody))
	req.Header.Set("Authorization", "Bearer acme-admin")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	h.ServeHTTP(rec, req)
	sid := rec.Header().Get("Mcp-Session-Id")
	if sid == "" {
		f.Fatalf("initialize: %d %s", rec.Code, rec.Body)
	}

	for _, body := range []string{
		initBody,
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":"x","method":"tools/list","params":{"cursor":"MTA"}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read","arguments":{"a":[1,{"b":null}]}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"delete_thing","_meta":{"progressToken":{"x":1}}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"logging/setLevel","params":{"level":"debug"}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":"mcph-x","result":{"action":"accept"}}`,
		`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"x"}]`,
		`{"jsonrpc":"2.0","id":1e3,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":-0,"method":"ping","params":null}`,
		"\xff\xfe{",
		``,
	} {
		for _, version := range []string{"", "2025-11-25", "2025-03-26", "junk"} {
			f.Add("POST", body, sid, version, "application/json", "application/json, text/event-stream", "")
		}
	}
	f.Add("GET", "", sid, "2025-11-25", "", "text/event-stream", "http://example.com")
	f.Add("DELETE", "", "nope", "", "", "", "")
	f.Add("PATCH", "{}", "", "", "text/plain", "*/*", "null")

	f.Fuzz(func(t *testing.T, method, body, session, version, contentType, accept, origin string) {
		if method == "GET" || method == "DELETE" && session == sid {
			return // a live GET stream blocks, a DELETE would end the shared session
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, method, "http://127.0.0.1/", strings.NewReader(body))
		if err != nil {
			return
		}
		req.Header.Set("Authorization", "Bearer acme-admin")
		for k, v := range map[string]string{"Mcp-Session-Id": session, "Mcp-Protocol-Version": version, "Content-Type": contentType, "Accept": accept, "Origin": origin} {
			if v != "" {
				req.Header.Set(k, v)
			}
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		checkWellFormed(t, rec.Code, rec.Header(), rec.Body.Bytes())
	})
}

func checkWellFormed(t *testing.T, status int, hdr http.Header, body []byte) {
	t.Helper()
	if status < 200 || status > 599 {
		t.Fatalf("status %d", status)
	}
	if len(body) == 0 {
		return
	}
	switch ct := hdr.Get("Content-Type"); {
	case ct == "application/json":
		if !json.Valid(body) {
			t.Fatalf("invalid JSON body: %q", body)
		}
		var probe any
		json.Unmarshal(body, &probe)
		switch v := probe.(type) {
		case map[string]any:
			if v["jsonrpc"] != "2.0" {
				t.Fatalf("not a JSON-RPC message: %s", body)
			}
		case []any:
		default:
			t.Fatalf("body is neither a message nor a batch: %s", body)
		}
	case strings.HasPrefix(ct, "text/event-stream"):
		r := mcptest.NewSSEReader(bytes.NewReader(body))
		for {
			ev, err := r.Next()
			if err == io.EOF {
				return
			}
			if err != nil {
				t.Fatalf("bad SSE: %v in %q", err, body)
			}
			if len(ev.Data) > 0 && !json.Valid([]byte(ev.Data)) {
				t.Fatalf("SSE event is not JSON: %q", ev.Data)
			}
		}
	default:
		t.Fatalf("body with content type %q: %q", ct, body)
	}
}
