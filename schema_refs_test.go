package mcphandler

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// fanOut returns a schema of n definitions, each using the previous one
// twice: 2^(n-1) paths to the first.
func fanOut(n int) string {
	defs := []string{`"d0":{"type":"integer"}`}
	for i := 1; i < n; i++ {
		defs = append(defs, fmt.Sprintf(`"d%d":{"allOf":[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}]}`, i, i-1, i-1))
	}
	return fmt.Sprintf(`{"$defs":{%s},"type":"object","properties":{"n":{"$ref":"#/$defs/d%d"}}}`, strings.Join(defs, ","), n-1)
}

// A host's schema whose references loop would exhaust the validator's
// stack on the first call, killing the process; one that fans out would
// cost exponential time per call. Both are refused before anything is
// validated, with every reference form the check cannot read; the forms
// schema generators use are served and enforced.
func TestSchemaRefs(t *testing.T) {
	for _, tc := range []struct {
		schema string
		loops  string // a word of the reason; "" when served
	}{
		{`{"$ref":"#"}`, "loop"},
		{`{"$REF":"#","type":"object"}`, "loop"},
		{`{"type":"object","allOf":[{"$ref":"#"}]}`, "loop"},
		{`{"$ref":"#","properties":{"a":{"$ref":"#"}}}`, "loop"},
		{`{"type":"object","properties":{"next":{"$ref":"#"}}}`, "loop"},
		{`{"$defs":{"a":{"allOf":[{"$ref":"#/$defs/b"}]},"b":{"not":{"$ref":"#/$defs/a"}}},"$ref":"#/$defs/a"}`, "loop"},
		{`{"definitions":{"a":{"if":{"$ref":"#/definitions/a"}}},"$ref":"#/definitions/a"}`, "loop"},
		{fanOut(12), "paths"},
		{`{"$dynamicAnchor":"x","type":"object","properties":{"a":{"$dynamicRef":"#x"}}}`, "$dynamicRef"},
		{`{"$anchor":"x","type":"object","properties":{"a":{"$ref":"#x"}}}`, "not supported"},
		{`{"$id":"https://example.com/root.json","$defs":{"a":{}},"type":"object","properties":{"a":{"$ref":"https://example.com/root.json#/$defs/a"}}}`, "not local"},
		{`{"type":"object","properties":{"a":{"$id":"https://example.com/a","$ref":"#"}}}`, "$id"},
		{`{"$defs":{"a":{"$defs":{"b":{}}}},"properties":{"x":{"$ref":"#/$defs/a/$defs/b"}}}`, "not supported"},
		{fanOut(11), ""},
		{`{"$defs":{"Item":{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}},"type":"object",` +
			`"properties":{"a":{"$ref":"#/$defs/Item"},"b":{"type":"array","items":{"$ref":"#/$defs/Item"}}}}`, ""},
		{`{"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"id":{"type":"string"}},"type":"object",` +
			`"properties":{"a":{"$ref":"#/definitions/id"},"b":{"$ref":"#/definitions/id"}}}`, ""},
		{`{"$defs":{"a/b":{"type":"string"}},"type":"object","properties":{"x":{"$ref":"#/$defs/a~1b"}}}`, ""},
	} {
		si := compileSchema([]byte(tc.schema))
		if si.problem != "" {
			t.Fatalf("%.80s: %s", tc.schema, si.problem)
		}
		switch {
		case tc.loops == "" && si.loops != "":
			t.Errorf("%.80s: refused: %s", tc.schema, si.loops)
		case tc.loops != "" && !strings.Contains(si.loops, tc.loops):
			t.Errorf("%.80s: %q, want a reason with %q", tc.schema, si.loops, tc.loops)
		case tc.loops == "" && si.args.check([]byte(`{"a":{"n":"x"}}`)) == nil && strings.Contains(tc.schema, "Item"):
			t.Errorf("%.80s: a referenced definition is not enforced", tc.schema)
		}
	}
}

// NewTool refuses such a schema at once, where it used to build a tool
// whose first call killed the process.
func TestNewToolRefusesLoopingSchema(t *testing.T) {
	defer func() {
		if v := recover(); v == nil || !strings.Contains(fmt.Sprint(v), "loop") {
			t.Fatalf("NewTool: %v, want a panic saying the references loop", v)
		}
	}()
	NewTool(Tool{Name: "self", InputSchema: []byte(`{"type":"object","allOf":[{"$ref":"#"}]}`)},
		func(context.Context, *ToolCall, struct{}) (string, error) { return "", nil })
}
