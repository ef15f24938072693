// Command benchserver serves mcphandler for the load harness that compares
// it with other MCP servers: one tool "echo" ({"text": string} -> the text as
// a text block) and -tools N dummy tools, at /mcp, with sessions in memory
// or in Redis: a single server (-redis URL), a Redis Cluster
// (-redis-cluster ADDR[,ADDR...]) or a master watched by Sentinels
// (-redis-sentinel NAME@ADDR[,ADDR...]), or the same from $REDIS_URL,
// $REDIS_CLUSTER or $REDIS_SENTINEL. -autopipeline and -cache set the
// Redis store's AutoPipeline and CacheTTL options; -cpuprofile writes a CPU
// profile of the whole run.
//
// -tool-prefix P names every tool P+name (Pecho, Ptool_0000 …), so that
// the tools of several benchservers behind one gateway do not collide;
// -list-ttl D is the ttlMs hint of its 2026-07-28 lists (Config.CacheTTL),
// which a gateway honors before it lists the server again.
//
// -gateway URL[,URL...] serves no tools of its own: it serves the tools of
// the MCP servers at those URLs through package gateway, each URL an
// upstream of its own (ids u0, u1, …), under the upstreams' own tool
// names (a tool's Origin.Name, rather than the gateway's <id>_<name>), so
// that the load harness calls the upstream's echo as "echo". Names that
// several upstreams use are left out (give each a -tool-prefix). With a
// Redis, the gateway keeps its lists and upstream sessions there too.
package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/gateway"
	"github.com/mcphandler/mcphandler/internal/redisflag"
	"github.com/mcphandler/mcphandler/session"
	"github.com/mcphandler/mcphandler/session/redisstore"
)

type echoIn struct {
	Text string `json:"text" jsonschema:"Text to echo."`
}

type dummyIn struct {
	X string `json:"x" jsonschema:"An input string."`
}

func main() {
	addr := flag.String("addr", "127.0.0.1:9109", "listen address")
	path := flag.String("path", "/mcp", "endpoint path")
	ntools := flag.Int("tools", 0, "number of extra dummy tools (tool_0000 ...)")
	prefix := flag.String("tool-prefix", "", "prefix of every tool's name (echo, tool_0000 ...)")
	listTTL := flag.Duration("list-ttl", 0, "ttlMs hint of 2026-07-28 lists (Config.CacheTTL)")
	upstreams := flag.String("gateway", "", "serve the tools of the MCP servers at these comma-separated URLs, under their own names, instead of tools of its own")
	rf := redisflag.Register(flag.CommandLine, os.Getenv)
	cacheTTL := flag.Duration("cache", 0, "with a Redis: redisstore.Options.CacheTTL (0: read Redis on every request)")
	autoPipeline := flag.Bool("autopipeline", false, "with a Redis: redisstore.Options.AutoPipeline (batch the commands of concurrent requests)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile to this file until the server stops (SIGINT, SIGTERM)")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatal(err)
		}
		defer f.Close()
		defer pprof.StopCPUProfile()
	}
	topo, err := rf.Topology()
	if err == nil && *upstreams != "" && (*ntools != 0 || *prefix != "") {
		err = errors.New("-gateway serves the upstreams' tools only: no -tools, no -tool-prefix")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchserver:", err)
		flag.Usage()
		os.Exit(2)
	}

	tools := []mcphandler.Tool{mcphandler.NewTool(mcphandler.Tool{Name: *prefix + "echo", Description: "Echoes the given text back as a text content block."},
		func(_ context.Context, _ *mcphandler.ToolCall, in echoIn) (string, error) { return in.Text, nil })}
	for i := range *ntools {
		tools = append(tools, mcphandler.NewTool(mcphandler.Tool{Name: fmt.Sprintf("%stool_%04d", *prefix, i), Description: fmt.Sprintf("Dummy tool number %d.", i)},
			func(context.Context, *mcphandler.ToolCall, dummyIn) (string, error) { return "ok", nil }))
	}
	cfg := mcphandler.Config{
		Name:         "benchserver",
		Authenticate: mcphandler.InsecureAnonymous, // the load generator calls without credentials
		Limits:       mcphandler.Limits{PageSize: len(tools)},
		ListTools:    func(context.Context) ([]mcphandler.Tool, error) { return tools, nil },
		CacheTTL:     *listTTL,
	}
	if topo.Kind != redisflag.None {
		c, err := redisflag.NewClient(topo, 64)
		if err != nil {
			log.Fatal(err)
		}
		defer c.Close()
		st := redisstore.New(c, redisstore.Options{Prefix: fmt.Sprintf("mcph-bench-%d:", os.Getpid()), CacheTTL: *cacheTTL, AutoPipeline: *autoPipeline})
		defer st.Close()
		cfg.Store = st
		// One process: a key of its own. Replicas would share one.
		key := make([]byte, 32)
		rand.Read(key)
		cfg.StateKeys = [][]byte{key}
	}
	var h *mcphandler.Handler
	if *upstreams != "" {
		gw, err := newGateway(strings.Split(*upstreams, ","), &cfg, func(ctx context.Context, t mcphandler.Target) error {
			return h.NotifyToolsChanged(ctx, t)
		})
		if err != nil {
			log.Fatal(err)
		}
		defer gw.Close()
	}
	h = mcphandler.New(cfg)
	defer h.Close()
	mux := http.NewServeMux()
	mux.Handle(*path, h)
	// ReadHeaderTimeout and IdleTimeout bound slow or idle clients. No
	// ReadTimeout or WriteTimeout: they would cut SSE streams (GET,
	// subscriptions/listen, long tool calls); the handler bounds the time
	// it reads a POST body itself (Config.Limits.ReadBodyTimeout).
	srv := &http.Server{Addr: *addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	go func() {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
		<-sig
		srv.Close()
	}()
	if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		log.Fatal(err)
	}
}

// newGateway makes cfg serve the tools of the upstreams at urls through a
// Gateway, in cfg's Store when it has one (a Redis), each tool under its
// own name upstream: the gateway names it <id>_<name>, and ListTools
// renames it to its Origin.Name (its Handler calls the upstream tool by
// that name, whatever it is served as). A name two upstreams share is
// served by neither: the Handler leaves out, logged, every tool whose
// name it finds twice.
func newGateway(urls []string, cfg *mcphandler.Config, changed func(context.Context, mcphandler.Target) error) (*gateway.Gateway, error) {
	ups := make([]gateway.Upstream, len(urls))
	for i, u := range urls {
		ups[i] = gateway.Upstream{ID: fmt.Sprintf("u%d", i), URL: u}
	}
	gcfg := gateway.Config{
		Upstreams: func(context.Context, mcphandler.Identity) ([]gateway.Upstream, error) {
			return slices.Clone(ups), nil
		},
		ToolsChanged: changed,
		StateKeys:    cfg.StateKeys,
	}
	if st, ok := cfg.Store.(session.Records); ok {
		gcfg.Store = st
	}
	gw, err := gateway.New(gcfg)
	if err != nil {
		return nil, err
	}
	cfg.Limits.PageSize = 1 << 16 // one page, as the tools of its own
	cfg.ListTools = func(ctx context.Context) ([]mcphandler.Tool, error) {
		tools, err := gw.Tools(ctx)
		for i := range tools {
			tools[i].Name = tools[i].Origin.Name
		}
		return tools, err
	}
	return gw, nil
}
