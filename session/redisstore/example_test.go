package redisstore_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http/httptest"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/mcptest"
	"github.com/mcphandler/mcphandler/session/redisstore"
)

// Two replicas share one Redis and one StateKeys: a session opened on one
// is served by the other, with no sticky sessions. (It needs Redis at
// REDIS_URL, or 127.0.0.1:6379.)
func Example() {
	opts := &redis.Options{Addr: "127.0.0.1:6379"}
	if u := os.Getenv("REDIS_URL"); u != "" {
		var err error
		if opts, err = redis.ParseURL(u); err != nil {
			fmt.Println(err)
			return
		}
	}
	opts.ContextTimeoutEnabled, opts.DialTimeout, opts.DialerRetries = true, time.Second, 1
	secret := []byte("an example key of 32 bytes or more, from a secret store")
	echo := mcphandler.NewTool(mcphandler.Tool{Name: "echo"},
		func(ctx context.Context, call *mcphandler.ToolCall, in struct{ Text string }) (string, error) {
			return in.Text, nil
		})
	prefix := "example:" + rand.Text() + ":"
	newReplica := func() (*httptest.Server, func()) {
		store := redisstore.New(redis.NewClient(opts), redisstore.Options{Prefix: prefix})
		h := mcphandler.New(mcphandler.Config{Store: store, StateKeys: [][]byte{secret}, Authenticate: mcphandler.InsecureAnonymous,
			ListTools: func(context.Context) ([]mcphandler.Tool, error) { return []mcphandler.Tool{echo}, nil }})
		srv := httptest.NewServer(h)
		return srv, func() { srv.Close(); h.Close(); store.Close() }
	}
	a, closeA := newReplica()
	defer closeA()
	b, closeB := newReplica()
	defer closeB()

	ctx := context.Background()
	first := mcptest.Dial(a.URL)
	defer first.Close()
	if _, err := first.Initialize(ctx); err != nil {
		fmt.Println(err)
		return
	}
	second := mcptest.Dial(b.URL)
	defer second.Close()
	second.SetSessionID(first.SessionID())
	second.SetProtocolVersion(first.ProtocolVersion())
	res, err := second.CallTool(ctx, "echo", map[string]any{"Text": "served by the other replica"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Text())
	// Output: served by the other replica
}
