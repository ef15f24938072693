package mcphandler

import (
	"mime"
	"net/http"
	"strings"
	"testing"
)

// TestHeaderNamesCanonical: every name the handler reads is in the form
// net/http stores (so Header.Get uses it without a copy) and finds a
// header whichever case the client wrote.
func TestHeaderNamesCanonical(t *testing.T) {
	for _, k := range []string{hdrProtocolVersion, hdrSessionID, hdrContentType, hdrOrigin, hdrAccept} {
		if c := http.CanonicalHeaderKey(k); c != k {
			t.Errorf("%q is not canonical (%q)", k, c)
		}
		h := http.Header{}
		h.Set(strings.ToUpper(k), "a")
		h.Add(strings.ToLower(k), "b")
		if got := h.Get(k); got != "a" {
			t.Errorf("Header.Get(%q) = %q, want the first value", k, got)
		}
		if got := (http.Header{}).Get(k); got != "" {
			t.Errorf("Get of an empty header = %q", got)
		}
		// headerValue reads what Header.Get does, from a header as net/http
		// parses it, an empty or nil one, and one with an empty list.
		for _, hh := range []http.Header{h, {}, nil, {k: {}}, {k: {""}}, {k: {"", "x"}}, {strings.ToLower(k): {"raw"}}} {
			if got, want := headerValue(&http.Request{Header: hh}, k), hh.Get(k); got != want {
				t.Errorf("headerValue(%v, %q) = %q, Header.Get %q", hh, k, got, want)
			}
		}
	}
}

// oldAcceptsType is acceptsType as it was, by strings.ToLower.
func oldAcceptsType(accept, typ string) bool {
	major, _, _ := strings.Cut(typ, "/")
	for part := range strings.SplitSeq(accept, ",") {
		mt, _, _ := strings.Cut(part, ";")
		mt = strings.ToLower(strings.TrimSpace(mt))
		if mt == typ || mt == "*/*" || mt == major+"/*" {
			return true
		}
	}
	return false
}

var acceptAttacks = []string{
	"", "application/json, text/event-stream", "APPLICATION/JSON, Text/Event-Stream", "*/*", "*/*;q=0",
	"application/*", "APPLICATION/*", "text/*", "application/*x", "application/**", "applicatio/*",
	"application/jsonx", "xapplication/json", "application/json;charset=utf-8", " application/json ;q=1 ",
	"application/j\u017fon", "text/event-\u017ftream", "application/\u212ason", "\u212a/*",
	"appl\u0130cation/json", "appl\u0130cation/*", "\u0130/*", "TEXT/\u212a", "application/json\x00", ",,,", ";", "text/event-stream,application/json",
	"application/json , text/plain", "*/json", "application/ json", "application /json",
}

// TestAcceptsTypeAsBefore: the copy-free comparison admits exactly what
// the strings.ToLower one did, odd case, Unicode folds and wildcards
// included, and so does the single pass for several types.
func TestAcceptsTypeAsBefore(t *testing.T) {
	for _, a := range acceptAttacks {
		for _, typ := range []string{"application/json", "text/event-stream"} {
			if got, want := acceptsType(a, typ), oldAcceptsType(a, typ); got != want {
				t.Errorf("acceptsType(%q, %q) = %v, was %v", a, typ, got, want)
			}
		}
		checkAcceptsAll(t, a)
		checkAcceptsAll(t, strings.Repeat(a+",", 100))
	}
}

// The Accept value admitted without parsing is one the former parser
// admits (checkAcceptsAll holds every other shortcut of acceptsAll to it).
func TestUsualAccept(t *testing.T) {
	const usualAccept = "application/json, text/event-stream"
	if !isTypeList(usualAccept, []string{"application/json", "text/event-stream"}) {
		t.Fatalf("%q is not taken for the types joined", usualAccept)
	}
	if !oldAcceptsType(usualAccept, "application/json") || !oldAcceptsType(usualAccept, "text/event-stream") {
		t.Fatalf("%q does not admit both types", usualAccept)
	}
}

// checkAcceptsAll fails t unless acceptsAll of the header value a agrees
// with oldAcceptsType of each type, for one type, two, and a repeated one.
func checkAcceptsAll(t *testing.T, a string) {
	t.Helper()
	r := &http.Request{Header: http.Header{hdrAccept: {a}}}
	j, e := oldAcceptsType(a, "application/json"), oldAcceptsType(a, "text/event-stream")
	for _, c := range []struct {
		types []string
		want  bool
	}{
		{nil, true},
		{[]string{"application/json"}, j},
		{[]string{"text/event-stream"}, e},
		{[]string{"application/json", "text/event-stream"}, j && e},
		{[]string{"text/event-stream", "application/json"}, j && e},
		{[]string{"text/event-stream", "text/event-stream"}, e},
	} {
		if got := acceptsAll(r, c.types...); got != c.want {
			t.Fatalf("acceptsAll(%q, %q) = %v, was %v", a, c.types, got, c.want)
		}
	}
}

func FuzzAcceptsType(f *testing.F) {
	for _, a := range acceptAttacks {
		f.Add(a)
	}
	f.Fuzz(func(t *testing.T, a string) {
		for _, typ := range []string{"application/json", "text/event-stream"} {
			if got, want := acceptsType(a, typ), oldAcceptsType(a, typ); got != want {
				t.Fatalf("acceptsType(%q, %q) = %v, was %v", a, typ, got, want)
			}
		}
		checkAcceptsAll(t, a)
	})
}

// TestContentTypeAsBefore: the shortcut for a bare application/json
// refuses and admits what mime.ParseMediaType did.
func TestContentTypeAsBefore(t *testing.T) {
	for _, ct := range []string{"application/json", "Application/JSON", "application/json; charset=utf-8", "application/json;",
		"application/jsonx", "application/json ", " application/json", "text/json", "", "application/json; a", "application/j\u017fon"} {
		mt, _, err := mime.ParseMediaType(ct)
		want := err == nil && mt == "application/json"
		if got := ct == "application/json" || isJSONMediaType(ct); got != want {
			t.Errorf("Content-Type %q: accepted %v, was %v", ct, got, want)
		}
	}
}

// TestPOSTHeaderChecksAllocs: the header checks of a usual POST allocate
// nothing.
func TestPOSTHeaderChecksAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	r, _ := http.NewRequest("POST", "/", nil)
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json, text/event-stream")
	r.Header.Set("MCP-Protocol-Version", "2025-11-25")
	if n := testing.AllocsPerRun(100, func() {
		if !acceptsAll(r, "application/json", "text/event-stream") || r.Header.Get(hdrContentType) != "application/json" ||
			r.Header.Get(hdrProtocolVersion) == "" {
			t.Fatal("refused")
		}
	}); n != 0 {
		t.Errorf("the header checks allocate %v times", n)
	}
}
