package mcphandler_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/mcptest"
)

// The attacker wants a trace to name one tool while another runs: params
// that carry _meta (so that interceptors get the target before the call)
// and spell the name so that a second reader might see another one —
// folded case, an escaped key, a folded duplicate, a name nested in the
// arguments. Whatever runs, the target an interceptor is given before next
// and the one it holds after are the tool that ran, on both eras.
func TestAttackInterceptorTargetIsWhatRan(t *testing.T) {
	var ran sync.Map // tool name -> *atomic.Int32
	tool := func(name string) mcphandler.Tool {
		n := new(atomic.Int32)
		ran.Store(name, n)
		return mcphandler.Tool{Name: name, Annotations: &mcphandler.ToolAnnotations{ReadOnlyHint: true},
			Handler: func(context.Context, *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
				n.Add(1)
				return mcphandler.TextResult("ok"), nil
			}}
	}
	tools := []mcphandler.Tool{tool("echo"), tool("other")}
	// The interceptor returns after the answer was written: it hands what
	// it saw over, and the test waits for it.
	type seen struct{ id, before, after string }
	saw := make(chan seen, 16)
	h := mcphandler.New(mcphandler.Config{
		Authenticate: bearer,
		ListTools:    func(context.Context) ([]mcphandler.Tool, error) { return tools, nil },
		Interceptors: []mcphandler.Interceptor{func(ctx context.Context, req *mcphandler.Request, next func(context.Context) mcphandler.Result) mcphandler.Result {
			b := req.Target
			res := next(ctx)
			if req.Method == "tools/call" {
				saw <- seen{string(req.ID), b, req.Target}
			}
			return res
		}},
	})
	srv := httptest.NewServer(h)
	defer srv.Close()
	c := mcptest.Dial(srv.URL, mcptest.WithToken("acme-viewer"))
	defer c.Close()
	if _, err := c.Initialize(context.Background()); err != nil {
		t.Fatal(err)
	}
	counts := func() map[string]int32 {
		m := map[string]int32{}
		ran.Range(func(k, v any) bool { m[k.(string)] = v.(*atomic.Int32).Load(); return true })
		return m
	}
	runs := 0
	const modernMeta = `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}`
	id := 100
	for _, p := range []string{
		`"name":"echo"`,
		`"NAME":"echo"`,
		`"n\u0061me":"echo"`,
		`"name":"other","Name":"echo"`,
		`"Name":"echo","name":"other"`,
		`"arguments":{"name":"other"},"name":"echo"`,
	} {
		for _, era := range []string{"2025", "2026-07-28"} {
			id++
			rid := strconv.Itoa(id)
			was := counts()
			if era == "2025" {
				postRaw(t, c, `{"jsonrpc":"2.0","id":`+rid+`,"method":"tools/call","params":{`+p+`,"_meta":{"k":1}}}`)
			} else {
				modernPost(t, srv, "acme-viewer", `{"jsonrpc":"2.0","id":`+rid+`,"method":"tools/call","params":{`+p+`,"_meta":{`+modernMeta+`}}}`,
					func(hdr http.Header) { hdr.Set("Mcp-Name", "echo") })
			}
			now := counts()
			var which []string
			for name, n := range now {
				if n != was[name] {
					which = append(which, name)
				}
			}
			// A tool that ran was intercepted: wait for the report. A
			// request refused before it reached the interceptors (a
			// 2026-07-28 name that contradicts Mcp-Name) has none.
			wait := 200 * time.Millisecond
			if len(which) > 0 {
				wait = 5 * time.Second
			}
			var b, a string
			got := false
			for deadline := time.After(wait); !got; {
				select {
				case v := <-saw:
					if v.id == rid {
						b, a, got = v.before, v.after, true
					}
				case <-deadline:
					if len(which) > 0 {
						t.Fatalf("%s %s: %v ran, the interceptor saw no tools/call", era, p, which)
					}
					got = true
				}
			}
			runs += len(which)
			switch {
			case len(which) > 1:
				t.Fatalf("%s %s: ran %v", era, p, which)
			case len(which) == 1 && (a != which[0] || b != "" && b != a):
				t.Errorf("%s %s: %s ran, the interceptor was given %q before and %q after", era, p, which[0], b, a)
			case len(which) == 0 && a != "" && b != "" && b != a:
				t.Errorf("%s %s: nothing ran, the interceptor was given %q before and %q after", era, p, b, a)
			}
		}
	}
	if runs < 2 {
		t.Fatalf("only %d of the calls ran a tool: the plain one should have, on both eras", runs)
	}
}
