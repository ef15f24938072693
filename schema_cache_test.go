package mcphandler

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/mcphandler/mcphandler/internal/canon"
)

// FuzzCompileSchema: a host's schema bytes (maybe built from tenants'
// input) never panic the handler; a schema it serves is a JSON object the
// wire can carry; and for any arguments, the compiled validator (fast
// path first) decides exactly as the full validator does.
func FuzzCompileSchema(f *testing.F) {
	for _, s := range append(flatSchemas[:len(flatSchemas):len(flatSchemas)],
		`{"type":"object",`, `null`, `[{"type":"object"}]`, `{"type":"object","type":"string"}`,
		`{"type":"object","properties":{"a":{"type":"string","pattern":"(?<=x)a"}}}`,
		`{"$ref":"#/$defs/missing"}`, `{"$ref":"#","properties":{"a":{"$ref":"#"}}}`,
		`{"type":"object","properties":{"a":{"type":"object","x-mcp-header":"A"}}}`,
		`{"type":"object","properties":{"r":{"type":"string","x-mcp-header":"Region"}}}`,
		`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","dependencies":{"a":["b"]}}`,
		` {"type":"object","properties":{"n":{"type":"integer","minimum":1}},"required":["n"]} `) {
		f.Add(s, `{"n":1,"text":"x","a":"b"}`)
	}
	f.Fuzz(func(t *testing.T, schema, args string) {
		si := compileSchema([]byte(schema))
		if si.problem != "" {
			return
		}
		if canon.Check([]byte(schema), canon.Limits{}) != nil || bytes.TrimLeft([]byte(schema), " \t\r\n")[0] != '{' {
			t.Fatalf("served a schema the wire cannot carry as an object: %q", schema)
		}
		if si.args == nil || canon.Check([]byte(args), canon.Limits{}) != nil || !bytes.HasPrefix([]byte(args), []byte("{")) {
			return
		}
		var v any
		if err := json.Unmarshal([]byte(args), &v); err != nil {
			t.Fatal(err)
		}
		got, want := si.args.check([]byte(args)) == nil, si.args.full.Validate(v) == nil
		if got != want {
			t.Fatalf("schema %s, arguments %s: the validator says %v, the full validator %v", schema, args, got, want)
		}
	})
}
