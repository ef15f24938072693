package mcphandler_test

// Attacks on what a session keeps and decides: its negotiated version,
// the bounds on what a client may store in it, and how many sessions one
// identity may hold, in memory and in Redis shared by replicas.

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/mcptest"
)

// The attacker negotiated 2025-11-25 and then sends another revision's
// MCP-Protocol-Version header, hoping to get what that revision allows: a
// JSON-RPC batch (2025-03-26 only, where confirms cannot be asked), or the
// older elicitation format. The session's negotiated version decides; a
// header that contradicts it is 400 -32600 on POST, GET and DELETE, and
// changes nothing in the session.
func TestAttackVersionHeaderContradictsSession(t *testing.T) {
	f := &fixture{}
	h := mcphandler.New(f.config())
	ctx := context.Background()
	c := connect(t, h, "acme-admin")
	if c.ProtocolVersion() != "2025-11-25" {
		t.Fatalf("negotiated %s", c.ProtocolVersion())
	}
	ping := []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	batch := []byte(`[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"delete_thing"}}]`)
	for _, tc := range []struct {
		name, method, version string
		body                  []byte
	}{
		{"batch under 2025-03-26", "POST", "2025-03-26", batch},
		{"request under 2025-03-26", "POST", "2025-03-26", ping},
		{"request under 2025-06-18", "POST", "2025-06-18", ping},
		{"GET under 2025-03-26", "GET", "2025-03-26", nil},
		{"DELETE under 2025-06-18", "DELETE", "2025-06-18", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(ctx, 5*time.Second) // a GET that is served streams
			defer cancel()
			resp, err := c.Do(ctx, tc.method, tc.body, http.Header{mcptest.HeaderProtocolVersion: {tc.version}})
			if err != nil {
				t.Fatal(err)
			}
			he := newHTTPErrorFrom(resp)
			if he.Status != http.StatusBadRequest || !strings.Contains(string(he.Body), `"code":-32600`) {
				t.Fatalf("%s with MCP-Protocol-Version %s: %d %s, want 400 -32600", tc.method, tc.version, he.Status, he.Body)
			}
		})
	}
	if n := f.count("delete_thing"); n != 0 {
		t.Fatalf("the batched destructive call ran %d times", n)
	}
	// The session is intact, and without the header its version applies.
	c.SetProtocolVersion("")
	if err := c.Ping(ctx); err != nil {
		t.Fatalf("ping without the header: %v", err)
	}
	c.SetProtocolVersion("2025-11-25")
	if err := c.Ping(ctx); err != nil {
		t.Fatalf("ping with the negotiated version: %v", err)
	}

	// A 2025-03-26 session cannot claim a newer revision either.
	old := connect(t, h, "acme-viewer", mcptest.WithProtocolVersion("2025-03-26"))
	old.SetProtocolVersion("2025-11-25")
	var he *mcptest.HTTPError
	if err := old.Ping(ctx); !errors.As(err, &he) || he.Status != http.StatusBadRequest {
		t.Fatalf("2025-03-26 session claiming 2025-11-25: %v, want 400", err)
	}
}

// newHTTPErrorFrom reads a response whose status the test checks; a
// stream (which must not be there) is read only until the test's timeout.
func newHTTPErrorFrom(resp *http.Response) *mcptest.HTTPError {
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return &mcptest.HTTPError{Status: resp.StatusCode, Body: b, Header: resp.Header}
}
