package gateway

import (
	"context"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mcphandler/mcphandler"
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

// The tools made of a list for one Upstream are served for another only
// when every field of the two is the same: one that differs in any field
// gets tools of its own (Gateway.tools).
func TestSameUpstreamEveryField(t *testing.T) {
	var set func(v reflect.Value, name string)
	set = func(v reflect.Value, name string) {
		switch {
		case v.Type() == reflect.TypeFor[CredentialSource]():
			v.Set(reflect.ValueOf(StaticCredentials(http.Header{"X": {"y"}})))
		case v.Kind() == reflect.String:
			v.SetString("x")
		case v.Kind() == reflect.Bool:
			v.SetBool(true)
		case v.CanInt():
			v.SetInt(1)
		case v.Kind() == reflect.Pointer:
			v.Set(reflect.New(v.Type().Elem()))
		case v.Kind() == reflect.Slice:
			v.Set(reflect.MakeSlice(v.Type(), 1, 1))
			set(v.Index(0), name)
		case v.Kind() == reflect.Map:
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			set(k, name)
			set(e, name)
			v.Set(reflect.MakeMap(v.Type()))
			v.SetMapIndex(k, e)
		default:
			t.Fatalf("Upstream.%s: a field of a kind this test cannot set (%s): teach it, and sameUpstream", name, v.Type())
		}
	}
	var zero Upstream
	for i := range reflect.TypeFor[Upstream]().NumField() {
		name := reflect.TypeFor[Upstream]().Field(i).Name
		var a, b Upstream
		set(reflect.ValueOf(&a).Elem().Field(i), name)
		set(reflect.ValueOf(&b).Elem().Field(i), name) // equal, not the same maps or sources
		if sameUpstream(&zero, &a) || sameUpstream(&a, &zero) {
			t.Errorf("Upstream.%s set counts as the same upstream as none set", name)
		}
		if !sameUpstream(&a, &b) {
			t.Errorf("two Upstreams with equal %s count as different", name)
		}
	}
	for i := range reflect.TypeFor[OAuthClient]().NumField() {
		name := "OAuth." + reflect.TypeFor[OAuthClient]().Field(i).Name
		none, a, b := Upstream{OAuth: &OAuthClient{}}, Upstream{OAuth: &OAuthClient{}}, Upstream{OAuth: &OAuthClient{}}
		set(reflect.ValueOf(a.OAuth).Elem().Field(i), name)
		set(reflect.ValueOf(b.OAuth).Elem().Field(i), name)
		if sameUpstream(&none, &a) || !sameUpstream(&a, &b) {
			t.Errorf("Upstream.%s does not count, or two equal ones count as different", name)
		}
	}
}

// A source whose values cannot be compared is never the same as
// another, nor as itself, and comparing it does not panic.
func TestSameSourceUncomparable(t *testing.T) {
	s := uncomparableSource{h: http.Header{"X": {"y"}}}
	if sameSource(s, s) || sameSource(s, StaticCredentials(s.h)) || !sameSource(nil, nil) || sameSource(s, nil) {
		t.Fatal("uncomparable sources compared as the same")
	}
}

type uncomparableSource struct{ h http.Header }

func (s uncomparableSource) Credentials(context.Context, mcphandler.Identity, *Upstream) (http.Header, error) {
	return s.h, nil
}
func (uncomparableSource) Kind() string { return "test" }
