package authdisc

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails if a goroutine outlives the tests: Discover must end
// every request it made.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fake is an upstream MCP server and the servers it names, all on one
// httptest server: each request URI has its handler (404 if none), and
// every request is logged.
type fake struct {
	srv    *httptest.Server
	routes map[string]http.HandlerFunc

	mu   sync.Mutex
	seen []seen
}

// seen is a request the fake received.
type seen struct {
	line   string // "METHOD request-URI"
	header http.Header
	body   []byte
}

// newFake starts a fake; TLS or not.
func newFake(t *testing.T, tls bool) *fake {
	t.Helper()
	f := &fake{routes: map[string]http.HandlerFunc{}}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.seen = append(f.seen, seen{r.Method + " " + r.URL.RequestURI(), r.Header.Clone(), body})
		h := f.routes[r.URL.RequestURI()]
		f.mu.Unlock()
		if h == nil {
			http.NotFound(w, r)
			return
		}
		h(w, r)
	})
	if tls {
		f.srv = httptest.NewTLSServer(h)
	} else {
		f.srv = httptest.NewServer(h)
	}
	t.Cleanup(func() {
		f.srv.CloseClientConnections()
		f.srv.Close()
	})
	return f
}

// route sets the handlers of request URIs.
func (f *fake) route(routes map[string]http.HandlerFunc) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for uri, h := range routes {
		f.routes[uri] = h
	}
}

// requests returns "METHOD request-URI" of each request so far.
func (f *fake) requests() []string {
	var lines []string
	for _, r := range f.received() {
		lines = append(lines, r.line)
	}
	return lines
}

// received returns the requests so far.
func (f *fake) received() []seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seen(nil), f.seen...)
}

// challenge answers 401 with these WWW-Authenticate values.
func challenge(values ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		for _, v := range values {
			w.Header().Add("WWW-Authenticate", v)
		}
		http.Error(w, "unauthorized", http.StatusUnauthorized)
	}
}

// doc answers 200 with body as JSON.
func doc(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}
}

// code answers with the status alone.
func code(status int) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(status) }
}

// redirect answers with status and a Location.
func redirect(status int, to string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, to, status) }
}

// prmDoc is protected resource metadata naming resource and its
// authorization servers.
func prmDoc(resource string, servers ...string) string {
	return mustJSON(map[string]any{"resource": resource, "authorization_servers": servers,
		"scopes_supported": []string{"mcp:tools"}, "bearer_methods_supported": []string{"header"}})
}

// asDoc is authorization server metadata of issuer, changed by mod.
func asDoc(issuer string, mod ...func(map[string]any)) string {
	m := map[string]any{
		"issuer":                           issuer,
		"authorization_endpoint":           issuer + "/authorize",
		"token_endpoint":                   issuer + "/token",
		"revocation_endpoint":              issuer + "/revoke",
		"response_types_supported":         []string{"code"},
		"code_challenge_methods_supported": []string{"plain", "S256"},
		"scopes_supported":                 []string{"openid", "mcp:tools"},
	}
	for _, f := range mod {
		f(m)
	}
	return mustJSON(m)
}

// set returns a mod of asDoc that sets key (deletes it when v is nil).
func set(key string, v any) func(map[string]any) {
	return func(m map[string]any) {
		if v == nil {
			delete(m, key)
			return
		}
		m[key] = v
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// errOther stands, in the tables, for an error that is neither
// ErrNotProtected nor ErrMetadata.
var errOther = errors.New("another error")

// checkErr fails t unless err is what want says: nil, ErrNotProtected,
// ErrMetadata, or errOther.
func checkErr(t *testing.T, err, want error) {
	t.Helper()
	switch {
	case want == nil && err != nil:
		t.Fatalf("err = %v, want none", err)
	case want == errOther && (err == nil || errors.Is(err, ErrMetadata) || errors.Is(err, ErrNotProtected)):
		t.Fatalf("err = %v, want one that is neither ErrMetadata nor ErrNotProtected", err)
	case want != nil && want != errOther && !errors.Is(err, want):
		t.Fatalf("err = %v, want %v", err, want)
	}
}
