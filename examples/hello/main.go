// Command hello serves one tool, greet, to the holders of one API key.
package main

import (
	"context"
	"log"
	"net/http"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/auth"
)

type greetIn struct {
	Name string `json:"name" jsonschema:"who to greet"`
}

// greet only reads. Without annotations a tool counts as destructive (the
// spec's defaults), and ConfirmDestructive would ask before every call.
var greet = mcphandler.NewTool(mcphandler.Tool{Name: "greet", Description: "Greets someone.",
	Annotations: &mcphandler.ToolAnnotations{ReadOnlyHint: true}},
	func(ctx context.Context, call *mcphandler.ToolCall, in greetIn) (string, error) {
		return "Hello " + in.Name + " from " + call.Identity.Tenant, nil
	})

var keys = auth.NewAPIKeys(map[string]mcphandler.Identity{ // bearer token → tenant, subject, role
	"k1": {Tenant: "acme", Subject: "alice", Role: "viewer"},
})

func newHandler() *mcphandler.Handler {
	return mcphandler.New(mcphandler.Config{
		Authenticate: keys.Authenticate,
		Roles:        []string{"viewer", "editor", "admin"},
		ListTools:    func(ctx context.Context) ([]mcphandler.Tool, error) { return []mcphandler.Tool{greet}, nil },
		BeforeCall:   mcphandler.ConfirmDestructive(nil), // a human confirms each destructive call
	})
}

func main() {
	mux := http.NewServeMux()
	mux.Handle("/mcp", newHandler())
	srv := &http.Server{Addr: "127.0.0.1:8080", Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	log.Fatal(srv.ListenAndServe())
}
