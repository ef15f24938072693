package mcpheaders

import (
	"net/http"
	"reflect"
	"strings"
	"testing"
)

func TestParamHeaders(t *testing.T) {
	got, err := ParamHeaders([]byte(schemaOK))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"Region":     {"region"},
		"Limit":      {"limit"},
		"Dry-Run":    {"dry_run"},
		"Opt":        {"opt"},
		"Project.Id": {"target", "project"},
		"K":          {"target", "deep", "k"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ParamHeaders = %v, want %v", got, want)
	}

	for _, s := range []string{`{}`, `{"type":"object"}`, `{"type":"object","properties":{"a":{"type":"string"}}}`, `{"properties":{"a":true}}`} {
		got, err := ParamHeaders([]byte(s))
		if err != nil || got != nil {
			t.Errorf("ParamHeaders(%s) = %v, %v; want nil, nil", s, got, err)
		}
	}
	// Annotation-looking data is not an annotation.
	data := `{"type":"object","properties":{"a":{"type":"object","default":{"x-mcp-header":"!"},"enum":[{"x-mcp-header":""}]}}}`
	if got, err := ParamHeaders([]byte(data)); err != nil || got != nil {
		t.Errorf("annotation inside data: %v, %v", got, err)
	}
}

func TestParamHeadersInvalid(t *testing.T) {
	prop := func(p string) string { return `{"type":"object","properties":{"a":` + p + `}}` }
	cases := map[string]string{
		"not JSON":       `{`,
		"not object":     `[]`,
		"null":           `null`,
		"empty value":    prop(`{"type":"string","x-mcp-header":""}`),
		"non-string":     prop(`{"type":"string","x-mcp-header":42}`),
		"null value":     prop(`{"type":"string","x-mcp-header":null}`),
		"space":          prop(`{"type":"string","x-mcp-header":"My Region"}`),
		"colon":          prop(`{"type":"string","x-mcp-header":"A:B"}`),
		"slash":          prop(`{"type":"string","x-mcp-header":"A/B"}`),
		"non-ASCII":      prop(`{"type":"string","x-mcp-header":"Régión"}`),
		"control":        prop(`{"type":"string","x-mcp-header":"A\u0001"}`),
		"number type":    prop(`{"type":"number","x-mcp-header":"A"}`),
		"object type":    prop(`{"type":"object","x-mcp-header":"A"}`),
		"array type":     prop(`{"type":"array","x-mcp-header":"A"}`),
		"no type":        prop(`{"x-mcp-header":"A"}`),
		"two types":      prop(`{"type":["string","integer"],"x-mcp-header":"A"}`),
		"null only":      prop(`{"type":["null"],"x-mcp-header":"A"}`),
		"root":           `{"type":"string","x-mcp-header":"A"}`,
		"duplicate":      `{"properties":{"a":{"type":"string","x-mcp-header":"Region"},"b":{"type":"string","x-mcp-header":"region"}}}`,
		"duplicate deep": `{"properties":{"a":{"type":"string","x-mcp-header":"R"},"o":{"type":"object","properties":{"b":{"type":"integer","x-mcp-header":"r"}}}}}`,
		"items":          prop(`{"type":"array","items":{"type":"string","x-mcp-header":"A"}}`),
		"items list":     prop(`{"type":"array","items":[{"type":"string","x-mcp-header":"A"}]}`),
		"prefixItems":    prop(`{"type":"array","prefixItems":[{"type":"string","x-mcp-header":"A"}]}`),
		"allOf":          `{"allOf":[{"properties":{"a":{"type":"string","x-mcp-header":"A"}}}]}`,
		"anyOf":          prop(`{"anyOf":[{"type":"string","x-mcp-header":"A"}]}`),
		"oneOf":          prop(`{"oneOf":[{"type":"string","x-mcp-header":"A"}]}`),
		"not":            prop(`{"not":{"type":"string","x-mcp-header":"A"}}`),
		"if/then":        `{"if":{},"then":{"properties":{"a":{"type":"string","x-mcp-header":"A"}}}}`,
		"$defs":          `{"$defs":{"r":{"type":"string","x-mcp-header":"A"}},"properties":{"a":{"$ref":"#/$defs/r"}}}`,
		"definitions":    `{"definitions":{"r":{"type":"string","x-mcp-header":"A"}}}`,
		"additionalProp": `{"additionalProperties":{"type":"string","x-mcp-header":"A"}}`,
		"patternProps":   `{"patternProperties":{"^a":{"type":"string","x-mcp-header":"A"}}}`,
		"under items":    prop(`{"type":"array","items":{"type":"object","properties":{"b":{"type":"string","x-mcp-header":"A"}}}}`),
	}
	for name, s := range cases {
		if got, err := ParamHeaders([]byte(s)); err == nil {
			t.Errorf("%s: accepted, got %v", name, got)
		} else if !strings.HasPrefix(err.Error(), "modern: ") {
			t.Errorf("%s: error %q lacks the modern: prefix", name, err)
		}
	}
}

func TestCheckParamHeaders(t *testing.T) {
	params, err := ParamHeaders([]byte(schemaOK))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		h    http.Header
		args string
		bad  string // header expected in the error, "" for success
		msg  string
	}{
		{"all present", hdr("Mcp-Param-Region", "us-west1", "Mcp-Param-Limit", "42", "Mcp-Param-Dry-Run", "true", "Mcp-Param-Project.Id", "alpha", "Mcp-Param-K", "7"),
			`{"region":"us-west1","limit":42,"dry_run":true,"target":{"project":"alpha","deep":{"k":7}}}`, "", ""},
		{"none annotated present", nil, `{"query":"x"}`, "", ""},
		{"no arguments", nil, ``, "", ""},
		{"null arguments", nil, `null`, "", ""},
		{"non-object arguments", nil, `[1,2]`, "", ""},
		{"invalid arguments left to decoding", nil, `{"region":`, "", ""},
		{"null argument, no header", nil, `{"region":null,"opt":null}`, "", ""},
		{"null parent, no header", nil, `{"target":null}`, "", ""},
		{"non-object parent, no header", nil, `{"target":"alpha"}`, "", ""},
		{"case-insensitive names", hdr("mcp-param-region", "eu", "MCP-PARAM-LIMIT", "1"), `{"region":"eu","limit":1}`, "", ""},
		{"canonical names", http.Header{"Mcp-Param-Dry-Run": {"false"}}, `{"dry_run":false}`, "", ""},
		{"surrounding whitespace trimmed", hdr("Mcp-Param-Region", "  eu \t"), `{"region":"eu"}`, "", ""},
		{"inner space", hdr("Mcp-Param-Region", "new york"), `{"region":"new york"}`, "", ""},
		{"empty string", hdr("Mcp-Param-Region", ""), `{"region":""}`, "", ""},
		{"base64 string", hdr("Mcp-Param-Region", b64("Zürich")), `{"region":"Zürich"}`, "", ""},
		{"base64 leading space", hdr("Mcp-Param-Region", b64(" eu")), `{"region":" eu"}`, "", ""},
		{"base64 control", hdr("Mcp-Param-Region", b64("a\tb")), `{"region":"a\tb"}`, "", ""},
		{"base64 sentinel-looking value", hdr("Mcp-Param-Region", b64("=?base64?eA==?=")), `{"region":"=?base64?eA==?="}`, "", ""},
		{"literal BASE64 sentinel", hdr("Mcp-Param-Region", "=?BASE64?ZXU=?="), `{"region":"=?BASE64?ZXU=?="}`, "", ""},
		{"escaped body string", hdr("Mcp-Param-Region", "eu"), `{"region":"\u0065u"}`, "", ""},
		{"integer 42.0 body", hdr("Mcp-Param-Limit", "42"), `{"limit":42.0}`, "", ""},
		{"integer exponent body", hdr("Mcp-Param-Limit", "42"), `{"limit":4.2e1}`, "", ""},
		{"integer negative", hdr("Mcp-Param-Limit", "-17"), `{"limit":-17}`, "", ""},
		{"integer zero", hdr("Mcp-Param-Limit", "0"), `{"limit":-0.0}`, "", ""},
		{"integer leading zeros", hdr("Mcp-Param-Limit", "007"), `{"limit":7}`, "", ""},
		{"integer base64", hdr("Mcp-Param-Limit", b64("42")), `{"limit":42}`, "", ""},
		{"large integer exact", hdr("Mcp-Param-Limit", "9007199254740993"), `{"limit":9007199254740993}`, "", ""},
		{"boolean false", hdr("Mcp-Param-Dry-Run", "false"), `{"dry_run":false}`, "", ""},
		{"nullable present", hdr("Mcp-Param-Opt", "v"), `{"opt":"v"}`, "", ""},
		{"deep", hdr("Mcp-Param-K", "3"), `{"target":{"deep":{"k":3}}}`, "", ""},
		{"unknown Mcp-Param ignored", hdr("Mcp-Param-Other", "x"), `{}`, "", ""},

		{"missing", nil, `{"region":"eu"}`, "Mcp-Param-Region", "Header mismatch: missing Mcp-Param-Region header for argument 'region'"},
		{"missing nested", nil, `{"target":{"project":"a"}}`, "Mcp-Param-Project.Id", "argument 'target.project'"},
		{"missing for false", nil, `{"dry_run":false}`, "Mcp-Param-Dry-Run", "missing"},
		{"missing for empty string", nil, `{"region":""}`, "Mcp-Param-Region", "missing"},
		{"mismatch", hdr("Mcp-Param-Region", "us"), `{"region":"eu"}`, "Mcp-Param-Region", "Header mismatch: Mcp-Param-Region header 'us' does not match body 'eu'"},
		{"value case-sensitive", hdr("Mcp-Param-Region", "EU"), `{"region":"eu"}`, "Mcp-Param-Region", "does not match"},
		{"whitespace must be encoded", hdr("Mcp-Param-Region", " eu"), `{"region":" eu"}`, "Mcp-Param-Region", "does not match"},
		{"literal BASE64 not decoded", hdr("Mcp-Param-Region", "=?BASE64?ZXU=?="), `{"region":"eu"}`, "Mcp-Param-Region", "does not match"},
		{"invalid base64", hdr("Mcp-Param-Region", "=?base64?ZXU?=") /* no padding */, `{"region":"eu"}`, "Mcp-Param-Region", "not valid base64"},
		{"non-ASCII raw", hdr("Mcp-Param-Region", "Zürich"), `{"region":"Zürich"}`, "Mcp-Param-Region", "invalid characters"},
		{"control raw", hdr("Mcp-Param-Region", "a\tb"), `{"region":"a\tb"}`, "Mcp-Param-Region", "invalid characters"},
		{"invalid characters with absent arg", hdr("Mcp-Param-Region", "\x7f"), `{}`, "Mcp-Param-Region", "invalid characters"},
		{"repeated", hdr("Mcp-Param-Region", "eu", "mcp-param-region", "eu"), `{"region":"eu"}`, "Mcp-Param-Region", "multiple"},
		{"unexpected for null", hdr("Mcp-Param-Region", "eu"), `{"region":null}`, "Mcp-Param-Region", "absent or null"},
		{"unexpected for absent", hdr("Mcp-Param-Limit", "1"), `{}`, "Mcp-Param-Limit", "absent or null"},
		{"unexpected without arguments", hdr("Mcp-Param-Limit", "1"), ``, "Mcp-Param-Limit", "absent or null"},
		{"integer mismatch", hdr("Mcp-Param-Limit", "43"), `{"limit":42}`, "Mcp-Param-Limit", "'43' does not match body '42'"},
		{"integer not a number", hdr("Mcp-Param-Limit", "forty-two"), `{"limit":42}`, "Mcp-Param-Limit", "does not match"},
		{"integer hex", hdr("Mcp-Param-Limit", "0x2a"), `{"limit":42}`, "Mcp-Param-Limit", "does not match"},
		{"integer empty", hdr("Mcp-Param-Limit", ""), `{"limit":0}`, "Mcp-Param-Limit", "does not match"},
		{"integer plus", hdr("Mcp-Param-Limit", "+42"), `{"limit":42}`, "Mcp-Param-Limit", "does not match"},
		{"large integer off by one", hdr("Mcp-Param-Limit", "9007199254740992"), `{"limit":9007199254740993}`, "Mcp-Param-Limit", "does not match"},
		{"number vs string body", hdr("Mcp-Param-Limit", "42"), `{"limit":"042"}`, "Mcp-Param-Limit", "does not match"},
		{"boolean case", hdr("Mcp-Param-Dry-Run", "True"), `{"dry_run":true}`, "Mcp-Param-Dry-Run", "does not match"},
		{"boolean as number", hdr("Mcp-Param-Dry-Run", "1"), `{"dry_run":true}`, "Mcp-Param-Dry-Run", "does not match"},
		{"object argument", hdr("Mcp-Param-Region", "x"), `{"region":{"a":1}}`, "Mcp-Param-Region", "not a string, integer or boolean"},
		{"array argument", hdr("Mcp-Param-Region", "x"), `{"region":["x"]}`, "Mcp-Param-Region", "not a string, integer or boolean"},
		{"case-variant key", hdr("Mcp-Param-Region", "eu"), `{"region":"eu","Region":"us"}`, "Mcp-Param-Region", "differs from parameter 'region' only in case"},
		{"case-variant key alone", nil, `{"REGION":"us"}`, "Mcp-Param-Region", "only in case"},
		{"sorted order: Dry-Run before Limit", nil, `{"limit":1,"dry_run":true}`, "Mcp-Param-Dry-Run", "missing"},
	}
	for _, tc := range cases {
		h := tc.h
		if h == nil {
			h = http.Header{}
		}
		e := CheckParamHeaders(h, params, []byte(tc.args))
		if tc.bad == "" {
			if e != nil {
				t.Errorf("%s: unexpected error %q", tc.name, e.Message)
			}
			continue
		}
		if e == nil {
			t.Errorf("%s: no error, want one for %s", tc.name, tc.bad)
			continue
		}
		if e.Header != tc.bad || !strings.Contains(e.Message, tc.msg) || !strings.HasPrefix(e.Message, "Header mismatch: ") {
			t.Errorf("%s: got {%s %q}, want header %s and message containing %q", tc.name, e.Header, e.Message, tc.bad, tc.msg)
		}
	}
	if e := CheckParamHeaders(hdr("Mcp-Param-Region", "x"), nil, []byte(`{"region":"y"}`)); e != nil {
		t.Errorf("no annotations: %q", e.Message)
	}
}

func TestNumEqual(t *testing.T) {
	eq := [][2]string{{"42", "42"}, {"42", "42.0"}, {"42", "4.2e1"}, {"42", "420e-1"}, {"0", "-0"}, {"-0", "0.0e9"}, {"1e3", "1000"}, {"00", "0"}}
	ne := [][2]string{{"42", "43"}, {"42", "-42"}, {"4", "40"}, {"", "0"}, {"-", "0"}, {"1.", "1"}, {".5", "0.5"}, {"1e", "1"}, {"0x10", "16"}, {"42 ", "42"}, {"Infinity", "1e999"}}
	for _, p := range eq {
		if !numEqual(p[0], p[1]) {
			t.Errorf("numEqual(%q, %q) = false", p[0], p[1])
		}
	}
	for _, p := range ne {
		if numEqual(p[0], p[1]) {
			t.Errorf("numEqual(%q, %q) = true", p[0], p[1])
		}
	}
}

func TestIsToken(t *testing.T) {
	for _, s := range []string{"A", "Region", "x-y_z.1", "!#$%&'*+-.^_`|~", "0"} {
		if !isToken(s) {
			t.Errorf("isToken(%q) = false", s)
		}
	}
	for _, s := range []string{"", " ", "a b", "a:b", "a/b", "(a)", "a,b", `a"b`, "é", "a\x00", "{}", "a=b", "a@b", "[x]", "a?b", "a;b", "a\\b"} {
		if isToken(s) {
			t.Errorf("isToken(%q) = true", s)
		}
	}
}

func TestFoldKey(t *testing.T) {
	words := []string{"", "a", "A", "region", "Region", "REGION", "rEgIoN", "k", "K", "\u212a", "s", "S", "\u017f",
		"ß", "ẞ", "σ", "Σ", "ς", "é", "É", "mcp-param-x", "Mcp-Param-X", "Mcp-Param-\u212a", "ǅ", "Ǆ", "ǆ", "\xff", "\ufffd"}
	for _, a := range words {
		for _, b := range words {
			if got, want := foldKey(a) == foldKey(b), strings.EqualFold(a, b); got != want {
				t.Errorf("foldKey(%q) == foldKey(%q) is %v, EqualFold says %v", a, b, got, want)
			}
		}
	}
}
