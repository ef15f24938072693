package mcphandler_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/session/redisstore"
	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
)

// probe sends method to the readiness handler at url and returns the
// status and body.
func probe(t *testing.T, method, url string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// awaitProbe probes url until it answers want, for at most d.
func awaitProbe(t *testing.T, url string, want int, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		got, body := probe(t, http.MethodGet, url)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("readiness after %v: %d %q, want %d", d, got, body, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestReadyMemory: with the memory store the handler is ready, to GET and
// HEAD only, without authentication (the probe's caller has no token);
// after Close it is not, so a replica shutting down leaves the rotation.
func TestReadyMemory(t *testing.T) {
	h := mcphandler.New((&fixture{}).config())
	srv := httptest.NewServer(h.Ready())
	defer srv.Close()
	if got, body := probe(t, http.MethodGet, srv.URL); got != 200 || body != "ready\n" {
		t.Fatalf("GET: %d %q", got, body)
	}
	if got, _ := probe(t, http.MethodHead, srv.URL); got != 200 {
		t.Fatalf("HEAD: %d", got)
	}
	for _, m := range []string{http.MethodPost, http.MethodDelete, http.MethodPut} {
		if got, _ := probe(t, m, srv.URL); got != http.StatusMethodNotAllowed {
			t.Fatalf("%s: %d, want 405", m, got)
		}
	}
	h.Close()
	if got, body := probe(t, http.MethodGet, srv.URL); got != 503 || strings.Contains(body, "ready") {
		t.Fatalf("GET after Close: %d %q", got, body)
	}
}

// TestReadyRedis: on a Redis store the probe turns 503 when Redis freezes
// or refuses connections and 200 when it answers again, while no client
// sends a request; and the endpoint serves again afterwards.
func TestReadyRedis(t *testing.T) {
	p := redistest.NewProxy(t, "")
	c := p.Client(t)
	h := redisReplica(t, (&fixture{}).config(), c, redistest.Prefix(t, c), redisstore.Options{OpTimeout: 300 * time.Millisecond})
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	mux.Handle("/ready", h.Ready())
	srv := httptest.NewServer(mux)
	defer srv.Close()
	ready := srv.URL + "/ready"
	awaitProbe(t, ready, 200, 5*time.Second)
	p.Stall()
	awaitProbe(t, ready, 503, 5*time.Second)
	p.Resume()
	awaitProbe(t, ready, 200, 5*time.Second)
	p.CutAll()
	p.RefuseConnections()
	awaitProbe(t, ready, 503, 5*time.Second)
	p.AcceptConnections()
	awaitProbe(t, ready, 200, 5*time.Second)

	cl := connect(t, h, "acme-viewer")
	if _, err := cl.CallTool(t.Context(), "read", nil); err != nil {
		t.Fatalf("a call once ready again: %v", err)
	}
}
