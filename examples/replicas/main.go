// Command replicas is one replica of an MCP service whose sessions live
// in Redis: start several on one Redis with one state key, put any load
// balancer in front (no sticky sessions), and any replica serves any
// request. /ready answers 503 while Redis cannot be reached.
//
//	export MCP_STATE_KEY=$(head -c 32 /dev/urandom | base64)
//	go run ./examples/replicas -addr 127.0.0.1:8080 &
//	go run ./examples/replicas -addr 127.0.0.1:8081 &
//
// -redis takes a URL of go-redis (redis://, rediss://, unix://); with
// -redis-kind cluster or sentinel, the URL of a Redis Cluster or of the
// Sentinels (see redisstore.NewClient).
package main

import (
	"cmp"
	"context"
	"encoding/base64"
	"flag"
	"log"
	"net/http"
	"os"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/auth"
	"github.com/mcphandler/mcphandler/session/redisstore"
)

// newReplica returns the handler of the replica called name.
func newReplica(name string, store *redisstore.Store, stateKey []byte) *mcphandler.Handler {
	where := mcphandler.NewTool(mcphandler.Tool{Name: "where", Annotations: &mcphandler.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, call *mcphandler.ToolCall, _ struct{}) (string, error) {
			return "session " + call.SessionID + " served by " + name, nil
		})
	return mcphandler.New(mcphandler.Config{
		Authenticate: auth.NewAPIKeys(map[string]mcphandler.Identity{"alice": {Tenant: "acme", Subject: "alice"}}).Authenticate,
		ListTools:    func(context.Context) ([]mcphandler.Tool, error) { return []mcphandler.Tool{where}, nil },
		Store:        store,
		StateKeys:    [][]byte{stateKey}, // the same on every replica, from a secret store, never from Redis
	})
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "address to listen on")
	url := flag.String("redis", cmp.Or(os.Getenv("REDIS_URL"), "redis://127.0.0.1:6379/0"), "Redis `URL`")
	kind := flag.String("redis-kind", "single", "single, cluster or sentinel")
	flag.Parse()
	key, err := base64.StdEncoding.DecodeString(os.Getenv("MCP_STATE_KEY"))
	if err != nil || len(key) < 32 {
		log.Fatal("set MCP_STATE_KEY to 32 random bytes in base64, the same on every replica: export MCP_STATE_KEY=$(head -c 32 /dev/urandom | base64)")
	}
	client, err := redisstore.NewClient(redisstore.Kind(*kind), *url)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	store := redisstore.New(client, redisstore.Options{Prefix: "replicas-example:"})
	defer store.Close() // after the handler's Close
	h := newReplica(*addr, store, key)
	defer h.Close()
	http.Handle("/mcp", h)
	http.Handle("/ready", h.Ready())
	log.Printf("replica %s: MCP endpoint http://%s/mcp (Authorization: Bearer alice), readiness /ready", *addr, *addr)
	srv := &http.Server{Addr: *addr, ReadHeaderTimeout: 10 * time.Second}
	log.Print(srv.ListenAndServe())
}
