package mcphandler

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzResultJSON feeds arbitrary bytes, as an upstream server could send
// them, to ResultJSON: it never panics, costs time linear in its input,
// and what it accepts is relayed as one valid JSON object with a content
// array, without a resultType or a reserved _meta key, whose isError is
// IsError.
func FuzzResultJSON(f *testing.F) {
	for _, s := range []string{
		`{"content":[]}`, `{"content":[{"type":"text","text":"x"}],"isError":true}`,
		`{"resultType":"complete","content":[],"_meta":{"io.modelcontextprotocol/x":1,"k":2}}`,
		`{"content":[],"_meta":{"io.modelcontextprotocol\u002fx":1}}`, `{"content":[],"Content":[]}`,
		`{"content":[],"structuredContent":{"a":[1,2]}}`, `[]`, `null`, `{"content":{}}`, "",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var r *ToolResult
		var err error
		costGuard(t, len(b), func() { r, err = ResultJSON(b) })
		if err != nil {
			return
		}
		out, err := r.appendJSON(nil)
		if err != nil || !json.Valid(out) {
			t.Fatalf("accepted %q, relays %q (%v)", b, out, err)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatalf("relays %q, not an object: %v", out, err)
		}
		if c, ok := m["content"]; !ok || c[0] != '[' {
			t.Fatalf("relays %q without a content array", out)
		}
		if _, ok := m["resultType"]; ok {
			t.Fatalf("relays %q with a resultType", out)
		}
		var isErr bool
		json.Unmarshal(m["isError"], &isErr)
		if isErr != r.IsError {
			t.Fatalf("relays %q, IsError %v", out, r.IsError)
		}
		var meta map[string]json.RawMessage
		json.Unmarshal(m["_meta"], &meta)
		for k := range meta {
			if strings.HasPrefix(k, reservedMetaPrefix) {
				t.Fatalf("relays %q with reserved key %q", out, k)
			}
		}
	})
}
