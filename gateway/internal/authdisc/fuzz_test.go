package authdisc

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/mcphandler/mcphandler/internal/costguard"
)

// FuzzParseChallenge: the input's lines are header values. What
// ParseChallenge accepts is a Bearer challenge's params: lower-case token
// names, values without controls but HTAB, which read back the same when
// written as one challenge, alone or after others. Parsing is linear.
func FuzzParseChallenge(f *testing.F) {
	for _, s := range []string{
		`Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp", scope="mcp:tools files:read"`,
		`Basic realm="x", Bearer resource_metadata="https://x/m", scope="a b"`,
		"Basic realm=\"x\"\nBearer error=invalid_token, error_description=\"The access token expired\"",
		`Newauth realm="apps", type=1, title="Login to \"apps\"", Basic realm="simple"`,
		`bEaReR Scope="a", RESOURCE_metadata=x`, `Bearer`, `Bearer, scope="a"`, ` , Bearer ,scope="a",,`,
		`Bearer abc==`, `Negotiate abc==, Bearer scope="a"`, `Bearer scope="a", scope="b"`, `Bearer a, Bearer b`,
		`Bearer scope="a`, `Bearer scope="a\`, "Bearer scope=\"a\tb\"", "Bearer realm=\"caf\xc3\xa9\"", `Bearer a=b=c`,
		`Bearer scope=, error="x"`, `Bea(rer x=y`, `=`, `,`, `"`,
	} {
		f.Add(s)
	}
	f.Add(`Bearer ` + strings.Repeat(`a="\"\\", `, 800))
	f.Add(strings.Repeat(`Basic, `, 1000) + `Bearer x=y`)
	f.Fuzz(func(t *testing.T, in string) {
		values := strings.Split(in, "\n")
		var params map[string]string
		var ok bool
		costguard.Check(t, len(in), func() { params, ok = ParseChallenge(values) })
		if !ok {
			if params != nil {
				t.Fatalf("params %q without ok", params)
			}
			return
		}
		if !strings.Contains(strings.ToLower(in), "bearer") {
			t.Fatalf("a Bearer challenge in %q", in)
		}
		for k, v := range params {
			if k == "" || skipToken(k, 0) != len(k) || k != strings.ToLower(k) {
				t.Fatalf("param name %q", k)
			}
			for i := 0; i < len(v); i++ {
				if !isQText(v[i]) {
					t.Fatalf("param %s = %q has byte %#x", k, v, v[i])
				}
			}
		}
		one := writeBearer(params)
		if len(one) > maxHeaderValue-len(`Basic realm="x", `) {
			return
		}
		for _, vs := range [][]string{{one}, {`Basic realm="x", ` + one}, {"Negotiate abc==", strings.ToUpper(one[:6]) + one[6:]}} {
			if got, ok := ParseChallenge(vs); !ok || !maps.Equal(got, params) {
				t.Fatalf("%q read back from %q as %q (%v)", params, vs, got, ok)
			}
		}
	})
}

// writeBearer writes params as one Bearer challenge, values as
// quoted-strings.
func writeBearer(params map[string]string) string {
	keys := slices.Sorted(maps.Keys(params))
	var b strings.Builder
	b.WriteString("Bearer")
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(" " + k + `="`)
		for _, c := range []byte(params[k]) {
			if c == '"' || c == '\\' {
				b.WriteByte('\\')
			}
			b.WriteByte(c)
		}
		b.WriteByte('"')
	}
	return b.String()
}

// TestParseChallengeLinear: long runs of what costs a parser the most
// (escapes, empty elements, params, token68s, unterminated strings) take
// time linear in their length.
func TestParseChallengeLinear(t *testing.T) {
	fill := func(head, unit, tail string) string {
		n := (maxHeaderValue - len(head) - len(tail)) / len(unit)
		return head + strings.Repeat(unit, n) + tail
	}
	var params strings.Builder
	params.WriteString("Bearer ")
	for i := 0; params.Len() < maxHeaderValue-16; i++ {
		params.WriteString("p" + strconv.Itoa(i) + "=v, ")
	}
	for _, v := range []string{
		fill(`Bearer a="`, `\"`, `"`),
		fill(`Bearer a="`, `\"`, ``),
		fill(`Bearer `, `,`, ``),
		fill(``, `Basic, `, ``),
		fill(`Bearer `, `a=b, `, ``),
		fill(`Bearer `, `a`, `==`),
		fill(`Bearer `, `a `, ``),
		fill(``, `Bearer `, ``),
		params.String(),
	} {
		values := slices.Repeat([]string{v}, 128) // 1 MiB
		costguard.Check(t, 128*len(v), func() { ParseChallenge(values) })
	}
}

// resourceJSON and serverJSON write a Resource and a Server back as
// documents.
type resourceJSON struct {
	Resource             string   `json:"resource"`
	AuthorizationServers []string `json:"authorization_servers"`
	ScopesSupported      []string `json:"scopes_supported,omitempty"`
}

type serverJSON struct {
	Issuer                string   `json:"issuer"`
	AuthorizationEndpoint string   `json:"authorization_endpoint"`
	TokenEndpoint         string   `json:"token_endpoint"`
	RevocationEndpoint    string   `json:"revocation_endpoint,omitempty"`
	CodeChallengeMethods  []string `json:"code_challenge_methods_supported"`
	ScopesSupported       []string `json:"scopes_supported,omitempty"`
}

// FuzzMetadata: what the document decoders accept keeps every rule (URLs,
// counts, lengths, S256) and reads back the same once written again; a
// loopback upstream accepts all that another accepts, the same way.
// Decoding is linear.
func FuzzMetadata(f *testing.F) {
	for _, s := range []string{
		prmDoc("https://mcp.example.com/mcp", "https://as.example.com", "https://as.example.com/tenant1"),
		asDoc("https://as.example.com"),
		asDoc("http://127.0.0.1:8080/t", set("scopes_supported", nil), set("revocation_endpoint", nil)),
		`{"resource":"https://x/","authorization_servers":["https://a"],"resource":"https://y/"}`,
		`{"resource":"https://x/","authorization_servers":[]}`, `{"resource":"https://x/","authorization_servers":null}`,
		`{"resource":"https://x/","authorization_servers":["https://a?b"]}`, `{"resource":"https://x/#f","authorization_servers":["https://a"]}`,
		`{"resource":"\u0068ttps://x/","authorization_servers":["https://a"],"scopes_supported":["a","b\"c"]}`,
		`{"issuer":"https://a","authorization_endpoint":"https://a/z","token_endpoint":"https://a/t","code_challenge_methods_supported":["S256"],"x":{"y":[1e999]}}`,
		`{"issuer":"https://a","authorization_endpoint":"https://a/z","token_endpoint":"https://a/t","code_challenge_methods_supported":["s256"]}`,
		`{"issuer":"https://a","authorization_endpoint":null,"token_endpoint":"https://a/t","code_challenge_methods_supported":["S256"]}`,
		`{"ISSUER":"https://a","issuer":"https://a","authorization_endpoint":"https://a/z","token_endpoint":"https://a/t","code_challenge_methods_supported":["S256"]}`,
		`[]`, `null`, `"x"`, `{}`, ` {"a":1} `, `{"a":1}x`,
	} {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"x":` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `}`))
	f.Add([]byte(`{"resource":"https://x/","authorization_servers":["` + strings.Repeat(`\u00e9`, 500) + `"]}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		var r, rl Resource
		var s, sl Server
		var rerr, rlerr, serr, slerr error
		costguard.Check(t, len(in), func() {
			r, rerr = decodeResource(in, false)
			s, serr = decodeServer(in, false)
		})
		rl, rlerr = decodeResource(in, true)
		sl, slerr = decodeServer(in, true)
		if rerr == nil && (rlerr != nil || !reflect.DeepEqual(r, rl)) {
			t.Fatalf("resource: %+v; from a loopback upstream %+v, %v", r, rl, rlerr)
		}
		if serr == nil && (slerr != nil || !reflect.DeepEqual(s, sl)) {
			t.Fatalf("server: %+v; from a loopback upstream %+v, %v", s, sl, slerr)
		}
		if rlerr == nil {
			checkResource(t, rl)
			b, err := json.Marshal(resourceJSON(rl))
			if err != nil {
				t.Fatal(err)
			}
			if again, err := decodeResource(b, true); err != nil || !reflect.DeepEqual(again, rl) {
				t.Fatalf("%+v read back from %s as %+v, %v", rl, b, again, err)
			}
		}
		if slerr == nil {
			checkServer(t, sl)
			b, err := json.Marshal(serverJSON(sl))
			if err != nil {
				t.Fatal(err)
			}
			if again, err := decodeServer(b, true); err != nil || !reflect.DeepEqual(again, sl) {
				t.Fatalf("%+v read back from %s as %+v, %v", sl, b, again, err)
			}
		}
	})
}

// checkResource fails t unless r keeps every rule of decodeResource.
func checkResource(t *testing.T, r Resource) {
	t.Helper()
	if _, err := checkURL(r.Resource, true); err != nil {
		t.Fatalf("resource: %v", err)
	}
	if n := len(r.AuthorizationServers); n == 0 || n > maxServers {
		t.Fatalf("%d authorization servers", n)
	}
	for _, a := range r.AuthorizationServers {
		if _, err := checkIssuer(a, true); err != nil {
			t.Fatalf("authorization server: %v", err)
		}
	}
	checkTokens(t, r.ScopesSupported)
}

// checkServer fails t unless s keeps every rule of decodeServer.
func checkServer(t *testing.T, s Server) {
	t.Helper()
	if _, err := checkIssuer(s.Issuer, true); err != nil {
		t.Fatalf("issuer: %v", err)
	}
	for _, u := range []string{s.AuthorizationEndpoint, s.TokenEndpoint} {
		if _, err := checkURL(u, true); err != nil {
			t.Fatalf("endpoint: %v", err)
		}
	}
	if _, err := checkURL(s.RevocationEndpoint, true); s.RevocationEndpoint != "" && err != nil {
		t.Fatalf("revocation endpoint: %v", err)
	}
	if !slices.Contains(s.CodeChallengeMethods, "S256") {
		t.Fatalf("methods %q", s.CodeChallengeMethods)
	}
	checkTokens(t, s.CodeChallengeMethods)
	checkTokens(t, s.ScopesSupported)
}

func checkTokens(t *testing.T, toks []string) {
	t.Helper()
	if len(toks) > maxList || (toks != nil && len(toks) == 0) {
		t.Fatalf("%d tokens", len(toks))
	}
	for _, tok := range toks {
		if err := checkToken(tok); err != nil {
			t.Fatal(err)
		}
	}
}
