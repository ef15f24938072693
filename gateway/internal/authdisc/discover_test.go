package authdisc

import (
	"context"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The well-known URIs the tables expect.
const (
	prmRoot   = "/.well-known/oauth-protected-resource"
	prmMCP    = "/.well-known/oauth-protected-resource/mcp"
	asRoot    = "/.well-known/oauth-authorization-server"
	oidcRoot  = "/.well-known/openid-configuration"
	asTenant  = "/.well-known/oauth-authorization-server/tenant1"
	oidcTen   = "/.well-known/openid-configuration/tenant1"
	oidcAfter = "/tenant1/.well-known/openid-configuration"
)

// bare is a 401 without a challenge that names the metadata.
var bare = challenge(`Bearer realm="mcp"`)

// TestDiscover runs discoveries against a fake upstream and checks the
// requests made, in order, and the outcome.
func TestDiscover(t *testing.T) {
	type routes = map[string]http.HandlerFunc
	tests := []struct {
		name   string
		url    func(b string) string // Config.URL; b + "/mcp" if nil
		routes func(b string) routes
		want   []string // requests after the probe
		err    error
		check  func(t *testing.T, b string, r Result)
	}{{
		name: "the challenge names the metadata",
		routes: func(b string) routes {
			return routes{
				"/mcp":    challenge(`Basic realm="x", Bearer resource_metadata="` + b + `/meta/x", scope="mcp:tools  files:read"`),
				"/meta/x": doc(prmDoc(b+"/mcp", b)),
				asRoot:    doc(asDoc(b)),
				prmMCP:    doc(prmDoc(b+"/elsewhere", b)), // not asked
			}
		},
		want: []string{"GET /meta/x", "GET " + asRoot},
		check: func(t *testing.T, b string, r Result) {
			want := Result{
				Resource: Resource{Resource: b + "/mcp", AuthorizationServers: []string{b}, ScopesSupported: []string{"mcp:tools"}},
				Server: Server{Issuer: b, AuthorizationEndpoint: b + "/authorize", TokenEndpoint: b + "/token",
					RevocationEndpoint: b + "/revoke", CodeChallengeMethods: []string{"plain", "S256"},
					ScopesSupported: []string{"openid", "mcp:tools"}},
				Scope: "mcp:tools files:read",
			}
			if !reflect.DeepEqual(r, want) {
				t.Fatalf("got %+v\nwant %+v", r, want)
			}
		},
	}, {
		name: "without resource_metadata: the path-inserted well-known URI",
		routes: func(b string) routes {
			return routes{"/mcp": challenge(`Bearer scope="a"`), prmMCP: doc(prmDoc(b+"/mcp", b)), asRoot: doc(asDoc(b))}
		},
		want: []string{"GET " + prmMCP, "GET " + asRoot},
		check: func(t *testing.T, b string, r Result) {
			if r.Scope != "a" || r.Server.Issuer != b {
				t.Fatalf("got %+v", r)
			}
		},
	}, {
		name: "without a challenge: the root after the path-inserted URI",
		routes: func(b string) routes {
			return routes{"/mcp": challenge(), prmRoot: doc(prmDoc(b+"/mcp", b)), asRoot: doc(asDoc(b))}
		},
		want: []string{"GET " + prmMCP, "GET " + prmRoot, "GET " + asRoot},
		check: func(t *testing.T, b string, r Result) {
			if r.Scope != "" {
				t.Fatalf("scope %q without a challenge", r.Scope)
			}
		},
	}, {
		name: "a Basic challenge only: the well-known URIs",
		routes: func(b string) routes {
			return routes{"/mcp": challenge(`Basic realm="x"`), prmRoot: doc(prmDoc(b+"/mcp", b)), asRoot: doc(asDoc(b))}
		},
		want: []string{"GET " + prmMCP, "GET " + prmRoot, "GET " + asRoot},
	}, {
		name: "a Bearer challenge with a repeated param counts for none",
		routes: func(b string) routes {
			return routes{
				"/mcp":  challenge(`Bearer resource_metadata="` + b + `/x", Resource_Metadata="` + b + `/y"`),
				prmRoot: doc(prmDoc(b+"/mcp", b)),
				asRoot:  doc(asDoc(b)),
				"/x":    doc(prmDoc(b+"/mcp", b)),
				"/y":    doc(prmDoc(b+"/mcp", b)),
			}
		},
		want: []string{"GET " + prmMCP, "GET " + prmRoot, "GET " + asRoot},
	}, {
		name: "a 4xx other than 404 leads to the next URI",
		routes: func(b string) routes {
			return routes{"/mcp": bare, prmMCP: code(403), prmRoot: doc(prmDoc(b+"/mcp", b)), asRoot: doc(asDoc(b))}
		},
		want: []string{"GET " + prmMCP, "GET " + prmRoot, "GET " + asRoot},
	}, {
		name:   "no protected resource metadata anywhere",
		routes: func(b string) routes { return routes{"/mcp": bare, prmMCP: code(404), prmRoot: code(410)} },
		want:   []string{"GET " + prmMCP, "GET " + prmRoot},
		err:    ErrMetadata,
	}, {
		name: "the metadata resource_metadata names answers 404: no fallback",
		routes: func(b string) routes {
			return routes{"/mcp": challenge(`Bearer resource_metadata="` + b + `/gone"`), prmMCP: doc(prmDoc(b+"/mcp", b))}
		},
		want: []string{"GET /gone"},
		err:  ErrMetadata,
	}, {
		name: "a URL without a path: the root only",
		url:  func(b string) string { return b },
		routes: func(b string) routes {
			return routes{"/": bare, prmRoot: doc(prmDoc(b, b)), asRoot: doc(asDoc(b))}
		},
		want: []string{"GET " + prmRoot, "GET " + asRoot},
	}, {
		name: "a trailing slash of the path is dropped from the well-known URI",
		url:  func(b string) string { return b + "/mcp/" },
		routes: func(b string) routes {
			return routes{"/mcp/": bare, prmMCP: doc(prmDoc(b+"/mcp/", b)), asRoot: doc(asDoc(b))}
		},
		want: []string{"GET " + prmMCP, "GET " + asRoot},
	}, {
		name: "the query goes after the path",
		url:  func(b string) string { return b + "/mcp?tenant=a" },
		routes: func(b string) routes {
			return routes{"/mcp?tenant=a": bare, prmMCP + "?tenant=a": doc(prmDoc(b+"/mcp?tenant=a", b)), asRoot: doc(asDoc(b))}
		},
		want: []string{"GET " + prmMCP + "?tenant=a", "GET " + asRoot},
	}, {
		name: "an issuer with a path: RFC 8414 path-inserted first",
		routes: func(b string) routes {
			return routes{"/mcp": bare, prmMCP: doc(prmDoc(b+"/mcp", b+"/tenant1")), asTenant: doc(asDoc(b + "/tenant1")),
				oidcTen: doc(asDoc(b + "/tenant1")), oidcAfter: doc(asDoc(b + "/tenant1"))}
		},
		want: []string{"GET " + prmMCP, "GET " + asTenant},
		check: func(t *testing.T, b string, r Result) {
			if r.Server.Issuer != b+"/tenant1" || r.Server.TokenEndpoint != b+"/tenant1/token" {
				t.Fatalf("got %+v", r.Server)
			}
		},
	}, {
		name: "an issuer with a path: OpenID Connect path-inserted second",
		routes: func(b string) routes {
			return routes{"/mcp": bare, prmMCP: doc(prmDoc(b+"/mcp", b+"/tenant1")), oidcTen: doc(asDoc(b + "/tenant1")),
				oidcAfter: doc(asDoc(b + "/tenant1"))}
		},
		want: []string{"GET " + prmMCP, "GET " + asTenant, "GET " + oidcTen},
	}, {
		name: "an issuer with a path: OpenID Connect path-appended last",
		routes: func(b string) routes {
			return routes{"/mcp": bare, prmMCP: doc(prmDoc(b+"/mcp", b+"/tenant1")), oidcAfter: doc(asDoc(b + "/tenant1")),
				asRoot: doc(asDoc(b)), oidcRoot: doc(asDoc(b))}
		},
		want: []string{"GET " + prmMCP, "GET " + asTenant, "GET " + oidcTen, "GET " + oidcAfter},
	}, {
		name: "an issuer with a path and a trailing slash",
		routes: func(b string) routes {
			return routes{"/mcp": bare, prmMCP: doc(prmDoc(b+"/mcp", b+"/tenant1/")), oidcAfter: doc(asDoc(b + "/tenant1/"))}
		},
		want: []string{"GET " + prmMCP, "GET " + asTenant, "GET " + oidcTen, "GET " + oidcAfter},
	}, {
		name: "an issuer with a path: no metadata anywhere",
		routes: func(b string) routes {
			return routes{"/mcp": bare, prmMCP: doc(prmDoc(b+"/mcp", b+"/tenant1")), asRoot: doc(asDoc(b)), oidcRoot: doc(asDoc(b))}
		},
		want: []string{"GET " + prmMCP, "GET " + asTenant, "GET " + oidcTen, "GET " + oidcAfter},
		err:  ErrMetadata,
	}, {
		name: "an issuer without a path: OpenID Connect second",
		routes: func(b string) routes {
			return routes{"/mcp": bare, prmMCP: doc(prmDoc(b+"/mcp", b+"/")), oidcRoot: doc(asDoc(b + "/"))}
		},
		want: []string{"GET " + prmMCP, "GET " + asRoot, "GET " + oidcRoot},
	}, {
		name:   "an issuer without a path: no metadata",
		routes: func(b string) routes { return routes{"/mcp": bare, prmMCP: doc(prmDoc(b+"/mcp", b))} },
		want:   []string{"GET " + prmMCP, "GET " + asRoot, "GET " + oidcRoot},
		err:    ErrMetadata,
	}, {
		name: "the first authorization server is the one used",
		routes: func(b string) routes {
			return routes{"/mcp": bare, prmMCP: doc(prmDoc(b+"/mcp", b+"/tenant1", b)), oidcAfter: doc(asDoc(b + "/tenant1")),
				asRoot: doc(asDoc(b))}
		},
		want: []string{"GET " + prmMCP, "GET " + asTenant, "GET " + oidcTen, "GET " + oidcAfter},
		check: func(t *testing.T, b string, r Result) {
			if len(r.Resource.AuthorizationServers) != 2 || r.Server.Issuer != b+"/tenant1" {
				t.Fatalf("got %+v", r)
			}
		},
	}, {
		name: "a resource with a trailing slash is another resource",
		routes: func(b string) routes {
			return routes{"/mcp": bare, prmMCP: doc(prmDoc(b+"/mcp/", b)), asRoot: doc(asDoc(b))}
		},
		want: []string{"GET " + prmMCP},
		err:  ErrMetadata,
	}, {
		name: "a resource of another path",
		routes: func(b string) routes {
			return routes{"/mcp": bare, prmMCP: doc(prmDoc(b+"/other", b)), asRoot: doc(asDoc(b))}
		},
		want: []string{"GET " + prmMCP},
		err:  ErrMetadata,
	}, {
		name: "a resource of another host",
		routes: func(b string) routes {
			return routes{"/mcp": bare, prmMCP: doc(prmDoc(strings.Replace(b, "127.0.0.1", "localhost", 1)+"/mcp", b)),
				asRoot: doc(asDoc(b))}
		},
		want: []string{"GET " + prmMCP},
		err:  ErrMetadata,
	}, {
		name: "a resource equal but for case and an empty query",
		routes: func(b string) routes {
			return routes{"/mcp": bare, prmMCP: doc(prmDoc(strings.Replace(b, "http://", "HTTP://", 1)+"/mcp?", b)),
				asRoot: doc(asDoc(b))}
		},
		want: []string{"GET " + prmMCP, "GET " + asRoot},
	}, {
		name: "a resource with a fragment",
		routes: func(b string) routes {
			return routes{"/mcp": bare, prmMCP: doc(prmDoc(b+"/mcp#x", b)), asRoot: doc(asDoc(b))}
		},
		want: []string{"GET " + prmMCP},
		err:  ErrMetadata,
	}, {
		name: "the issuer is not the authorization server's URL",
		routes: func(b string) routes {
			return routes{"/mcp": bare, prmMCP: doc(prmDoc(b+"/mcp", b)), asRoot: doc(asDoc(b + "/"))}
		},
		want: []string{"GET " + prmMCP, "GET " + asRoot},
		err:  ErrMetadata,
	}, {
		name: "an issuer that differs in case only",
		routes: func(b string) routes {
			return routes{"/mcp": bare, prmMCP: doc(prmDoc(b+"/mcp", b+"/tenant1")), asTenant: doc(asDoc(b + "/Tenant1"))}
		},
		want: []string{"GET " + prmMCP, "GET " + asTenant},
		err:  ErrMetadata,
	}, {
		name: "no S256",
		routes: func(b string) routes {
			return routes{"/mcp": bare, prmMCP: doc(prmDoc(b+"/mcp", b)),
				asRoot: doc(asDoc(b, set("code_challenge_methods_supported", []string{"plain", "s256"})))}
		},
		want: []string{"GET " + prmMCP, "GET " + asRoot},
		err:  ErrMetadata,
	}, {
		name: "no code_challenge_methods_supported",
		routes: func(b string) routes {
			return routes{"/mcp": bare, prmMCP: doc(prmDoc(b+"/mcp", b)),
				asRoot: doc(asDoc(b, set("code_challenge_methods_supported", nil)))}
		},
		want: []string{"GET " + prmMCP, "GET " + asRoot},
		err:  ErrMetadata,
	}, {
		name: "no token endpoint",
		routes: func(b string) routes {
			return routes{"/mcp": bare, prmMCP: doc(prmDoc(b+"/mcp", b)), asRoot: doc(asDoc(b, set("token_endpoint", nil)))}
		},
		want: []string{"GET " + prmMCP, "GET " + asRoot},
		err:  ErrMetadata,
	}, {
		name: "an authorization endpoint that is null",
		routes: func(b string) routes {
			return routes{"/mcp": bare, prmMCP: doc(prmDoc(b+"/mcp", b)),
				asRoot: doc(strings.Replace(asDoc(b), `"authorization_endpoint":"`+b+`/authorize"`, `"authorization_endpoint":null`, 1))}
		},
		want: []string{"GET " + prmMCP, "GET " + asRoot},
		err:  ErrMetadata,
	}, {
		name: "no revocation endpoint",
		routes: func(b string) routes {
			return routes{"/mcp": bare, prmMCP: doc(prmDoc(b+"/mcp", b)), asRoot: doc(asDoc(b, set("revocation_endpoint", nil)))}
		},
		want: []string{"GET " + prmMCP, "GET " + asRoot},
		check: func(t *testing.T, b string, r Result) {
			if r.Server.RevocationEndpoint != "" {
				t.Fatalf("revocation endpoint %q", r.Server.RevocationEndpoint)
			}
		},
	}, {
		name: "no authorization servers",
		routes: func(b string) routes {
			return routes{"/mcp": bare, prmMCP: doc(prmDoc(b + "/mcp"))}
		},
		want: []string{"GET " + prmMCP},
		err:  ErrMetadata,
	}, {
		name: "32 authorization servers",
		routes: func(b string) routes {
			return routes{"/mcp": bare, prmMCP: doc(prmDoc(b+"/mcp", servers(b, 32)...)), asRoot: doc(asDoc(b))}
		},
		want: []string{"GET " + prmMCP, "GET " + asRoot},
	}, {
		name: "33 authorization servers",
		routes: func(b string) routes {
			return routes{"/mcp": bare, prmMCP: doc(prmDoc(b+"/mcp", servers(b, 33)...)), asRoot: doc(asDoc(b))}
		},
		want: []string{"GET " + prmMCP},
		err:  ErrMetadata,
	}, {
		name: "65 scopes",
		routes: func(b string) routes {
			return routes{"/mcp": bare, prmMCP: doc(prmDoc(b+"/mcp", b)),
				asRoot: doc(asDoc(b, set("scopes_supported", strings.Fields(strings.Repeat("s ", 65)))))}
		},
		want: []string{"GET " + prmMCP, "GET " + asRoot},
		err:  ErrMetadata,
	}, {
		name: "a string longer than 2 KiB",
		routes: func(b string) routes {
			return routes{"/mcp": bare, prmMCP: doc(prmDoc(b+"/mcp", b)),
				asRoot: doc(asDoc(b, set("token_endpoint", b+"/"+strings.Repeat("t", 2048))))}
		},
		want: []string{"GET " + prmMCP, "GET " + asRoot},
		err:  ErrMetadata,
	}, {
		name: "a repeated key",
		routes: func(b string) routes {
			return routes{"/mcp": bare, prmMCP: doc(`{"resource":"` + b + `/mcp","authorization_servers":["` + b +
				`"],"resource":"https://evil.example/mcp"}`), asRoot: doc(asDoc(b))}
		},
		want: []string{"GET " + prmMCP},
		err:  ErrMetadata,
	}, {
		name: "not JSON",
		routes: func(b string) routes {
			return routes{"/mcp": bare, prmMCP: doc(`<html>`), prmRoot: doc(prmDoc(b+"/mcp", b))}
		},
		want: []string{"GET " + prmMCP},
		err:  ErrMetadata,
	}, {
		name: "a JSON array",
		routes: func(b string) routes {
			return routes{"/mcp": bare, prmMCP: doc(`[` + prmDoc(b+"/mcp", b) + `]`)}
		},
		want: []string{"GET " + prmMCP},
		err:  ErrMetadata,
	}, {
		name: "a 204 is not a document",
		routes: func(b string) routes {
			return routes{"/mcp": bare, prmMCP: code(204), prmRoot: doc(prmDoc(b+"/mcp", b))}
		},
		want: []string{"GET " + prmMCP},
		err:  ErrMetadata,
	}, {
		name: "resource_metadata that is not https",
		routes: func(b string) routes {
			return routes{"/mcp": challenge(`Bearer resource_metadata="http://example.com/meta"`), prmMCP: doc(prmDoc(b+"/mcp", b))}
		},
		err: ErrMetadata,
	}, {
		name: "resource_metadata that is not absolute",
		routes: func(b string) routes {
			return routes{"/mcp": challenge(`Bearer resource_metadata="/meta"`), "/meta": doc(prmDoc(b+"/mcp", b))}
		},
		err: ErrMetadata,
	}, {
		name: "resource_metadata with userinfo",
		routes: func(b string) routes {
			return routes{"/mcp": challenge(`Bearer resource_metadata="` + strings.Replace(b, "//", "//u:p@", 1) + `/meta"`),
				"/meta": doc(prmDoc(b+"/mcp", b))}
		},
		err: ErrMetadata,
	}, {
		name: "a scope that is not scope tokens",
		routes: func(b string) routes {
			return routes{"/mcp": challenge(`Bearer scope="a \"b\""`), prmMCP: doc(prmDoc(b+"/mcp", b)), asRoot: doc(asDoc(b))}
		},
		err: ErrMetadata,
	}, {
		name: "an authorization server that is not https",
		routes: func(b string) routes {
			return routes{"/mcp": bare, prmMCP: doc(prmDoc(b+"/mcp", "http://example.com")), asRoot: doc(asDoc(b))}
		},
		want: []string{"GET " + prmMCP},
		err:  ErrMetadata,
	}, {
		name: "a later authorization server that is not https",
		routes: func(b string) routes {
			return routes{"/mcp": bare, prmMCP: doc(prmDoc(b+"/mcp", b, "ftp://example.com")), asRoot: doc(asDoc(b))}
		},
		want: []string{"GET " + prmMCP},
		err:  ErrMetadata,
	}, {
		name: "an authorization server with a query",
		routes: func(b string) routes {
			return routes{"/mcp": bare, prmMCP: doc(prmDoc(b+"/mcp", b+"?x=1")), asRoot: doc(asDoc(b + "?x=1"))}
		},
		want: []string{"GET " + prmMCP},
		err:  ErrMetadata,
	}, {
		name: "an authorization endpoint that is not https",
		routes: func(b string) routes {
			return routes{"/mcp": bare, prmMCP: doc(prmDoc(b+"/mcp", b)),
				asRoot: doc(asDoc(b, set("authorization_endpoint", "http://example.com/authorize")))}
		},
		want: []string{"GET " + prmMCP, "GET " + asRoot},
		err:  ErrMetadata,
	}, {
		name: "a revocation endpoint that is not https",
		routes: func(b string) routes {
			return routes{"/mcp": bare, prmMCP: doc(prmDoc(b+"/mcp", b)),
				asRoot: doc(asDoc(b, set("revocation_endpoint", "http://10.0.0.1/revoke")))}
		},
		want: []string{"GET " + prmMCP, "GET " + asRoot},
		err:  ErrMetadata,
	}, {
		name: "a redirect of the protected resource metadata is not followed",
		routes: func(b string) routes {
			return routes{"/mcp": bare, prmMCP: redirect(http.StatusFound, "/elsewhere"), "/elsewhere": doc(prmDoc(b+"/mcp", b)),
				prmRoot: doc(prmDoc(b+"/mcp", b))}
		},
		want: []string{"GET " + prmMCP},
		err:  ErrMetadata,
	}, {
		name: "a redirect of the authorization server metadata is not followed",
		routes: func(b string) routes {
			return routes{"/mcp": bare, prmMCP: doc(prmDoc(b+"/mcp", b)), asRoot: redirect(http.StatusMovedPermanently, oidcRoot),
				oidcRoot: doc(asDoc(b))}
		},
		want: []string{"GET " + prmMCP, "GET " + asRoot},
		err:  ErrMetadata,
	}, {
		name: "a redirect of the probe is not followed",
		routes: func(b string) routes {
			return routes{"/mcp": redirect(http.StatusTemporaryRedirect, "/login"), "/login": bare}
		},
		err: ErrNotProtected,
	}, {
		name: "a 5xx of the protected resource metadata ends the discovery",
		routes: func(b string) routes {
			return routes{"/mcp": bare, prmMCP: code(503), prmRoot: doc(prmDoc(b+"/mcp", b))}
		},
		want: []string{"GET " + prmMCP},
		err:  errOther,
	}, {
		name: "a 429 of the protected resource metadata ends the discovery",
		routes: func(b string) routes {
			return routes{"/mcp": bare, prmMCP: code(429), prmRoot: doc(prmDoc(b+"/mcp", b))}
		},
		want: []string{"GET " + prmMCP},
		err:  errOther,
	}, {
		name: "a 5xx of the authorization server metadata ends the discovery",
		routes: func(b string) routes {
			return routes{"/mcp": bare, prmMCP: doc(prmDoc(b+"/mcp", b)), asRoot: code(500), oidcRoot: doc(asDoc(b))}
		},
		want: []string{"GET " + prmMCP, "GET " + asRoot},
		err:  errOther,
	}, {
		name:   "an upstream that answers the probe is not protected",
		routes: func(b string) routes { return routes{"/mcp": doc(`{"jsonrpc":"2.0","id":1,"result":{}}`)} },
		err:    ErrNotProtected,
	}, {
		name:   "a 403 to the probe",
		routes: func(b string) routes { return routes{"/mcp": code(403)} },
		err:    ErrNotProtected,
	}, {
		name:   "a 404 to the probe",
		routes: func(b string) routes { return routes{} },
		err:    ErrNotProtected,
	}, {
		name:   "a 503 to the probe says nothing about authorization",
		routes: func(b string) routes { return routes{"/mcp": code(503)} },
		err:    errOther,
	}, {
		name:   "a 429 to the probe says nothing about authorization",
		routes: func(b string) routes { return routes{"/mcp": code(429)} },
		err:    errOther,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, false)
			b := f.srv.URL
			f.route(tt.routes(b))
			target := b + "/mcp"
			if tt.url != nil {
				target = tt.url(b)
			}
			res, err := Discover(context.Background(), Config{URL: target, HTTPClient: f.srv.Client()})
			if err != nil {
				t.Log(err)
			}
			checkErr(t, err, tt.err)
			reqs := f.requests()
			u, _ := url.Parse(target)
			probe := "POST " + u.RequestURI()
			want := append([]string{probe}, tt.want...)
			if !slices.Equal(reqs, want) {
				t.Errorf("requests:\n%s\nwant:\n%s", strings.Join(reqs, "\n"), strings.Join(want, "\n"))
			}
			if err == nil && tt.check != nil {
				tt.check(t, b, res)
			}
			if err != nil && res.Server.Issuer != "" {
				t.Errorf("an error with a result: %+v", res)
			}
		})
	}
}

// servers returns n authorization server URLs, b first.
func servers(b string, n int) []string {
	s := []string{b}
	for len(s) < n {
		s = append(s, "https://as"+strconv.Itoa(len(s))+".example")
	}
	return s
}
