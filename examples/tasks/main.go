// Command tasks is an MCP server whose tool may run longer than a
// request: a 2026-07-28 client that declares the tasks extension (or a
// 2025-11-25 client that sends params.task) gets a task at once and polls
// it with tasks/get, and may cancel it with tasks/cancel; any other
// client waits for the result inline.
//
//	go run ./examples/tasks    # http://127.0.0.1:8080/mcp, token "alice"
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net/http"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/auth"
)

// build_report takes a while: it runs as a task when the client can take
// one. Its handler checks the arguments itself (a hand-written schema is
// advertised, not enforced), then hands the slow part to RunAsTask.
var report = mcphandler.Tool{
	Name:        "build_report",
	InputSchema: json.RawMessage(`{"type":"object","properties":{"seconds":{"type":"integer","minimum":0,"maximum":60}}}`),
	Annotations: &mcphandler.ToolAnnotations{ReadOnlyHint: true},
	TaskSupport: mcphandler.TaskOptional,
	Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
		var in struct{ Seconds int }
		if err := json.Unmarshal(call.Arguments, &in); err != nil || in.Seconds < 0 || in.Seconds > 60 {
			return nil, mcphandler.BadArgs("seconds must be an integer from 0 to 60")
		}
		return call.RunAsTask(ctx, func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
			select {
			case <-time.After(time.Duration(in.Seconds) * time.Second): // the slow work
				return mcphandler.TextResult(fmt.Sprintf("report of %s, %ds", call.Identity.Tenant, in.Seconds)), nil
			case <-ctx.Done(): // tasks/cancel (on any replica), the task's TTL, Handler.Close
				return nil, ctx.Err()
			}
		})
	},
}

func newHandler() *mcphandler.Handler {
	return mcphandler.New(mcphandler.Config{
		Authenticate: auth.NewAPIKeys(map[string]mcphandler.Identity{"alice": {Tenant: "acme", Subject: "alice"}}).Authenticate,
		ListTools:    func(context.Context) ([]mcphandler.Tool, error) { return []mcphandler.Tool{report}, nil },
		Tasks:        mcphandler.TaskOptions{TTL: 10 * time.Minute}, // how long a task and its result are kept
	})
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "address to listen on")
	flag.Parse()
	h := newHandler()
	defer h.Close() // fails the tasks still running, and stops them
	http.Handle("/mcp", h)
	log.Printf("MCP endpoint http://%s/mcp (Authorization: Bearer alice)", *addr)
	srv := &http.Server{Addr: *addr, ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.ListenAndServe())
}
