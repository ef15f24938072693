package gateway

import (
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"
)

// What reaches the upstream decides which list a caller is served: a
// header the host spelled in lowercase, or in two spellings, still tells
// two callers' credentials apart, for the list cache and the breaker alike.
func TestCacheKeyEveryHeaderSent(t *testing.T) {
	const url = "http://upstream.example/mcp"
	keys := map[[32]byte]string{}
	for name, h := range map[string]http.Header{
		"none":                  {},
		"canonical a":           {"Authorization": {"Bearer a"}},
		"canonical b":           {"Authorization": {"Bearer b"}},
		"lowercase a":           {"authorization": {"Bearer a"}},
		"lowercase b":           {"authorization": {"Bearer b"}},
		"both spellings":        {"authorization": {"Bearer a"}, "Authorization": {"Bearer b"}},
		"two values":            {"Authorization": {"Bearer a", "Bearer b"}},
		"value moved to a name": {"Authorization": {""}, "Bearer a": {""}},
	} {
		for _, k := range [][32]byte{cacheKey("acme", url, h, EraDetect, nil), breakerKey(url, h), scopeKey("acme", url, h)} {
			if other, ok := keys[k]; ok && other != name {
				// The lowercase and canonical spellings of one header
				// are the same request upstream: they may share.
				if !(name[len(name)-1] == other[len(other)-1] && (name[:5] == "lower" || other[:5] == "lower")) {
					t.Fatalf("%q and %q share a key", name, other)
				}
			}
			keys[k] = name
		}
	}
	if cacheKey("acme", url, http.Header{"authorization": {"Bearer a"}}, EraDetect, nil) == cacheKey("acme", url, http.Header{"authorization": {"Bearer b"}}, EraDetect, nil) {
		t.Fatal("two callers' lowercase credentials share a list")
	}
	if cacheKey("acme", url, nil, EraDetect, nil) == cacheKey("globex", url, nil, EraDetect, nil) ||
		scopeKey("acme", url, nil) == scopeKey("globex", url, nil) {
		t.Fatal("two tenants share a list")
	}
}

// A string from an upstream cut for a log or an error detail stays valid
// UTF-8, at most 128 bytes and the mark.
func TestClipKeepsUTF8(t *testing.T) {
	for _, s := range []string{strings.Repeat("é", 100), strings.Repeat("a", 127) + "€€", strings.Repeat("x", 128), "short"} {
		got := clip(s)
		if !utf8.ValidString(got) || len(strings.TrimSuffix(got, "…")) > 128 || (len(s) <= 128) != (got == s) {
			t.Fatalf("clip(%q) = %q", s, got)
		}
	}
}
