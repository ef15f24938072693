package redistest

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestClient: clients of one test share one Redis, and Prefix deletes the
// test's keys at its end.
func TestClient(t *testing.T) {
	ctx := context.Background()
	var c1 redis.UniversalClient
	var prefix string
	t.Run("sub", func(t *testing.T) {
		c1 = Client(t)
		c2 := Client(t)
		prefix = Prefix(t, c1)
		if err := c1.Set(ctx, prefix+"k", "v", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		if v := c2.Get(ctx, prefix+"k").Val(); v != "v" {
			t.Fatalf("the second client does not see the first one's key: %q", v)
		}
		if keys := Keys(t, c2, prefix); !slices.Equal(keys, []string{prefix + "k"}) {
			t.Fatalf("Keys = %q", keys)
		}
	})
	if os.Getenv("REDIS_URL") == "" && !reachable(defaultAddr) {
		return // the subtest's private server is gone with its keys
	}
	c := Client(t)
	if n := c.Exists(ctx, prefix+"k").Val(); n != 0 {
		t.Fatalf("Prefix left the test's key behind")
	}
}

// TestFallback: without REDIS_URL and with nothing on the default address,
// Client starts a private redis-server, shared by the clients of the test.
func TestFallback(t *testing.T) {
	t.Setenv("REDIS_URL", "")
	old := defaultAddr
	defaultAddr = "127.0.0.1:1" // nothing listens on port 1
	defer func() { defaultAddr = old }()
	ctx := context.Background()
	c1, c2 := Client(t), Client(t)
	c1.Set(ctx, "k", "v", time.Minute)
	if v := c2.Get(ctx, "k").Val(); v != "v" {
		t.Fatalf("the clients of one test use different servers")
	}
	if a := c1.(*redis.Client).Options().Addr; a == old || a == defaultAddr {
		t.Fatalf("Client used %s, want a private server", a)
	}
}

// TestREDIS_URL: the environment variable wins.
func TestREDIS_URL(t *testing.T) {
	addr, _, _ := Start(t)
	t.Setenv("REDIS_URL", "redis://"+addr+"/2")
	c := Client(t)
	opt := c.(*redis.Client).Options()
	if opt.Addr != addr || opt.DB != 2 || !opt.ContextTimeoutEnabled {
		t.Fatalf("client options %s db %d ctx %v", opt.Addr, opt.DB, opt.ContextTimeoutEnabled)
	}
	if err := c.Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
}

// TestStart: stop makes the server unreachable, restart brings it back,
// empty.
func TestStart(t *testing.T) {
	ctx := context.Background()
	addr, stop, restart := Start(t)
	c := ClientAt(t, addr)
	if err := c.Set(ctx, "k", "v", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	stop()
	stop() // idempotent
	if err := ping(addr, 200*time.Millisecond); err == nil {
		t.Fatal("the server answers after stop")
	}
	restart()
	if err := ping(addr, time.Second); err != nil {
		t.Fatalf("the server does not answer after restart: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, err := c.Exists(ctx, "k").Result()
		if err == nil {
			if n != 0 {
				t.Fatal("the restarted server kept data")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the client does not recover: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestCountingHook(t *testing.T) {
	ctx := context.Background()
	c := Client(t)
	prefix := Prefix(t, c)
	// Open the connections first: setting one up takes commands too.
	c.Ping(ctx)
	c.Pipelined(ctx, func(p redis.Pipeliner) error { p.Ping(ctx); return nil })
	h := new(CountingHook)
	c.AddHook(h)
	c.Set(ctx, prefix+"a", "1", time.Minute)
	c.Get(ctx, prefix+"a")
	c.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Get(ctx, prefix+"a")
		p.Get(ctx, prefix+"b")
		return nil
	})
	n := h.Counts()
	if n.Commands != 4 || n.RoundTrips != 3 || n.ByName["get"] != 3 || n.ByName["set"] != 1 {
		t.Fatalf("counts %+v; want 4 commands in 3 round trips", n)
	}
	h.Reset()
	if n := h.Counts(); n.Commands != 0 || n.RoundTrips != 0 || len(n.ByName) != 0 {
		t.Fatalf("after Reset: %+v", n)
	}
}
