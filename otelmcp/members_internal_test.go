package otelmcp

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// decodeMembers is members by encoding/json's Decoder, for a valid JSON
// object: the keys as they decode and the values as written.
func decodeMembers(obj []byte) (keys []string, values []string, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, nil, false
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, false
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, false
		}
		keys = append(keys, tok.(string))
		values = append(values, string(v))
	}
	return keys, values, true
}

// FuzzMembers holds members, on valid JSON, to what encoding/json's
// Decoder reads of it: an object's members in order, each key as it
// decodes (from its quoted bytes) and each value as written; no member of
// null; false for any other value. On invalid JSON, which members does not
// promise to read, it must not panic, and it costs time linear in its size.
func FuzzMembers(f *testing.F) {
	for _, s := range []string{
		`{"traceparent":"x","tracestate":"a=1","baggage":"u=a"}`, `{ "a" : [1,{"b":"}"}] , "c":null , "d" : -1.5e3 }`,
		`{"a\"b":"\\","\u00e9":true}`, `{"a":{"a":{"a":[]}}}`, `{}`, ` null `, `[]`, `"x"`, `1`, `{`, `{"a"`, `{"a":`, `{"a":"`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, obj []byte) {
		var keys, values []string
		var ok bool
		checkLinear(t, len(obj), func() {
			keys, values = keys[:0], values[:0]
			ok = members(obj, func(k, v []byte) bool {
				keys = append(keys, string(k))
				values = append(values, string(v))
				return true
			})
		})
		if !json.Valid(obj) {
			return
		}
		for i, k := range keys {
			if json.Unmarshal([]byte(k), &keys[i]) != nil {
				t.Fatalf("members(%q): key %s does not decode", obj, k)
			}
		}
		if bytes.Equal(bytes.TrimSpace(obj), []byte("null")) {
			if !ok || len(keys) != 0 {
				t.Fatalf("members(%q) = %v with keys %q, want true and none", obj, ok, keys)
			}
			return
		}
		wantKeys, wantValues, wantOK := decodeMembers(obj)
		if ok != wantOK || strings.Join(keys, "\x00") != strings.Join(wantKeys, "\x00") || strings.Join(values, "\x00") != strings.Join(wantValues, "\x00") || len(keys) != len(wantKeys) {
			t.Fatalf("members(%q) = %v %q %q, encoding/json reads %v %q %q", obj, ok, keys, values, wantOK, wantKeys, wantValues)
		}
	})
}

// TestMembersStops: fn returning false ends the walk, and members still
// reports the object as one.
func TestMembersStops(t *testing.T) {
	n := 0
	if !members([]byte(`{"a":1,"b":2,"c":3}`), func(k, v []byte) bool { n++; return string(k) != `"b"` }) || n != 2 {
		t.Errorf("members after fn returned false at the second member: %d calls, want 2", n)
	}
}

// FuzzJSONString holds jsonString to json.Unmarshal into a string: the
// same string for a JSON string, not ok for anything else.
func FuzzJSONString(f *testing.F) {
	for _, s := range []string{`"x"`, `"\u00e9"`, `"é"`, `"a\"b"`, `"\ud800"`, `null`, `1`, `"`, ``, `"\xff"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		if !json.Valid(v) || len(bytes.TrimSpace(v)) != len(v) {
			return // jsonString reads values members found in valid JSON, without space
		}
		got, ok := jsonString(v)
		var want string
		wantOK := len(v) > 0 && v[0] == '"' && json.Unmarshal(v, &want) == nil
		if ok != wantOK || got != want {
			t.Fatalf("jsonString(%q) = %q, %v; json.Unmarshal gives %q, %v", v, got, ok, want, wantOK)
		}
	})
}
