package mcphandler

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/mcphandler/mcphandler/internal/jsonrpc"
)

// stringMember, checkStateless's former walk and the reference for
// paramString.last, returns the string member key of the object params, as
// json.Unmarshal into a struct with that string field would set it when
// its error is ignored: the last string value of a matching key, or "".
func stringMember(params []byte, key string) string {
	var s string
	jsonrpc.Members(params, func(k, v []byte) bool {
		if jsonrpc.KeyIs(k, key) {
			if got, ok := jsonrpc.String(v); ok {
				s = got
			}
		}
		return true
	})
	return s
}

// metaMember is statelessMeta's former walk: the last _meta member.
func metaMember(params []byte) json.RawMessage {
	var raw json.RawMessage
	jsonrpc.Members(params, func(k, v []byte) bool {
		if jsonrpc.KeyIs(k, "_meta") {
			raw = v
		}
		return true
	})
	return raw
}

// One walk of params answers each of its readers as that reader's own
// walk did: _meta, the names Mcp-Name is checked against and tools/call's
// params (an interceptor's target is held to json.Unmarshal by
// FuzzRequestTarget), for any object, with repeated,
// folded, escaped, null and wrongly typed members.
func FuzzParamsIndex(f *testing.F) {
	for _, s := range []string{`{}`, `{"name":"echo","arguments":{"text":"hi"},"_meta":{"a":1}}`,
		`{"name":"a","NAME":"b","Name":null}`, `{"name":"a","name":5}`, `{"name":5,"name":"a"}`, `{"name":null}`,
		`{"n\u0061me":"x","uri":"u","URI":7,"_meta":[],"_META":{"b":2}}`, `{"arguments":null,"ARGUMENTS":[1]}`,
		"{\"n\u0061me\":\"k\",\"\u017fame\":1,\"_meta\":{\"_meta\":1}}", `{"name":"x\ud800y"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		if !json.Valid(p) || len(bytes.TrimLeft(p, " \t\r\n")) == 0 || bytes.TrimLeft(p, " \t\r\n")[0] != '{' {
			return
		}
		p = bytes.TrimLeft(p, " \t\r\n")
		var x paramsIndex
		indexParams(p, &x)
		if got, want := x.meta, metaMember(p); !bytes.Equal(got, want) {
			t.Fatalf("%s: _meta %s, want %s", p, got, want)
		}
		if got, want := x.name.last, stringMember(p, "name"); got != want {
			t.Fatalf("%s: name %q, want %q", p, got, want)
		}
		if got, want := x.uri.last, stringMember(p, "uri"); got != want {
			t.Fatalf("%s: uri %q, want %q", p, got, want)
		}
		var got, want callParams
		gok, wok := x.callParams(&got), decodeCallParams(p, &want)
		if gok != wok || gok && (got.Name != want.Name || !bytes.Equal(got.Arguments, want.Arguments) || !bytes.Equal(got.Meta, want.Meta)) {
			t.Fatalf("%s: call params %+v %v, want %+v %v", p, got, gok, want, wok)
		}
	})
}

// The index answers only for the very params it walked: a message the
// handler builds or replays with other params (even equal bytes elsewhere,
// or a part of them) is read by its own walk.
func TestParamsIndexOnlyForItsParams(t *testing.T) {
	params := []byte(`{"name":"echo","arguments":{"text":"hi"},"_meta":{"a":1}}`)
	m := &requestMeta{}
	indexParams(params, &m.params)
	if m.of(params) != &m.params {
		t.Fatal("the index does not answer for the params it walked")
	}
	replayed := bytes.Clone(params)
	for name, p := range map[string][]byte{"a copy": replayed, "a prefix": params[:len(params)-1], "empty": nil,
		"other params": []byte(`{"name":"delete_thing"}`)} {
		if m.of(p) != nil {
			t.Fatalf("the index answers for %s", name)
		}
	}
	var none *requestMeta
	if none.of(params) != nil {
		t.Fatal("a request without _meta has an index")
	}
}
