// Command conformance serves the fixture set that the official MCP
// conformance suite tests, using only the public API of mcphandler, as any
// user of the library would: @modelcontextprotocol/conformance@0.1.16 for
// the 2025 revisions (initialize, sessions) and 0.2.0-alpha.12 for the
// stateless revision 2026-07-28, both on the same endpoint.
//
//	go run ./examples/conformance                       # http://127.0.0.1:3917/mcp
//	go run ./examples/conformance -addr 127.0.0.1:0     # any free port
//
// It prints its URL once it listens. It has no Authenticate hook: the suite
// sends no token. scripts/conformance.sh runs both suites against it.
//
// The fixtures are split by kind: tools.go (the 2025 tools), stateless.go
// (the diagnostic tools of the 2026-07-28 scenarios), inputrequired.go
// (the multi round-trip tools and prompt), resources.go (resources and the
// resource template), prompts.go (prompts and completion), media.go (the
// tiny PNG and WAV the content tools return). Every handler is written once
// and serves both eras.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/mcphandler/mcphandler"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:3917", "loopback address to listen on (port 0 picks a free port)")
	path := flag.String("path", "/mcp", "path of the MCP endpoint")
	flag.Parse()

	if err := run(*addr, *path); err != nil {
		fmt.Fprintln(os.Stderr, "conformance:", err)
		os.Exit(1)
	}
}

// fixtureTools returns every fixture tool; n delivers their notifications.
func fixtureTools(n *notifier) []mcphandler.Tool {
	tools := conformanceTools()
	tools = append(tools, statelessTools(n)...)
	tools = append(tools, inputRequiredTools()...)
	return append(tools, taskTools()...)
}

// newHandler returns the MCP handler with every conformance fixture.
func newHandler() *mcphandler.Handler {
	n := &notifier{}
	tools := fixtureTools(n)
	h := mcphandler.New(mcphandler.Config{
		Name:         "mcphandler-conformance",
		Version:      "0.1.0",
		Authenticate: mcphandler.InsecureAnonymous, // the conformance suites call without credentials
		ListTools: func(context.Context) ([]mcphandler.Tool, error) {
			return tools, nil
		},
		ListResources:         listResources,
		ListResourceTemplates: listResourceTemplates,
		ReadResource:          readResource,
		ListPrompts:           listPrompts,
		GetPrompt:             getPrompt,
		Complete:              complete,
		ListSkills:            conformanceSkills,
	})
	n.h = h
	return h
}

func run(addr, path string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("-addr %s: the conformance server listens on loopback only", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}

	mux := http.NewServeMux()
	mux.Handle(path, newHandler())
	// ReadHeaderTimeout and IdleTimeout bound slow or idle clients. No
	// ReadTimeout or WriteTimeout: they would cut SSE streams (GET,
	// subscriptions/listen, long tool calls); the handler bounds the time
	// it reads a POST body itself (Config.Limits.ReadBodyTimeout).
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		<-ctx.Done()
		// GET streams stay open until the client leaves: give in-flight
		// requests a moment, then cut what is left.
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if srv.Shutdown(sctx) != nil {
			srv.Close()
		}
	}()

	fmt.Printf("conformance server listening on http://%s%s\n", ln.Addr(), path)
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	<-stopped
	log.Print("conformance server stopped")
	return nil
}
