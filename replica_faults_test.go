package mcphandler_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/mcptest"
	"github.com/mcphandler/mcphandler/session/redisstore"
	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
)

// slowTool is a tool that runs until cancelled (or 10s): started receives
// when it starts, stopped why it stopped (nil for the 10s).
func slowTool(cfg *mcphandler.Config) (started chan struct{}, stopped chan error) {
	started, stopped = make(chan struct{}, 1), make(chan error, 1)
	cfg.BeforeCall = nil
	cfg.ListTools = func(context.Context) ([]mcphandler.Tool, error) {
		return []mcphandler.Tool{{Name: "slow", Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
			started <- struct{}{}
			select {
			case <-ctx.Done():
				stopped <- ctx.Err()
			case <-time.After(10 * time.Second):
				stopped <- nil
			}
			return mcphandler.TextResult("done"), nil
		}}}, nil
	}
	return started, stopped
}

// TestReplicasCancelAfterSubscribeFailed: when the first cancellable call
// reaches a replica, its subscription to cancellations from the other
// replicas fails (Redis cuts every SUBSCRIBE). Once Redis lets it
// subscribe, a notifications/cancelled received by another replica must
// still cancel the call, without a restart.
func TestReplicasCancelAfterSubscribeFailed(t *testing.T) {
	cfg := (&fixture{}).config()
	started, stopped := slowTool(&cfg)
	p := redistest.NewProxy(t, "")
	prefix := redistest.Prefix(t, redistest.Client(t))
	opts := redisstore.Options{OpTimeout: time.Second}
	runner := redisReplica(t, cfg, p.Client(t), prefix, opts)
	other := redisReplica(t, cfg, redistest.Client(t), prefix, opts)
	ctx := context.Background()

	p.CutOnCommand("SUBSCRIBE", -1)
	a := connect(t, runner, "acme-viewer")
	b := mcptest.New(t, other, mcptest.WithToken("acme-viewer"))
	b.SetSessionID(a.SessionID())
	b.SetProtocolVersion(a.ProtocolVersion())
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, err := a.Post(ctx, []byte(`{"jsonrpc":"2.0","id":"slow-1","method":"tools/call","params":{"name":"slow"}}`), nil)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	defer func() { <-done }()
	<-started
	if p.Cuts() == 0 {
		t.Fatal("the runner's SUBSCRIBE was never cut: the test proves nothing")
	}
	p.ClearCuts()
	// The cancellation is published, not stored: send it until the
	// runner's listener, retrying by itself, is subscribed again.
	for deadline := time.Now().Add(10 * time.Second); ; {
		if err := b.Notify(ctx, "notifications/cancelled", map[string]any{"requestId": "slow-1"}); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-stopped:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("the call stopped with %v, want context.Canceled", err)
			}
			return
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("a cancellation from another replica never reached the call after the first SUBSCRIBE failed")
		}
	}
}

// TestHandlerCloseStopsListener: Close stops the cancellation listener
// even while it is retrying a subscription that keeps failing, waits for
// it, and can be called again.
func TestHandlerCloseStopsListener(t *testing.T) {
	cfg := (&fixture{}).config()
	started, stopped := slowTool(&cfg)
	p := redistest.NewProxy(t, "")
	prefix := redistest.Prefix(t, redistest.Client(t))
	c := p.Client(t)
	st := redisstore.New(c, redisstore.Options{Prefix: prefix, OpTimeout: time.Second})
	t.Cleanup(func() { st.Close() })
	cfg.Store = st
	cfg.StateKeys = testStateKeys // replicas share their keys
	cfg.Logger = slog.New(slog.DiscardHandler)
	h := mcphandler.New(cfg)
	ctx := context.Background()

	p.CutOnCommand("SUBSCRIBE", -1)
	a := connect(t, h, "acme-viewer")
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, err := a.Post(ctx, []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow"}}`), nil)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	<-started
	a.Notify(ctx, "notifications/cancelled", map[string]any{"requestId": 1}) // same replica
	if err := <-stopped; !errors.Is(err, context.Canceled) {
		t.Fatalf("local cancellation: %v", err)
	}
	<-done
	start := time.Now()
	for range 2 {
		if err := h.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Close took %v", d)
	}
	// goleak, in TestMain, checks that the listener is gone.
}

// BenchmarkUnavailable measures how long a request waits for its 503 while
// Redis is unreachable, once the store has seen a few calls fail (the
// first five requests, the breaker's default threshold, are sent before
// the timer starts and reported as onset-ms): with Redis refusing
// connections and with Redis frozen (connections open, nothing answered),
// for a go-redis client with its default dial retries and one with
// DialerRetries: 1. The store's options are the defaults (OpTimeout 2s).
//
//	go test -run XXX -bench Unavailable -benchtime 20x
func BenchmarkUnavailable(b *testing.B) {
	for _, fault := range []string{"refused", "frozen"} {
		for _, client := range []string{"default", "dialerRetries1"} {
			b.Run(fault+"/"+client, func(b *testing.B) {
				p := redistest.NewProxy(b, "")
				c := p.Client(b).(*redis.Client)
				if client == "dialerRetries1" {
					opt := *c.Options()
					opt.DialerRetries = 1
					c = redis.NewClient(&opt)
					b.Cleanup(func() { c.Close() })
				}
				st := redisstore.New(c, redisstore.Options{Prefix: redistest.Prefix(b, redistest.Client(b))})
				b.Cleanup(func() { st.Close() })
				cfg := (&fixture{}).config()
				cfg.Store, cfg.StateKeys = st, testStateKeys
				cfg.Logger = slog.New(slog.DiscardHandler)
				h := mcphandler.New(cfg)
				b.Cleanup(func() { h.Close() })
				cl := mcptest.New(b, h, mcptest.WithToken("acme-viewer"))
				ctx := context.Background()
				if _, err := cl.Initialize(ctx); err != nil {
					b.Fatal(err)
				}
				if fault == "refused" {
					p.RefuseConnections()
					p.CutAll()
				} else {
					p.Stall()
				}
				ping := func() {
					if err := cl.Ping(ctx); !isHTTP(err, 503) {
						b.Fatalf("ping with Redis %s: %v, want 503", fault, err)
					}
				}
				start := time.Now()
				for range 5 {
					ping()
				}
				onset := time.Since(start)
				for b.Loop() {
					ping()
				}
				b.ReportMetric(float64(onset.Milliseconds()), "onset-ms")
				if fault == "frozen" {
					p.Resume() // let the connections drain before the cleanups
				}
			})
		}
	}
}
