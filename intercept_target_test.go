package mcphandler

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unsafe"

	"github.com/mcphandler/mcphandler/internal/costguard"
)

// requestTargetDecoded is requestTarget by encoding/json, as it was before
// it walked the params' members.
func requestTargetDecoded(method string, params json.RawMessage) (string, json.RawMessage) {
	if len(params) == 0 || params[0] != '{' || !bytes.Contains(params, []byte(`"_meta"`)) {
		return "", nil
	}
	var p struct {
		Name string          `json:"name"`
		URI  string          `json:"uri"`
		Meta json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(params, &p) != nil {
		return "", nil
	}
	if len(p.Meta) == 0 || p.Meta[0] != '{' {
		p.Meta = nil
	}
	switch method {
	case "tools/call", "prompts/get":
		return p.Name, p.Meta
	case "resources/read", "resources/subscribe", "resources/unsubscribe":
		return p.URI, p.Meta
	}
	return "", p.Meta
}

// FuzzRequestTarget holds requestTarget to what json.Unmarshal reads from
// the same valid params (the only ones the handler passes it): the same
// target and _meta, never one where decoding fails.
func FuzzRequestTarget(f *testing.F) {
	for _, s := range []string{
		`{"name":"echo","_meta":{"traceparent":"x"}}`, `{"NAME":"a","name":null,"_meta":{}}`,
		`{"name":1,"_meta":{}}`, `{"uri":"file:///a","_meta":null}`, `{"_meta":[],"name":"x"}`,
		`{"_meta":{"a":1},"_META":{"b":2}}`, `{"n\u0061me":"esc","_meta":{}}`, `{"name":"\u00e9\ud800","_meta":{}}`,
		`{"arguments":{"name":"inner","_meta":{}},"name":"outer"}`, `{"ſame":"x","_meta":{}}`, `{"name":"a","name":"b","_meta":{}}`,
	} {
		for _, m := range []string{"tools/call", "resources/read", "ping"} {
			f.Add(m, []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, method string, params []byte) {
		if !json.Valid(params) {
			return
		}
		var gt string
		var gm json.RawMessage
		costguard.Check(t, len(params), func() { gt, gm = requestTarget(method, params, nil) })
		wt, wm := requestTargetDecoded(method, params)
		if gt != wt || !bytes.Equal(gm, wm) || (gm == nil) != (wm == nil) {
			t.Fatalf("requestTarget(%q, %s) = %q, %s; json.Unmarshal reads %q, %s", method, params, gt, gm, wt, wm)
		}
	})
}

// TestRequestTargetCost: the params an attacker shapes worst for the walk
// — a MiB of members, of nesting, of one string, of escapes — cost time
// linear in their size.
func TestRequestTargetCost(t *testing.T) {
	const n = 1 << 20
	wide := `{"_meta":{},` + strings.Repeat(`"a":1,`, n/6) + `"name":"x"}`
	deep := `{"_meta":` + strings.Repeat(`{"a":`, n/10) + `1` + strings.Repeat(`}`, n/10) + `,"name":"x"}`
	long := `{"_meta":{},"name":"` + strings.Repeat("x", n) + `"}`
	escaped := `{"_meta":{},"name":"` + strings.Repeat(`\u00e9`, n/6) + `"}`
	for _, p := range []string{wide, deep, long, escaped} {
		costguard.Check(t, len(p), func() { requestTarget("tools/call", json.RawMessage(p), nil) })
	}
}

// Every intercepted request allocates one interception: it stays within
// the 512-byte size class (504 bytes: a word more fits, a field of two
// rounds it up to 576).
func TestInterceptionSize(t *testing.T) {
	if n := unsafe.Sizeof(interception{}); n > 512 {
		t.Fatalf("interception is %d bytes, want at most 512", n)
	}
}
