package main

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/mcphandler/mcphandler/mcptest"
	"github.com/mcphandler/mcphandler/session/redisstore"
	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
)

// startReplica serves the example's replica called name on a store of
// its own, built from the URL as main builds it, under prefix.
func startReplica(t *testing.T, name, prefix string) *httptest.Server {
	client, err := redisstore.NewClient(redisstore.Single, redistest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	store := redisstore.New(client, redisstore.Options{Prefix: prefix})
	h := newReplica(name, store, []byte("a state key of 32 bytes or more, shared"))
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	mux.Handle("/ready", h.Ready())
	srv := httptest.NewServer(mux)
	t.Cleanup(func() { srv.Close(); h.Close(); store.Close(); client.Close() })
	return srv
}

// TestReplicas runs two replicas of the example on real Redis: both are
// ready, and a session opened on one is served by the other.
func TestReplicas(t *testing.T) {
	prefix := redistest.Prefix(t, redistest.Client(t))
	a, b := startReplica(t, "A", prefix), startReplica(t, "B", prefix)
	for _, srv := range []*httptest.Server{a, b} {
		resp, err := http.Get(srv.URL + "/ready")
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("/ready: %v %v", resp, err)
		}
		resp.Body.Close()
	}
	first := mcptest.Dial(a.URL+"/mcp", mcptest.WithToken("alice"))
	defer first.Close()
	if _, err := first.Initialize(t.Context()); err != nil {
		t.Fatal(err)
	}
	second := mcptest.Dial(b.URL+"/mcp", mcptest.WithToken("alice"))
	defer second.Close()
	second.SetSessionID(first.SessionID())
	second.SetProtocolVersion(first.ProtocolVersion())
	for i, c := range []*mcptest.Client{first, second} {
		res, err := c.CallTool(t.Context(), "where", nil)
		if want := "session " + first.SessionID() + " served by " + "AB"[i:i+1]; err != nil || res.Text() != want {
			t.Fatalf("where: %v %v, want %q", res, err, want)
		}
	}
}
