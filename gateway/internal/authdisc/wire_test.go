package authdisc

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"
)

// standard routes a fake to a working discovery of b+"/mcp".
func standard(f *fake) {
	b := f.srv.URL
	f.route(map[string]http.HandlerFunc{"/mcp": bare, prmMCP: doc(prmDoc(b+"/mcp", b)), asRoot: doc(asDoc(b))})
}

// TestProbe: the probe is an initialize POST (a GET of the SSE URL when
// Legacy) without credentials; no request carries the client's cookies,
// and the caller's client is not changed.
func TestProbe(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		t.Run(map[bool]string{false: "streamable", true: "legacy"}[legacy], func(t *testing.T) {
			f := newFake(t, false)
			standard(f)
			jar, err := cookiejar.New(nil)
			if err != nil {
				t.Fatal(err)
			}
			u, _ := url.Parse(f.srv.URL)
			jar.SetCookies(u, []*http.Cookie{{Name: "sid", Value: "secret"}})
			client := f.srv.Client()
			client.Jar = jar
			if _, err := Discover(context.Background(), Config{URL: f.srv.URL + "/mcp", Legacy: legacy, HTTPClient: client}); err != nil {
				t.Fatal(err)
			}
			if client.Jar != jar || client.CheckRedirect != nil {
				t.Fatal("Discover changed the caller's client")
			}
			reqs := f.received()
			for _, r := range reqs {
				if r.header.Get("Cookie") != "" || r.header.Get("Authorization") != "" {
					t.Fatalf("%s carried credentials: %v", r.line, r.header)
				}
			}
			p := reqs[0]
			if legacy {
				if p.line != "GET /mcp" || p.header.Get("Accept") != "text/event-stream" || len(p.body) != 0 {
					t.Fatalf("legacy probe %s, Accept %q, body %q", p.line, p.header.Get("Accept"), p.body)
				}
			} else {
				if p.line != "POST /mcp" || p.header.Get("Content-Type") != "application/json" ||
					p.header.Get("Accept") != "application/json, text/event-stream" {
					t.Fatalf("probe %s, header %v", p.line, p.header)
				}
				var m struct {
					JSONRPC string `json:"jsonrpc"`
					ID      int    `json:"id"`
					Method  string `json:"method"`
					Params  struct {
						ProtocolVersion string          `json:"protocolVersion"`
						Capabilities    json.RawMessage `json:"capabilities"`
						ClientInfo      struct{ Name, Version string }
					}
				}
				if err := json.Unmarshal(p.body, &m); err != nil || m.JSONRPC != "2.0" || m.Method != "initialize" ||
					m.Params.ProtocolVersion == "" || m.Params.ClientInfo.Name == "" {
					t.Fatalf("probe body %s: %v", p.body, err)
				}
			}
			for _, r := range reqs[1:] {
				if r.header.Get("Accept") != "application/json" {
					t.Fatalf("%s: Accept %q", r.line, r.header.Get("Accept"))
				}
			}
		})
	}
}

// TestMaxBytes: a document of MaxBytes is read, one of a byte more is
// refused, whether its length is announced or not; a 401 body of any size
// does not matter.
func TestMaxBytes(t *testing.T) {
	// sized answers body padded with spaces to n bytes, in one write
	// (Content-Length) or flushed in two (chunked).
	sized := func(body string, n int, chunked bool) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			b := body + strings.Repeat(" ", n-len(body))
			if chunked {
				_, _ = w.Write([]byte(b[:n/2]))
				w.(http.Flusher).Flush()
				b = b[n/2:]
			}
			_, _ = w.Write([]byte(b))
		}
	}
	endless := func(w http.ResponseWriter, r *http.Request) {
		chunk := []byte(strings.Repeat(" ", 4096))
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}
	tests := []struct {
		name    string
		max     int64
		prm, as int // sizes; 0 leaves the document as it is
		chunked bool
		err     error
	}{
		{name: "at the bound", max: 2000, prm: 2000, as: 2000},
		{name: "at the bound, chunked", max: 2000, prm: 2000, as: 2000, chunked: true},
		{name: "protected resource metadata over", max: 2000, prm: 2001, err: ErrMetadata},
		{name: "protected resource metadata over, chunked", max: 2000, prm: 2001, chunked: true, err: ErrMetadata},
		{name: "authorization server metadata over", max: 2000, as: 2001, err: ErrMetadata},
		{name: "authorization server metadata over, chunked", max: 2000, as: 2001, chunked: true, err: ErrMetadata},
		{name: "the default, at the bound", prm: 64 << 10},
		{name: "the default, over", prm: 64<<10 + 1, chunked: true, err: ErrMetadata},
		{name: "an endless document", max: 2000, prm: -1, err: ErrMetadata},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, false)
			b := f.srv.URL
			standard(f)
			f.route(map[string]http.HandlerFunc{"/mcp": func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("WWW-Authenticate", "Bearer")
				w.WriteHeader(http.StatusUnauthorized)
				_, _ = w.Write([]byte(strings.Repeat("x", 1<<20)))
			}})
			switch {
			case tt.prm > 0:
				f.route(map[string]http.HandlerFunc{prmMCP: sized(prmDoc(b+"/mcp", b), tt.prm, tt.chunked)})
			case tt.prm < 0:
				f.route(map[string]http.HandlerFunc{prmMCP: endless})
			}
			if tt.as > 0 {
				f.route(map[string]http.HandlerFunc{asRoot: sized(asDoc(b), tt.as, tt.chunked)})
			}
			_, err := Discover(context.Background(), Config{URL: b + "/mcp", HTTPClient: f.srv.Client(), MaxBytes: tt.max})
			if err != nil {
				t.Log(err)
			}
			checkErr(t, err, tt.err)
		})
	}
}

// TestDeadline: a server that does not answer, or stops sending its
// answer, holds Discover only until ctx's deadline, or the client's
// Timeout.
func TestDeadline(t *testing.T) {
	stall := func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}
	stallBody := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"resource":`))
		w.(http.Flusher).Flush()
		stall(w, r)
	}
	tests := []struct {
		name          string
		route         string
		h             http.HandlerFunc
		clientTimeout bool
	}{
		{name: "the probe", route: "/mcp", h: stall},
		{name: "the protected resource metadata", route: prmMCP, h: stall},
		{name: "the body of the protected resource metadata", route: prmMCP, h: stallBody},
		{name: "the authorization server metadata", route: asRoot, h: stall},
		{name: "the client's Timeout", route: prmMCP, h: stallBody, clientTimeout: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, false)
			standard(f)
			f.route(map[string]http.HandlerFunc{tt.route: tt.h})
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			client := f.srv.Client()
			if tt.clientTimeout {
				ctx = context.Background()
				client.Timeout = 200 * time.Millisecond
			}
			start := time.Now()
			_, err := Discover(ctx, Config{URL: f.srv.URL + "/mcp", HTTPClient: client})
			if took := time.Since(start); took > 5*time.Second {
				t.Fatalf("Discover took %v", took)
			}
			t.Log(err)
			checkErr(t, err, errOther)
			if !tt.clientTimeout && !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("err = %v, want the ctx's deadline", err)
			}
			if u := f.srv.URL + tt.route; !strings.Contains(err.Error(), u) {
				t.Fatalf("err = %v, does not name %s", err, u)
			}
		})
	}
}

// remote serves a fake as https://example.com, a host that is not a
// loopback host, whatever address a request is for.
func remote(t *testing.T) (*fake, *http.Client) {
	f := newFake(t, true)
	tr := f.srv.Client().Transport.(*http.Transport).Clone()
	tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, f.srv.Listener.Addr().String())
	}
	t.Cleanup(tr.CloseIdleConnections)
	return f, &http.Client{Transport: tr}
}

// TestRemote: when Config.URL is not on a loopback host, every URL must be
// https: http is refused even to a loopback host.
func TestRemote(t *testing.T) {
	const b = "https://example.com"
	type routes = map[string]http.HandlerFunc
	tests := []struct {
		name   string
		url    string
		routes func(local string) routes
		want   []string // requests after the probe
		err    error
	}{{
		name: "https throughout, the resource with case and the default port",
		url:  b + "/mcp",
		routes: func(string) routes {
			return routes{prmMCP: doc(prmDoc("HTTPS://Example.COM:443/mcp", b)), asRoot: doc(asDoc(b))}
		},
		want: []string{"GET " + prmMCP, "GET " + asRoot},
	}, {
		name:   "the URL with the default port",
		url:    b + ":443/mcp",
		routes: func(string) routes { return routes{prmMCP: doc(prmDoc(b+"/mcp", b)), asRoot: doc(asDoc(b))} },
		want:   []string{"GET " + prmMCP, "GET " + asRoot},
	}, {
		name: "resource_metadata over http to a loopback host",
		url:  b + "/mcp",
		routes: func(local string) routes {
			return routes{"/mcp": challenge(`Bearer resource_metadata="` + local + prmMCP + `"`), prmMCP: doc(prmDoc(b+"/mcp", b))}
		},
		err: ErrMetadata,
	}, {
		name: "an authorization server over http to a loopback host",
		url:  b + "/mcp",
		routes: func(local string) routes {
			return routes{prmMCP: doc(prmDoc(b+"/mcp", local)), asRoot: doc(asDoc(local))}
		},
		want: []string{"GET " + prmMCP},
		err:  ErrMetadata,
	}, {
		name: "a token endpoint over http to a loopback host",
		url:  b + "/mcp",
		routes: func(local string) routes {
			return routes{prmMCP: doc(prmDoc(b+"/mcp", b)), asRoot: doc(asDoc(b, set("token_endpoint", local+"/token")))}
		},
		want: []string{"GET " + prmMCP, "GET " + asRoot},
		err:  ErrMetadata,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, client := remote(t)
			f.route(map[string]http.HandlerFunc{"/mcp": bare})
			f.route(tt.routes("http://" + f.srv.Listener.Addr().String()))
			res, err := Discover(context.Background(), Config{URL: tt.url, HTTPClient: client})
			if err != nil {
				t.Log(err)
			}
			checkErr(t, err, tt.err)
			want := append([]string{"POST /mcp"}, tt.want...)
			if got := f.requests(); strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("requests %q, want %q", got, want)
			}
			if err == nil && (res.Server.Issuer != b || res.Server.AuthorizationEndpoint != b+"/authorize") {
				t.Fatalf("got %+v", res)
			}
		})
	}
}

// TestConfigURL: a Config.URL that is not an https URL (or http to a
// loopback host) is refused before any request.
func TestConfigURL(t *testing.T) {
	client := &http.Client{Transport: roundTripper(func(r *http.Request) (*http.Response, error) {
		t.Errorf("a request to %s", r.URL)
		return nil, errors.New("no")
	})}
	for _, u := range []string{
		"", "/mcp", "example.com/mcp", "ftp://example.com/mcp", "http://example.com/mcp", "http://10.0.0.1/mcp",
		"https://user:pass@example.com/mcp", "https://example.com/mcp#frag", "https://example.com/mcp#",
		"https://example.com/" + strings.Repeat("m", 2048), "https://exa mple.com/", "https:///mcp",
	} {
		_, err := Discover(context.Background(), Config{URL: u, HTTPClient: client})
		if err == nil || errors.Is(err, ErrMetadata) || errors.Is(err, ErrNotProtected) {
			t.Errorf("Config.URL %q: err = %v", u, err)
		}
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestDefaultClient: without Config.HTTPClient, a client of its own (that
// follows no redirect either).
func TestDefaultClient(t *testing.T) {
	f := newFake(t, false)
	standard(f)
	b := f.srv.URL
	if _, err := Discover(context.Background(), Config{URL: b + "/mcp"}); err != nil {
		t.Fatal(err)
	}
	f.route(map[string]http.HandlerFunc{prmMCP: redirect(http.StatusFound, prmRoot), prmRoot: doc(prmDoc(b+"/mcp", b))})
	_, err := Discover(context.Background(), Config{URL: b + "/mcp"})
	checkErr(t, err, ErrMetadata)
}

func TestCanonical(t *testing.T) {
	tests := []struct {
		a, b  string
		equal bool
	}{
		{"https://Example.COM/mcp", "https://example.com/mcp", true},
		{"HTTPS://example.com/mcp", "https://example.com/mcp", true},
		{"https://example.com:443/mcp", "https://example.com/mcp", true},
		{"http://localhost:80/mcp", "http://LOCALHOST/mcp", true},
		{"https://[::1]:443/mcp", "https://[::1]/mcp", true},
		{"https://example.com", "https://example.com/", true},
		{"https://example.com/mcp?a=1", "https://example.com/mcp?a=1", true},
		{"https://example.com/mcp?", "https://example.com/mcp", true},
		{"https://example.com:8443/mcp", "https://example.com/mcp", false},
		{"https://example.com:80/mcp", "https://example.com/mcp", false},
		{"http://example.com/mcp", "https://example.com/mcp", false},
		{"https://example.com/mcp/", "https://example.com/mcp", false},
		{"https://example.com/MCP", "https://example.com/mcp", false},
		{"https://example.com/a%2Fb", "https://example.com/a/b", false},
		{"https://example.com/mcp?a=1", "https://example.com/mcp", false},
		{"https://example.com/mcp?a=1", "https://example.com/mcp?A=1", false},
		{"https://example.com.", "https://example.com", false},
	}
	for _, tt := range tests {
		a, err := url.Parse(tt.a)
		if err != nil {
			t.Fatal(err)
		}
		b, err := url.Parse(tt.b)
		if err != nil {
			t.Fatal(err)
		}
		if got := canonical(a) == canonical(b); got != tt.equal {
			t.Errorf("%s and %s: equal %v (%s, %s), want %v", tt.a, tt.b, got, canonical(a), canonical(b), tt.equal)
		}
	}
}

func TestCheckURL(t *testing.T) {
	tests := []struct {
		url      string
		local    bool // http to a loopback host allowed
		ok, okIf bool // ok: accepted; okIf: accepted only when local
	}{
		{url: "https://example.com", ok: true},
		{url: "HTTPS://example.com/a?b=c", ok: true},
		{url: "https://example.com:8443/a/b", ok: true},
		{url: "https://127.0.0.1/", ok: true},
		{url: "https://[2001:db8::1]:8443/", ok: true},
		{url: "http://127.0.0.1:8080/x", okIf: true},
		{url: "http://127.5.6.7/", okIf: true},
		{url: "http://[::1]:1/", okIf: true},
		{url: "http://LocalHost/", okIf: true},
		{url: "http://example.com/"},
		{url: "http://10.0.0.1/"},
		{url: "http://[::2]/"},
		{url: "http://localhost.example.com/"},
		{url: "http://127.0.0.1.example.com/"},
		{url: "https://user@example.com/"},
		{url: "https://user:pw@example.com/"},
		{url: "https://example.com/#"},
		{url: "https://example.com/#f"},
		{url: "https:example.com"},
		{url: "//example.com/"},
		{url: "https:///x"},
		{url: "https://:443/"},
		{url: "https://exa mple.com/"},
		{url: "https://example.com/\u00e9"},
		{url: "https://example.com/\x00"},
		{url: "https://example.com/\x7f"},
		{url: "ftp://example.com/"},
		{url: "javascript:alert(1)"},
		{url: "file:///etc/passwd"},
		{url: ""},
		{url: "https://example.com/" + strings.Repeat("a", 2048)},
	}
	for _, tt := range tests {
		for _, local := range []bool{false, true} {
			_, err := checkURL(tt.url, local)
			if want := tt.ok || (tt.okIf && local); (err == nil) != want {
				t.Errorf("checkURL(%q, local %v) = %v, want ok %v", tt.url, local, err, want)
			}
		}
	}
	if _, err := checkURL("https://example.com/"+strings.Repeat("a", 2048-len("https://example.com/")), false); err != nil {
		t.Errorf("a URL of 2 KiB: %v", err)
	}
}

// TestErrorText: what a server sends is quoted in errors at most 256
// bytes long, without control characters.
func TestErrorText(t *testing.T) {
	if got := cut("a\x00b\xffc\u0085d\u00e9\n"); got != "a?b?c?d\u00e9?" {
		t.Fatalf("cut = %q", got)
	}
	if got := cut(strings.Repeat("é", 1000)); len(got) > maxErrorText+len("…")+1 || !strings.HasSuffix(got, "…") {
		t.Fatalf("cut of 2000 bytes: %d bytes", len(got))
	}
	f := newFake(t, false)
	b := f.srv.URL
	long := b + "/" + strings.Repeat("r", 2000)
	f.route(map[string]http.HandlerFunc{"/mcp": bare, prmMCP: doc(prmDoc(long, b))})
	_, err := Discover(context.Background(), Config{URL: b + "/mcp", HTTPClient: f.srv.Client()})
	checkErr(t, err, ErrMetadata)
	if len(err.Error()) > 1000 {
		t.Fatalf("an error of %d bytes: %v", len(err.Error()), err)
	}
}
