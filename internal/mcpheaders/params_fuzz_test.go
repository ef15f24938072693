package mcpheaders

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mcphandler/mcphandler/internal/costguard"
)

// FuzzDecodeHeaderValue: a value is returned unchanged unless it is a
// sentinel, a sentinel decodes to UTF-8 whose encoding is the sentinel
// again (one accepted spelling), and decoding is linear.
func FuzzDecodeHeaderValue(f *testing.F) {
	for _, s := range []string{"", "plain", "=?base64?ZXU=?=", "=?base64?ZXU?=", "=?BASE64?ZXU=?=", "=?base64??=", "=?base64?", "=?base64?/w==?=",
		"=?base64?ZX\nU=?=", "=?base64?ZXU=?=?=", b64("Zürich"), b64(strings.Repeat("é", 1000))} {
		f.Add(s)
	}
	f.Add(b64(strings.Repeat("x", 48<<10)))
	f.Fuzz(func(t *testing.T, v string) {
		var d string
		var err error
		costguard.Check(t, len(v), func() { d, err = DecodeHeaderValue(v) })
		sentinel := len(v) >= len(sentinelPrefix)+len(sentinelSuffix) && strings.HasPrefix(v, sentinelPrefix) && strings.HasSuffix(v, sentinelSuffix)
		switch {
		case !sentinel && (err != nil || d != v):
			t.Fatalf("DecodeHeaderValue(%q) = %q, %v; want it unchanged", v, d, err)
		case sentinel && err == nil && (!utf8.ValidString(d) || b64(d) != v):
			t.Fatalf("DecodeHeaderValue(%q) = %q, which encodes to %q", v, d, b64(d))
		}
	})
}

// paramsFuzzSchema is schemaOK with one parameter per type.
var paramsFuzzSchema = schemaOK

// encodeParam returns the header value a client sends for a JSON value.
func encodeParam(v any) string {
	switch v := v.(type) {
	case string:
		if visibleASCII(v) && strings.Trim(v, " \t") == v && !strings.HasPrefix(v, sentinelPrefix) {
			return v
		}
		return sentinelPrefix + base64.StdEncoding.EncodeToString([]byte(v)) + sentinelSuffix
	case bool:
		return fmt.Sprint(v)
	case json.Number:
		return string(v)
	}
	return ""
}

// FuzzCheckParamHeaders: headers built from the arguments the way a client
// builds them pass, a changed one fails, and checking is linear.
func FuzzCheckParamHeaders(f *testing.F) {
	params, err := ParamHeaders([]byte(paramsFuzzSchema))
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{
		`{"region":"us-west1","limit":42,"dry_run":true,"target":{"project":"alpha","deep":{"k":7}}}`,
		`{"region":"Zürich","limit":4.2e1}`, `{"region":" eu "}`, `{"limit":-0.0}`, `{"opt":null}`, `{"Region":"x"}`,
		`{"target":{"Project":"a","project":"b"}}`, `{"region":{"a":1}}`, `[1]`, `{"limit":1e999999999999999999999}`, ``, `{`,
	} {
		f.Add([]byte(s), "x")
	}
	f.Add([]byte(`{"limit":1e`+strings.Repeat("7", 32<<10)+`}`), "")
	f.Fuzz(func(t *testing.T, args []byte, extra string) {
		var obj map[string]any
		dec := json.NewDecoder(bytes.NewReader(args))
		dec.UseNumber()
		if dec.Decode(&obj) != nil || dec.More() || !json.Valid(args) {
			obj = nil
		}
		h := http.Header{}
		present := []string{}
		clash := false
		for x, path := range params {
			var cur any = obj
			for _, step := range path {
				m, ok := cur.(map[string]any)
				if !ok {
					cur = nil
					break
				}
				for k := range m {
					if k != step && strings.EqualFold(k, step) {
						clash = true
					}
				}
				cur = m[step]
			}
			switch cur.(type) {
			case map[string]any, []any:
				clash = true // never matches: not checked here
			case nil:
			default:
				h.Set(ParamHeaderPrefix+x, encodeParam(cur))
				present = append(present, x)
			}
		}
		var e *HeaderError
		costguard.Check(t, len(args)+len(extra), func() { e = CheckParamHeaders(h, params, args) })
		if clash {
			return
		}
		if e != nil {
			t.Fatalf("CheckParamHeaders(%v, %q) = %q, want success", h, args, e.Message)
		}
		if len(present) > 0 {
			x := present[0]
			h.Set(ParamHeaderPrefix+x, "x"+extra+h.Get(ParamHeaderPrefix+x))
			if e := CheckParamHeaders(h, params, args); e == nil || e.Header != ParamHeaderPrefix+x {
				t.Fatalf("a changed %s header passes for %q: %v", x, args, e)
			}
		}
	})
}

// FuzzParamHeaders: any schema is read without panic in linear time, each
// annotation found is an HTTP token on a non-empty path, unique ignoring
// case; and the headers checked against any arguments never panic.
func FuzzParamHeaders(f *testing.F) {
	f.Add([]byte(schemaOK), []byte(`{"region":"eu"}`), "Mcp-Param-Region", "eu")
	f.Add([]byte(`{"properties":{"a":{"type":"string","x-mcp-header":"A"},"b":{"type":"string","x-mcp-header":"a"}}}`), []byte(`{}`), "", "")
	f.Add([]byte(`{"properties":{"a":{"type":["string","null"],"x-mcp-header":"A"}}}`), []byte(`{"a":null,"A":1}`), "mcp-param-a", "")
	f.Add(deepSchema(2000), []byte(`{}`), "", "")
	f.Fuzz(func(t *testing.T, schema, args []byte, hname, hval string) {
		var params map[string][]string
		var err error
		costguard.Check(t, len(schema), func() { params, err = ParamHeaders(schema) })
		if err != nil {
			if !strings.HasPrefix(err.Error(), "modern: ") {
				t.Fatalf("error %q", err)
			}
			return
		}
		seen := map[string]bool{}
		for x, path := range params {
			if !isToken(x) || len(path) == 0 || seen[strings.ToLower(x)] {
				t.Fatalf("ParamHeaders(%q): bad annotation %q at %v", schema, x, path)
			}
			seen[strings.ToLower(x)] = true
		}
		h := http.Header{}
		if hname != "" {
			h.Add(hname, hval)
		}
		costguard.Check(t, len(schema)+len(args)+len(hname)+len(hval), func() { CheckParamHeaders(h, params, args) })
	})
}

// deepSchema nests properties d deep, with an annotation at the bottom.
func deepSchema(d int) []byte {
	return []byte(strings.Repeat(`{"type":"object","properties":{"a":`, d) + `{"type":"string","x-mcp-header":"A"}` + strings.Repeat(`}}`, d))
}

// TestParamHeadersCost runs the attacker's inputs through the cost guard:
// an exponent of a million digits in a header and its argument (the former
// comparison, on math/big, took seconds), a schema nested to
// encoding/json's limit (the former walker copied its location at every
// level), and many annotations over arguments with many keys (the former
// lookup compared every key for every annotation).
func TestParamHeadersCost(t *testing.T) {
	params, err := ParamHeaders([]byte(schemaOK))
	if err != nil {
		t.Fatal(err)
	}
	exp := "1e" + strings.Repeat("7", 1<<19)
	args := []byte(`{"limit":` + exp + `}`)
	costguard.Check(t, len(args)+len(exp), func() {
		if e := CheckParamHeaders(hdr("Mcp-Param-Limit", exp), params, args); e != nil {
			t.Fatal(e.Message)
		}
	})
	costguard.Check(t, len(args)+len(exp), func() {
		if e := CheckParamHeaders(hdr("Mcp-Param-Limit", exp+"1"), params, args); e == nil {
			t.Fatal("a different exponent matched")
		}
	})

	deep := deepSchema(4990)
	costguard.Check(t, len(deep), func() {
		if p, err := ParamHeaders(deep); err != nil || len(p["A"]) != 4990 {
			t.Fatalf("deep schema: %v", err)
		}
	})

	var schema, body bytes.Buffer
	schema.WriteString(`{"type":"object","properties":{`)
	body.WriteString(`{`)
	h := http.Header{}
	const annotated, keys = 5000, 50000
	for i := range keys {
		if i < annotated {
			fmt.Fprintf(&schema, `"p%d":{"type":"integer","x-mcp-header":"P%d"},`, i, i)
			h.Set(fmt.Sprintf("Mcp-Param-P%d", i), fmt.Sprint(i))
		}
		fmt.Fprintf(&body, `"p%d":%d,`, i, i)
	}
	schema.WriteString(`"z":{"type":"string"}}}`)
	body.WriteString(`"z":""}`)
	params, err = ParamHeaders(schema.Bytes())
	if err != nil || len(params) != annotated {
		t.Fatalf("wide schema: %d, %v", len(params), err)
	}
	costguard.Check(t, schema.Len()+body.Len(), func() {
		if e := CheckParamHeaders(h, params, body.Bytes()); e != nil {
			t.Fatal(e.Message)
		}
	})
}
