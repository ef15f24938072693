package jsonrpc

import (
	"bytes"
	"encoding/json"
	"testing"
)

// fields is what the handler reads of params and _meta with Members.
type fields struct {
	Name      json.RawMessage `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Meta      json.RawMessage `json:"_meta"`
	Version   json.RawMessage `json:"io.modelcontextprotocol/protocolVersion"`
}

// viaMembers decodes obj into fields with Members and KeyIs.
func viaMembers(obj []byte) (fields, bool) {
	var f fields
	ok := Members(obj, func(k, v []byte) bool {
		switch {
		case KeyIs(k, "name"):
			f.Name = v
		case KeyIs(k, "arguments"):
			f.Arguments = v
		case KeyIs(k, "_meta"):
			f.Meta = v
		case KeyIs(k, "io.modelcontextprotocol/protocolVersion"):
			f.Version = v
		}
		return true
	})
	return f, ok
}

// checkMembers compares Members with encoding/json on one valid input.
func checkMembers(t *testing.T, in []byte) {
	var want fields
	err := json.Unmarshal(in, &want)
	got, ok := viaMembers(in)
	if ok != (err == nil) {
		t.Fatalf("%q: Members ok=%v, encoding/json err=%v", in, ok, err)
	}
	if !ok {
		return
	}
	for _, p := range [][2]json.RawMessage{{got.Name, want.Name}, {got.Arguments, want.Arguments}, {got.Meta, want.Meta}, {got.Version, want.Version}} {
		if !bytes.Equal(p[0], p[1]) {
			t.Fatalf("%q: Members read %q, encoding/json %q", in, p[0], p[1])
		}
	}
	if s, ok := String(want.Name); ok {
		var ws string
		if json.Unmarshal(want.Name, &ws) != nil || ws != s {
			t.Fatalf("%q: String(%q) = %q, encoding/json %q", in, want.Name, s, ws)
		}
	} else if len(want.Name) > 0 && want.Name[0] == '"' {
		t.Fatalf("%q: String refused the string %q", in, want.Name)
	}
}

var memberSeeds = []string{
	`{"name":"echo","arguments":{"text":"hello"},"_meta":{"progressToken":1}}`,
	`{"name":"a","NAME":"b"}`,
	`{"name":"a","name":null}`,
	`{"Arguments":[1,{"x":"}"}],"arguMents":"x"}`,
	`{"argument\u0073":{"a":"\"}"},"_META":null}`,
	"{\"argument\u017f\":1}",
	`{ "name" : "\u00e9t\u00e9" , "x" : [ ] , "_meta" : { } }`,
	`{"name":"\ud800"}`,
	"{\"name\":\"caf\xc3\xa9\",\"bad\":\"\xff\"}",
	`{"io.modelcontextprotocol/protocolVersion":"2026-07-28","IO.ModelContextProtocol/ProtocolVersion":5}`,
	`{}`, `[]`, `"x"`, `null`, `12`, `{"a":{"b":{"c":[[["]"]]]}},"name":"deep"}`,
	`{"name":-1.5e3,"arguments":true,"_meta":false}`,
}

func TestMembersAsEncodingJSON(t *testing.T) {
	for _, s := range memberSeeds {
		checkMembers(t, []byte(s))
	}
}

// FuzzMembers: on every valid JSON input, Members, KeyIs and String read
// exactly what encoding/json reads into json.RawMessage and string fields.
func FuzzMembers(f *testing.F) {
	for _, s := range memberSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if !json.Valid(in) {
			return
		}
		checkMembers(t, in)
	})
}

func TestMembersAllocations(t *testing.T) {
	in := []byte(memberSeeds[0])
	if n := testing.AllocsPerRun(100, func() { viaMembers(in) }); n != 0 {
		t.Fatalf("Members allocated %v times", n)
	}
}

// TestKeyIsFolds: KeyIs matches a key as encoding/json matches it to a
// struct field, also when folding changes the key's length (the long s,
// the Kelvin sign) and when the key is only longer or shorter.
func TestKeyIsFolds(t *testing.T) {
	for _, key := range []string{`"jsonrpc"`, `"JSONRPC"`, "\"j\u017fonrpc\"", `"j\u017fonrpc"`, `"jsonrpcx"`, `"jsonrp"`, `"json"`,
		"\"\u212aind\"", `"KIND"`, `"kin"`, `"kinds"`, `""`} {
		var v struct {
			JSONRPC *int `json:"jsonrpc"`
			Kind    *int `json:"kind"`
		}
		if err := json.Unmarshal([]byte(`{`+key+`:1}`), &v); err != nil {
			t.Fatal(err)
		}
		if got, want := KeyIs([]byte(key), "jsonrpc"), v.JSONRPC != nil; got != want {
			t.Errorf("KeyIs(%s, jsonrpc) = %v, encoding/json %v", key, got, want)
		}
		if got, want := KeyIs([]byte(key), "kind"), v.Kind != nil; got != want {
			t.Errorf("KeyIs(%s, kind) = %v, encoding/json %v", key, got, want)
		}
	}
}

// KeyIndex finds what KeyIs finds, first match first, for any key: its
// ASCII shortcut must not change a single answer.
func FuzzKeyIndex(f *testing.F) {
	for _, k := range []string{"jsonrpc", "JSONRPC", "j\u017fonrpc", `j\u017fonrpc`, "_meta", "_META", "\x7fmeta", "progresstoken",
		"PROGRESSTOKEN", "progressToken", "\u212aind", "id", "iD", "Id", "@d", "ix", "name", "NAMe", "arguments", `n\u0061me`, "IO.modelcontextprotocol/PROTOCOLversion", "io.modelcontextprotocol/protocolVersio", ""} {
		f.Add(k)
	}
	names := []string{"jsonrpc", "id", "_meta", "progressToken", "name", "arguments", "kind", "io.modelcontextprotocol/protocolVersion"}
	f.Fuzz(func(t *testing.T, s string) {
		key := []byte(`"` + s + `"`)
		if !json.Valid(key) {
			return
		}
		want := -1
		for i, n := range names {
			if KeyIs(key, n) {
				want = i
				break
			}
		}
		if got := KeyIndex(key, names...); got != want {
			t.Fatalf("KeyIndex(%s) = %d, KeyIs finds %d", key, got, want)
		}
	})
}
