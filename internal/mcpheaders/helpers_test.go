package mcpheaders

import (
	"encoding/base64"
	"net/http"
)

func b64(s string) string { return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(s)) + "?=" }

// hdr builds a Header from name/value pairs without canonicalizing names,
// as a hand-built Header might be.
func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i < len(kv); i += 2 {
		h[kv[i]] = append(h[kv[i]], kv[i+1])
	}
	return h
}

const schemaOK = `{
  "type": "object",
  "properties": {
    "region":  {"type": "string",  "x-mcp-header": "Region"},
    "limit":   {"type": "integer", "x-mcp-header": "Limit"},
    "dry_run": {"type": "boolean", "x-mcp-header": "Dry-Run"},
    "opt":     {"type": ["string", "null"], "x-mcp-header": "Opt"},
    "query":   {"type": "string"},
    "target":  {
      "type": "object",
      "properties": {
        "project": {"type": "string", "x-mcp-header": "Project.Id"},
        "deep": {"type": "object", "properties": {"k": {"type": "integer", "x-mcp-header": "K"}}}
      }
    },
    "x-mcp-header": {"type": "string"}
  },
  "required": ["region"]
}`
