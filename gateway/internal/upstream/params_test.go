package upstream

import (
	"testing"

	"github.com/mcphandler/mcphandler/internal/mcpheaders"
)

// The headers paramHeaders builds pass the library's own server-side
// check, whatever the argument's type.
func TestParamHeadersPassCheck(t *testing.T) {
	schema := []byte(`{"type":"object","properties":{
		"s":{"type":"string","x-mcp-header":"S"},"n":{"type":"integer","x-mcp-header":"N"},
		"b":{"type":"boolean","x-mcp-header":"B"},"o":{"type":"object","properties":{"d":{"type":"string","x-mcp-header":"D"}}}}}`)
	paths, err := mcpheaders.ParamHeaders(schema)
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range []string{
		`{}`, `{"s":"plain","n":-7,"b":false}`, `{"s":" padded ","n":4.2e1}`, `{"s":"=?base64?eA==?="}`,
		`{"s":"tab\there","o":{"d":"日本"}}`, `{"s":null,"n":null,"o":null}`, `{"o":{"d":"x"},"b":true}`,
	} {
		h := paramHeaders(paths, []byte(args))
		if he := mcpheaders.CheckParamHeaders(h, paths, []byte(args)); he != nil {
			t.Errorf("%s: %v gives %v", args, h, he)
		}
	}
	if h := paramHeaders(paths, []byte(`{"s":{"x":1},"n":[1]}`)); len(h) != 0 {
		t.Errorf("an object or array mirrored: %v", h)
	}
}
