// Command benchserver serves mcphandler for the load harness that compares
// it with other MCP servers: one tool "echo" ({"text": string} -> the text as
// a text block) and -tools N dummy tools, at /mcp, with sessions in memory
// or in Redis: a single server (-redis URL), a Redis Cluster
// (-redis-cluster ADDR[,ADDR...]) or a master watched by Sentinels
// (-redis-sentinel NAME@ADDR[,ADDR...]), or the same from $REDIS_URL,
// $REDIS_CLUSTER or $REDIS_SENTINEL. -autopipeline and -cache set the
// Redis store's AutoPipeline and CacheTTL options; -cpuprofile writes a CPU
// profile of the whole run.
package main

import (
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/internal/redisflag"
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
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchserver:", err)
		flag.Usage()
		os.Exit(2)
	}

	tools := []mcphandler.Tool{mcphandler.NewTool(mcphandler.Tool{Name: "echo", Description: "Echoes the given text back as a text content block."},
		func(_ context.Context, _ *mcphandler.ToolCall, in echoIn) (string, error) { return in.Text, nil })}
	for i := range *ntools {
		tools = append(tools, mcphandler.NewTool(mcphandler.Tool{Name: fmt.Sprintf("tool_%04d", i), Description: fmt.Sprintf("Dummy tool number %d.", i)},
			func(context.Context, *mcphandler.ToolCall, dummyIn) (string, error) { return "ok", nil }))
	}
	cfg := mcphandler.Config{
		Name:         "benchserver",
		Authenticate: mcphandler.InsecureAnonymous, // the load generator calls without credentials
		Limits:       mcphandler.Limits{PageSize: len(tools)},
		ListTools:    func(context.Context) ([]mcphandler.Tool, error) { return tools, nil },
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
	mux := http.NewServeMux()
	mux.Handle(*path, mcphandler.New(cfg))
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
