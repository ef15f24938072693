// Command soakserver is one replica of the server scripts/soak.sh runs two
// of, on one Redis, for an hour under every kind of request (the driver is
// internal/cmd/soak). It serves, at /mcp, the revisions with sessions and
// 2026-07-28, and at /sse and /messages the 2024-11-05 HTTP+SSE transport,
// to fixed demo identities of three tenants (bearer tokens below), with
// these tools:
//
//	echo          {"text"}       read-only; returns the text
//	delete_doc    {"id"}         BeforeCall asks a confirm (a 2025 elicitation, a 2026-07-28 input request)
//	transfer      {"ref"}        BeforeCall asks an approval (approval.Store; four eyes: another person of the tenant)
//	build_report  {"ms"}         a task when the client can take one; the work sleeps ms (at most 5000)
//	slow          {"ms"}         read-only; sleeps ms (at most 10000) or until the call is cancelled
//
// The sessions, confirms, tasks and approvals live in the Redis of -redis
// under -prefix, sealed and signed with -state-key, which every replica
// and the driver share. The lifetimes the soak depends on are flags, short
// by default, so that everything the load makes leaves Redis within a
// minute or two: -session-ttl, -resume-window, -confirm-timeout,
// -approval-ttl, -approval-linger, -task-ttl, -task-retention.
//
// -debug-addr serves, on a loopback port of its own and never on the MCP
// port, /debug/soak (the process id and its goroutines, as JSON) and
// net/http/pprof. -addr-file and -debug-addr-file write the addresses the
// server listens on (with port 0, one the system chose).
//
// -self-test-leak is a self-test of the soak only: it leaks one goroutine
// per HTTP request, so that one can see the soak fail when something
// grows. Never use it otherwise.
//
// Bearer tokens (tenant, subject, role):
//
//	acme-viewer     acme     alice  viewer
//	acme-admin      acme     bob    admin
//	globex-editor   globex   carol  editor
//	globex-admin    globex   dan    admin
//	initech-editor  initech  erin   editor
//	initech-admin   initech  frank  admin
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/approval"
	"github.com/mcphandler/mcphandler/auth"
	"github.com/mcphandler/mcphandler/internal/redisflag"
	"github.com/mcphandler/mcphandler/session"
	"github.com/mcphandler/mcphandler/session/redisstore"
)

// Tokens are the demo's bearer tokens.
var Tokens = map[string]mcphandler.Identity{
	"acme-viewer":    {Tenant: "acme", Subject: "alice", Role: "viewer"},
	"acme-admin":     {Tenant: "acme", Subject: "bob", Role: "admin"},
	"globex-editor":  {Tenant: "globex", Subject: "carol", Role: "editor"},
	"globex-admin":   {Tenant: "globex", Subject: "dan", Role: "admin"},
	"initech-editor": {Tenant: "initech", Subject: "erin", Role: "editor"},
	"initech-admin":  {Tenant: "initech", Subject: "frank", Role: "admin"},
}

// ApprovalPage is where approvals point; nothing serves it: the soak
// decides them through the approval store, as the page would.
const ApprovalPage = "https://approvals.soak.invalid/approvals/"

// options are what a replica is built from.
type options struct {
	confirmTimeout, approvalTTL, approvalLinger time.Duration
	sessionTTL, resumeWindow                    time.Duration
	taskTTL, taskRetention                      time.Duration
}

func defaults() options {
	return options{
		confirmTimeout: 10 * time.Second, approvalTTL: 5 * time.Second, approvalLinger: 10 * time.Second,
		sessionTTL: time.Minute, resumeWindow: 30 * time.Second,
		taskTTL: 30 * time.Second, taskRetention: 10 * time.Second,
	}
}

func main() {
	o := defaults()
	addr := flag.String("addr", "127.0.0.1:0", "address of the MCP endpoint")
	addrFile := flag.String("addr-file", "", "if set, write the address the MCP endpoint listens on to this file")
	debugAddr := flag.String("debug-addr", "127.0.0.1:0", "loopback address of /debug/soak and net/http/pprof")
	debugFile := flag.String("debug-addr-file", "", "if set, write the debug address to this file")
	rf := redisflag.Register(flag.CommandLine, os.Getenv)
	prefix := flag.String("prefix", "mcph-soak:", "prefix of every key in Redis (every replica uses the same)")
	stateKey := flag.String("state-key", os.Getenv("MCP_STATE_KEY"), "the secret every replica shares, at least 32 bytes (default $MCP_STATE_KEY)")
	flag.DurationVar(&o.confirmTimeout, "confirm-timeout", o.confirmTimeout, "Config.ConfirmTimeout")
	flag.DurationVar(&o.approvalTTL, "approval-ttl", o.approvalTTL, "how long an approval waits for a decision (at most -confirm-timeout)")
	flag.DurationVar(&o.approvalLinger, "approval-linger", o.approvalLinger, "how long an approval's record outlives its expiry")
	flag.DurationVar(&o.sessionTTL, "session-ttl", o.sessionTTL, "Config.Sessions.TTL")
	flag.DurationVar(&o.resumeWindow, "resume-window", o.resumeWindow, "Config.Sessions.ResumeWindow")
	flag.DurationVar(&o.taskTTL, "task-ttl", o.taskTTL, "Config.Tasks.TTL")
	flag.DurationVar(&o.taskRetention, "task-retention", o.taskRetention, "Config.Tasks.ResultRetention")
	leak := flag.Bool("self-test-leak", false, "SELF-TEST OF THE SOAK ONLY: leak one goroutine per HTTP request, so that the soak can be seen to fail")
	flag.Parse()

	topo, err := rf.Topology()
	if err == nil && topo.Kind == redisflag.None {
		err = errors.New("a Redis is required (-redis URL): the replicas share it")
	}
	if err == nil && len(*stateKey) < 32 {
		err = errors.New("-state-key must be at least 32 bytes")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "soakserver:", err)
		flag.Usage()
		os.Exit(2)
	}
	c, err := redisflag.NewClient(topo, 0)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	store := redisstore.New(c, redisstore.Options{Prefix: *prefix})
	defer store.Close()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	h, approvals, err := newHandler(store, [][]byte{[]byte(*stateKey)}, o, logger)
	if err != nil {
		log.Fatal(err)
	}
	defer approvals.Close()

	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	sse, messages := h.LegacySSE("/messages")
	mux.Handle("/sse", sse)
	mux.Handle("/messages", messages)
	mux.Handle("/ready", h.Ready())
	var root http.Handler = mux
	if *leak {
		root = leakPerRequest(mux)
		logger.Warn("SELF-TEST OF THE SOAK: leaking one goroutine per request")
	}

	l, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	dl, err := net.Listen("tcp", *debugAddr)
	if err != nil {
		log.Fatal(err)
	}
	if !dl.Addr().(*net.TCPAddr).IP.IsLoopback() {
		log.Fatalf("-debug-addr %s is not a loopback address", dl.Addr())
	}
	writeAddr(*addrFile, l.Addr())
	writeAddr(*debugFile, dl.Addr())
	// ReadHeaderTimeout and IdleTimeout bound slow or idle clients; no
	// ReadTimeout or WriteTimeout, which would cut the SSE streams.
	srv := &http.Server{Handler: root, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	dbg := &http.Server{Handler: debugMux(), ReadHeaderTimeout: 10 * time.Second}
	go dbg.Serve(dl)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	failed := make(chan error, 1)
	go func() { failed <- srv.Serve(l) }()
	select {
	case err := <-failed:
		log.Fatal(err)
	case <-ctx.Done():
	}
	grace, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	srv.Shutdown(grace)
	dbg.Close()
	h.Close()
}

// writeAddr writes a to file, unless file is "".
func writeAddr(file string, a net.Addr) {
	if file == "" {
		return
	}
	if err := os.WriteFile(file, []byte(a.String()+"\n"), 0o600); err != nil {
		log.Fatal(err)
	}
}

// sharedStore is a session store approvals can live in too (the Redis
// store, or session.Memory in the tests).
type sharedStore interface {
	session.Store
	approval.Shared
}

// newHandler returns the replica's handler and its approval store, over
// store and keys.
func newHandler(store sharedStore, keys [][]byte, o options, logger *slog.Logger) (*mcphandler.Handler, *approval.Store, error) {
	roles := []string{"viewer", "editor", "admin"}
	approvals, err := approval.New(approval.Config{Store: store, Keys: keys, URL: ApprovalPage, Roles: roles,
		TTL: o.approvalTTL, Linger: o.approvalLinger, Logger: logger})
	if err != nil {
		return nil, nil, err
	}
	tools := soakTools()
	h := mcphandler.New(mcphandler.Config{
		Name:           "soakserver",
		Authenticate:   auth.NewAPIKeys(Tokens).Authenticate,
		Roles:          roles,
		ListTools:      func(context.Context) ([]mcphandler.Tool, error) { return tools, nil },
		BeforeCall:     beforeCall,
		Store:          store,
		StateKeys:      keys,
		Approvals:      approvals,
		ConfirmTimeout: o.confirmTimeout,
		Sessions:       mcphandler.SessionOptions{TTL: o.sessionTTL, ResumeWindow: o.resumeWindow},
		Tasks:          mcphandler.TaskOptions{TTL: o.taskTTL, ResultRetention: o.taskRetention},
		Logger:         logger,
	})
	return h, approvals, nil
}

// beforeCall asks a confirm before delete_doc and an approval before
// transfer; everything else runs.
func beforeCall(_ context.Context, call *mcphandler.ToolCall) (mcphandler.Decision, error) {
	switch call.Tool.Name {
	case "delete_doc":
		var in idIn
		json.Unmarshal(call.Arguments, &in)
		return mcphandler.Confirm("Delete document " + in.ID + "?"), nil
	case "transfer":
		return mcphandler.Approve("Transfer?", approval.Policy{}), nil
	}
	return mcphandler.Allow(), nil
}

type textIn struct {
	Text string `json:"text" jsonschema:"Text to echo."`
}

type idIn struct {
	ID string `json:"id" jsonschema:"A document id."`
}

type refIn struct {
	Ref string `json:"ref" jsonschema:"A reference that makes the call distinct."`
}

type msIn struct {
	MS int `json:"ms" jsonschema:"Milliseconds."`
}

var readOnly = &mcphandler.ToolAnnotations{ReadOnlyHint: true}

func soakTools() []mcphandler.Tool {
	sleep := func(ctx context.Context, ms, most int) error {
		t := time.NewTimer(time.Duration(min(max(ms, 0), most)) * time.Millisecond)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return []mcphandler.Tool{
		mcphandler.NewTool(mcphandler.Tool{Name: "echo", Description: "Echoes the text.", Annotations: readOnly},
			func(_ context.Context, _ *mcphandler.ToolCall, in textIn) (string, error) { return in.Text, nil }),
		mcphandler.NewTool(mcphandler.Tool{Name: "delete_doc", Description: "Deletes a document, once a human confirmed."},
			func(_ context.Context, call *mcphandler.ToolCall, in idIn) (string, error) {
				return "deleted " + in.ID + " of " + call.Identity.Tenant, nil
			}),
		mcphandler.NewTool(mcphandler.Tool{Name: "transfer", Description: "Transfers, once another person of the tenant approved."},
			func(_ context.Context, call *mcphandler.ToolCall, in refIn) (string, error) {
				return "transferred " + in.Ref + " for " + call.Identity.Tenant, nil
			}),
		{
			Name: "build_report", Description: "Builds a report, as a task when the client can take one.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"ms":{"type":"integer","minimum":0,"maximum":5000}}}`),
			Annotations: readOnly, TaskSupport: mcphandler.TaskOptional,
			Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
				var in msIn
				if err := json.Unmarshal(call.Arguments, &in); err != nil {
					return nil, mcphandler.BadArgs("ms must be an integer")
				}
				return call.RunAsTask(ctx, func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
					if err := sleep(ctx, in.MS, 5000); err != nil {
						return nil, err
					}
					return mcphandler.TextResult("report of " + call.Identity.Tenant), nil
				})
			},
		},
		mcphandler.NewTool(mcphandler.Tool{Name: "slow", Description: "Sleeps ms milliseconds, or until cancelled.", Annotations: readOnly},
			func(ctx context.Context, _ *mcphandler.ToolCall, in msIn) (string, error) {
				if err := sleep(ctx, in.MS, 10000); err != nil {
					return "", err
				}
				return "slept", nil
			}),
	}
}

// debugMux serves /debug/soak and net/http/pprof.
func debugMux() *http.ServeMux {
	m := http.NewServeMux()
	m.HandleFunc("/debug/soak", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]int{"pid": os.Getpid(), "goroutines": runtime.NumGoroutine()})
	})
	m.HandleFunc("/debug/pprof/", pprof.Index)
	m.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	m.HandleFunc("/debug/pprof/profile", pprof.Profile)
	m.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	m.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return m
}

// leakPerRequest is the self-test's leak: one goroutine per request,
// blocked for ever.
func leakPerRequest(next http.Handler) http.Handler {
	var never chan struct{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		go func() { <-never }()
		next.ServeHTTP(w, r)
	})
}
