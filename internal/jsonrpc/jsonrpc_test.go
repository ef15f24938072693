package jsonrpc

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/mcphandler/mcphandler/internal/canon"
	"github.com/mcphandler/mcphandler/internal/costguard"
)

var messages = []string{
	`{"jsonrpc":"2.0","id":1,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"a","arguments":{"b":[1,2]}}}`,
	`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
	`{"jsonrpc":"2.0","id":7,"result":{"ok":true}}`,
	`{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"no"}}`,
	`{"jsonrpc":"1.0","id":1,"method":"x"}`, `{"jsonrpc":"2.0","id":null,"method":"x"}`, `{"jsonrpc":"2.0","id":1.5,"method":"x"}`,
	`{"jsonrpc":"2.0","id":1,"method":"x","params":[1]}`, `{"jsonrpc":"2.0","id":1,"method":"x","params":null}`,
	`{"jsonrpc":"2.0","id":1,"result":1,"error":{"code":1,"message":""}}`, `{"jsonrpc":"2.0","id":-0,"method":"x"}`,
	`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"x"}]`, `[]`, `[1,"a",{}]`, `"str"`, `1`, `{`, ``, `{"id":1,"id":2}`,
}

func TestDecode(t *testing.T) {
	var m Message
	if err := Decode([]byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`), &m); err != nil {
		t.Fatal(err)
	}
	if k, e := m.Validate(); e != nil || k != KindRequest {
		t.Fatalf("Validate = %v, %v", k, e)
	}
	var syn *json.SyntaxError
	if err := Decode([]byte(`{"jsonrpc":`), &Message{}); !errors.As(err, &syn) {
		t.Errorf("truncated: %v, want a *json.SyntaxError", err)
	}
	if err := Decode([]byte(`[1]`), &Message{}); !errors.Is(err, ErrNotObject) {
		t.Errorf("array: %v, want ErrNotObject", err)
	}
}

// FuzzDecode: no input panics Decode, Validate, DecodeBatch or the
// encoders; a syntax error is reported exactly for invalid JSON; what
// Validate accepts has a valid id, which the encoders echo into valid
// JSON; and it all costs linear time.
func FuzzDecode(f *testing.F) {
	for _, s := range messages {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":"` + strings.Repeat(`\u00e9`, 8<<10) + `"}}`))
	f.Add([]byte(`[` + strings.Repeat(`{"jsonrpc":"2.0","method":"x"},`, 2000) + `1]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var m Message
		var err error
		var kind Kind
		var verr *Error
		costguard.Check(t, len(body), func() {
			m = Message{}
			if err = Decode(body, &m); err == nil {
				kind, verr = m.Validate()
			}
		})
		checkAsEncodingJSON(t, body)
		var syn *json.SyntaxError
		switch {
		case err != nil && errors.As(err, &syn) != !json.Valid(body):
			t.Fatalf("Decode(%q) = %v; json.Valid says %v", body, err, json.Valid(body))
		case err != nil && !errors.As(err, &syn) && !errors.Is(err, ErrNotObject):
			t.Fatalf("Decode(%q) = %v, neither a syntax error nor ErrNotObject", body, err)
		case err == nil && verr == nil:
			if kind != KindNotification && !ValidID(m.ID) {
				t.Fatalf("Validate accepted id %q", m.ID)
			}
			if kind == KindRequest || kind == KindNotification {
				if m.Method == "" || len(m.Params) > 0 && m.Params[0] != '{' {
					t.Fatalf("Validate accepted method %q params %q", m.Method, m.Params)
				}
			}
			if kind != KindNotification {
				out := AppendError(nil, m.ID, &Error{Code: CodeInvalidParams, Message: m.Method, Data: m.Params})
				var back struct {
					ID    json.RawMessage `json:"id"`
					Error Error           `json:"error"`
				}
				if json.Unmarshal(out, &back) != nil || back.Error.Message != m.Method || string(back.ID) != string(m.ID) {
					t.Fatalf("AppendError echoed %q as %q", m.Method, out)
				}
				if req := AppendRequest(nil, m.ID, m.Method, m.Params); !json.Valid(req) {
					t.Fatalf("AppendRequest = %q", req)
				}
			}
		case err == nil && verr != nil && verr.Code != CodeInvalidRequest:
			t.Fatalf("Validate error %v", verr)
		}
		if json.Valid(body) && IsBatch(body) {
			var elems []json.RawMessage
			var berr error
			costguard.Check(t, len(body), func() { elems, berr = DecodeBatch(body) })
			if berr == nil {
				for _, e := range elems {
					var em Message
					if Decode(e, &em) == nil {
						em.Validate()
					}
				}
			}
		}
	})
}

// checkAsEncodingJSON: Decode reads body exactly as json.Unmarshal does.
func checkAsEncodingJSON(t *testing.T, body []byte) {
	var got, want Message
	gerr, werr := Decode(body, &got), decodeSlow(body, &want)
	var gsyn, wsyn *json.SyntaxError
	if (gerr == nil) != (werr == nil) || errors.As(gerr, &gsyn) != errors.As(werr, &wsyn) || errors.Is(gerr, ErrNotObject) != errors.Is(werr, ErrNotObject) {
		t.Fatalf("Decode(%q) = %v, encoding/json %v", body, gerr, werr)
	}
	if gerr == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("Decode(%q) = %+v, encoding/json %+v", body, got, want)
	}
	if json.Valid(body) { // DecodeValid is Decode of checked bytes
		var vgot Message
		verr := DecodeValid(body, &vgot)
		if (verr == nil) != (gerr == nil) || errors.Is(verr, ErrNotObject) != errors.Is(gerr, ErrNotObject) || !reflect.DeepEqual(vgot, got) {
			t.Fatalf("DecodeValid(%q) = %+v, %v; Decode %+v, %v", body, vgot, verr, got, gerr)
		}
	}
	// DecodeMembers is Decode of an object whose members canon found.
	var mem [4][4]int32
	if n, err := canon.CheckMembers(body, canon.Limits{MaxDepth: 10000}, mem[:]); err == nil && n > 0 && n <= len(mem) {
		var mgot Message
		merr := DecodeMembers(body, mem[:n], &mgot)
		if (merr == nil) != (gerr == nil) || errors.Is(merr, ErrNotObject) != errors.Is(gerr, ErrNotObject) || !reflect.DeepEqual(mgot, got) {
			t.Fatalf("DecodeMembers(%q) = %+v, %v; Decode %+v, %v", body, mgot, merr, got, gerr)
		}
	}
}

func TestDecodeAsEncodingJSON(t *testing.T) {
	for _, s := range append(slices.Clone(messages),
		`{"jsonrpc":"2.0","METHOD":"a","method":"tools/call","id":1,"Params":{"x":1}}`,
		`{"jsonrpc":null,"id":null,"method":null,"params":null,"result":null,"error":null}`,
		`{"error":{"code":1},"ERROR":{"message":"x"}}`, `{"error":{"code":"x"}}`, `{"error":5}`,
		`{"method":5}`, `{"jsonrpc":"2.\u0030","method":"tools\/call"}`, `null`, `[]`, `{`, ` {"id":"\u00e9"} `,
		"{\"method\":\"caf\xc3\xa9\xff\"}",
		// Keys told by their length and ASCII case: folded, near misses,
		// bytes whose bit 0x20 is a letter's, and non-ASCII folds.
		`{"JSONRPC":"2.0","Id":1,"MeThOd":"x","PARAMS":{},"Result":2,"ERROR":{"code":3}}`,
		`{"ix":1,"methox":"a","paramz":1,"resulT":5,"errox":1,"jsonrpx":"2.0","i":1,"idd":2}`,
		"{\"\x09d\":1,\"\x0dethod\":\"a\",\"@d\":2,\"m@thod\":\"b\",\"\x10arams\":{}}",
		`{"method":"a","meth\u006fd":"b","ſ":1,"jſonrpc":"2.0","\u0049D":7}`,
		"{\"jſonrpc\":\"2.0\",\"\u212a\":1,\"ıd\":3,\"İd\":4}") {
		checkAsEncodingJSON(t, []byte(s))
	}
}

func TestDecodeAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	body := []byte(`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`)
	m := new(Message)
	if n := testing.AllocsPerRun(100, func() { *m = Message{}; Decode(body, m) }); n > 1 {
		t.Fatalf("Decode allocated %v times, want once (the copy of the body)", n)
	}
	if n := testing.AllocsPerRun(100, func() { *m = Message{}; DecodeValid(body, m) }); n > 1 {
		t.Fatalf("DecodeValid allocated %v times, want once (the copy of the body)", n)
	}
}

// The members of a decoded message share one copy of the body: appending
// to one must not overwrite the next.
func TestDecodeMembersDoNotOverlap(t *testing.T) {
	var m Message
	if err := Decode([]byte(`{"id":"a","result":{"x":1},"params":{"y":2},"jsonrpc":"2.0"}`), &m); err != nil {
		t.Fatal(err)
	}
	_ = append(m.ID, "XXXXXXXXXXXXXXXX"...)
	_ = append(m.Result, "XXXXXXXXXXXXXXXX"...)
	if string(m.Result) != `{"x":1}` || string(m.Params) != `{"y":2}` {
		t.Fatalf("an append to a member changed another: result %q, params %q", m.Result, m.Params)
	}
}

// appendString writes what json.Marshal does, for any string, in linear
// time.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "hello", `{"text":"hello"}`, "a\\b", "\x00\x01\b\f\n\r\t\x1f\x7f", "<a href=\"x\">&amp;</a>",
		"café", "\u2028\u2029", "\xff\xfe", "\xe2\x80", "日本語\U0001F600", strings.Repeat(`"\\`, 1000)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var got []byte
		costguard.Check(t, len(s), func() { got = appendString([]byte("x"), s) })
		want, _ := json.Marshal(s)
		if string(got[1:]) != string(want) {
			t.Fatalf("appendString(%q) = %s, json.Marshal %s", s, got[1:], want)
		}
	})
}
