package otelmcp_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/mcptest"
)

// Calls of several tenants at once, succeeding and failing in turn, each
// get a span with their own attributes only: nothing of another request
// (its tenant, session, id or error) reaches a span, whatever room the
// interceptor reuses between requests.
func TestSpansOfConcurrentCallsKeepTheirOwn(t *testing.T) {
	o := newObs(t)
	srv := httptest.NewServer(mcphandler.New(o.config()))
	defer srv.Close()
	const tenants, calls = 4, 25
	sessions := map[string]string{} // tenant -> session id
	var wg sync.WaitGroup
	var mu sync.Mutex
	for n := range tenants {
		tenant := fmt.Sprintf("t%d", n)
		c := mcptest.Dial(srv.URL, mcptest.WithToken(tenant+"-user"))
		defer c.Close()
		if _, err := c.Initialize(context.Background()); err != nil {
			t.Fatal(err)
		}
		sessions[tenant] = c.SessionID()
		wg.Go(func() {
			for k := range calls {
				tool := "echo"
				if (k+n)%2 == 1 {
					tool = "sad"
				}
				if _, err := c.CallTool(context.Background(), tool, nil); err != nil {
					mu.Lock()
					t.Errorf("%s %s: %v", tenant, tool, err)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	eventually(t, "every span", func() bool { return len(o.spans("tools/call echo"))+len(o.spans("tools/call sad")) == tenants*calls })
	ids := map[string]bool{}
	for _, tool := range []string{"echo", "sad"} {
		for _, s := range o.spans("tools/call " + tool) {
			a := attrs(s)
			tenant := a["mcphandler.tenant"]
			if sid, ok := sessions[tenant]; !ok || a["mcp.session.id"] != sid {
				t.Fatalf("span of tenant %q has session %q, want %q (all: %v)", tenant, a["mcp.session.id"], sid, a)
			}
			if a["gen_ai.tool.name"] != tool || a["mcp.method.name"] != "tools/call" {
				t.Fatalf("span %q: %v", s.Name(), a)
			}
			wantErr := map[string]string{"echo": "", "sad": "tool_error"}[tool]
			if a["error.type"] != wantErr || a["rpc.response.status_code"] != "" || a["mcphandler.confirm.id"] != "" {
				t.Fatalf("span %q: error.type %q, want %q (all: %v)", s.Name(), a["error.type"], wantErr, a)
			}
			if len(a) != len(s.Attributes()) {
				t.Fatalf("span %q has repeated attributes: %v", s.Name(), s.Attributes())
			}
			id := tenant + "/" + a["jsonrpc.request.id"]
			if ids[id] {
				t.Fatalf("request id %s on two spans", id)
			}
			ids[id] = true
		}
	}
}
