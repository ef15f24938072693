// Command confirm is an MCP server whose destructive tool runs only once
// the person at the client confirmed the call: the handler asks with an
// elicitation on 2025 sessions and an input request on 2026-07-28, and a
// client that cannot be asked gets a tool error instead of a run.
//
//	go run ./examples/confirm    # http://127.0.0.1:8080/mcp, token "alice"
package main

import (
	"context"
	"flag"
	"log"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/auth"
)

// notes are the notes the tools list and delete.
type notes struct {
	mu    sync.Mutex
	names []string
}

type deleteIn struct {
	Name string `json:"name" jsonschema:"the note to delete"`
}

func newHandler(n *notes) *mcphandler.Handler {
	list := mcphandler.NewTool(mcphandler.Tool{Name: "list_notes", Annotations: &mcphandler.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, call *mcphandler.ToolCall, _ struct{}) ([]string, error) {
			n.mu.Lock()
			defer n.mu.Unlock()
			return slices.Clone(n.names), nil
		})
	// No DestructiveHint: by the spec's defaults a tool may destroy.
	del := mcphandler.NewTool(mcphandler.Tool{Name: "delete_note"},
		func(ctx context.Context, call *mcphandler.ToolCall, in deleteIn) (string, error) {
			n.mu.Lock()
			defer n.mu.Unlock()
			n.names = slices.DeleteFunc(n.names, func(s string) bool { return s == in.Name })
			return "deleted " + in.Name, nil
		})
	return mcphandler.New(mcphandler.Config{
		Authenticate: auth.NewAPIKeys(map[string]mcphandler.Identity{"alice": {Tenant: "acme", Subject: "alice"}}).Authenticate,
		ListTools:    func(context.Context) ([]mcphandler.Tool, error) { return []mcphandler.Tool{list, del}, nil },
		BeforeCall:   mcphandler.ConfirmDestructive(nil), // asks before delete_note, not list_notes
	})
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "address to listen on")
	flag.Parse()
	http.Handle("/mcp", newHandler(&notes{names: []string{"groceries", "ideas"}}))
	log.Printf("MCP endpoint http://%s/mcp (Authorization: Bearer alice)", *addr)
	srv := &http.Server{Addr: *addr, ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.ListenAndServe())
}
