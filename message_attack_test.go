package mcphandler_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcphandler/mcphandler"
)

// A body with several faults at once gets the answer of the first check in
// the documented order — syntax, envelope, id length, repeated keys,
// nesting — whichever of them the first pass over the body noticed, so
// that reading the body fewer times changes no answer.
func TestAttackMessageErrorPrecedence(t *testing.T) {
	h := mcphandler.New(mcphandler.Config{
		Authenticate: bearer,
		ListTools:    func(context.Context) ([]mcphandler.Tool, error) { return []mcphandler.Tool{echoTool}, nil },
	})
	deep := func(n int) string { return strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n) }
	longID := `"` + strings.Repeat("x", 300) + `"`
	for _, tc := range []struct {
		name, body string
		code       int
		echoID     bool
	}{
		{"repeated key then a syntax error", `{"jsonrpc":"2.0","id":1,"method":"ping","method":"ping",}`, -32700, false},
		{"deeper than encoding/json reads", `{"jsonrpc":"2.0","id":1,"method":"ping","params":` + deep(10001) + `}`, -32700, false},
		{"repeated key and a wrong version", `{"jsonrpc":"1.0","jsonrpc":"1.0","id":1,"method":"ping"}`, -32600, true},
		{"repeated key and a bad id", `{"jsonrpc":"2.0","id":[1],"method":"ping","method":"ping"}`, -32600, false},
		{"repeated key and a long id", `{"jsonrpc":"2.0","id":` + longID + `,"method":"ping","x":1,"x":2}`, -32600, false},
		{"repeated envelope key", `{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"ping"}`, -32600, true},
		{"repeated params key", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","name":"echo"}}`, -32602, true},
		{"too deep and repeated", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":` + deep(200) + `,"x":1,"x":2}}`, -32602, true},
		{"too deep", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":` + deep(200) + `}}`, -32602, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest("POST", "/", strings.NewReader(tc.body))
			req.Header.Set("Authorization", "Bearer acme-viewer")
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			var m struct {
				ID    json.RawMessage
				Error *struct{ Code int }
			}
			if w.Code != http.StatusBadRequest || json.Unmarshal(w.Body.Bytes(), &m) != nil || m.Error == nil || m.Error.Code != tc.code {
				t.Fatalf("status %d, body %.300s; want 400 with %d", w.Code, w.Body.Bytes(), tc.code)
			}
			if echoed := string(m.ID) == "1"; echoed != tc.echoID {
				t.Fatalf("id echoed %v (%s), want %v", echoed, m.ID, tc.echoID)
			}
		})
	}
}
