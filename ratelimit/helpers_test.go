package ratelimit_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/mcptest"
	"github.com/mcphandler/mcphandler/ratelimit"
	"github.com/mcphandler/mcphandler/session/redisstore"
	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
)

// token is the bearer token of an identity: its JSON in base64url, so
// that tests can call as any tenant and subject, odd bytes included.
func token(tenant, subject string) string {
	b, _ := json.Marshal([2]string{tenant, subject})
	return base64.RawURLEncoding.EncodeToString(b)
}

func authenticate(r *http.Request) (mcphandler.Identity, error) {
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	b, err := base64.RawURLEncoding.DecodeString(tok)
	var id [2]string
	if err != nil || json.Unmarshal(b, &id) != nil {
		return mcphandler.Identity{}, errors.New("bad token")
	}
	return mcphandler.Identity{Tenant: id[0], Subject: id[1]}, nil
}

// host is a handler's tools, counting their runs.
type host struct {
	runs  atomic.Int64
	tools []mcphandler.Tool
}

// newHost returns a host with the tools "search" and "export", the
// destructive "delete", and any more names given.
func newHost(more ...string) *host {
	h := &host{}
	for _, name := range append([]string{"search", "export", "delete"}, more...) {
		h.tools = append(h.tools, mcphandler.Tool{
			Name:        name,
			Description: "test tool",
			Annotations: &mcphandler.ToolAnnotations{DestructiveHint: new(name == "delete")},
			Handler: func(context.Context, *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
				h.runs.Add(1)
				return mcphandler.TextResult("ran"), nil
			},
		})
	}
	return h
}

// config returns a handler configuration for the host's tools with policy
// as BeforeCall.
func (h *host) config(policy mcphandler.BeforeCallFunc) mcphandler.Config {
	return mcphandler.Config{
		Authenticate: authenticate,
		ListTools:    func(context.Context) ([]mcphandler.Tool, error) { return h.tools, nil },
		BeforeCall:   policy,
		Logger:       slog.New(slog.DiscardHandler),
	}
}

// newLimiter returns a limiter of limits, failing the test on error.
func newLimiter(t testing.TB, opts ratelimit.Options, limits ...ratelimit.Limit) *ratelimit.Limiter {
	t.Helper()
	l, err := ratelimit.New(opts, limits...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// rateKeys returns the prefix for a test's limiter keys on c, and deletes
// every key of the limiter ("rate:" + prefix + …) when the test ends.
func rateKeys(t testing.TB, c redis.UniversalClient) string {
	t.Helper()
	prefix := redistest.Prefix(t, c)
	t.Cleanup(func() {
		for _, k := range redistest.Keys(t, c, "rate:"+prefix) {
			c.Del(context.Background(), k)
		}
	})
	return prefix
}

// replica is one handler with its own Redis client and store.
type replica struct {
	h      *mcphandler.Handler
	store  *redisstore.Store
	lim    *ratelimit.Limiter
	prefix string // of the store's and the limiter's keys
}

// replicas returns n handlers of host, each with its own Redis client,
// store and limiter of limits on one Redis under one prefix, their
// BeforeCall wrap(limiter) (the limiter's policy alone when wrap is nil).
func replicas(t testing.TB, n int, h *host, wrap func(*ratelimit.Limiter) mcphandler.BeforeCallFunc, limits ...ratelimit.Limit) []replica {
	t.Helper()
	prefix := rateKeys(t, redistest.Client(t))
	var rs []replica
	for range n {
		st := redisstore.New(redistest.Client(t), redisstore.Options{Prefix: prefix})
		t.Cleanup(func() { st.Close() })
		lim := newLimiter(t, ratelimit.Options{Redis: st, Prefix: prefix, Logger: slog.New(slog.DiscardHandler)}, limits...)
		policy := lim.Policy(nil)
		if wrap != nil {
			policy = wrap(lim)
		}
		cfg := h.config(policy)
		cfg.Store = st
		cfg.StateKeys = [][]byte{[]byte("0123456789abcdef0123456789abcdef")}
		hd := mcphandler.New(cfg)
		t.Cleanup(func() { hd.Close() })
		rs = append(rs, replica{hd, st, lim, prefix})
	}
	return rs
}

// session returns an initialized 2025 client of h for the identity.
func session(t testing.TB, h http.Handler, tenant, subject string, opts ...mcptest.Option) *mcptest.Client {
	t.Helper()
	c := mcptest.New(t, h, append([]mcptest.Option{mcptest.WithToken(token(tenant, subject))}, opts...)...)
	if _, err := c.Initialize(context.Background()); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	return c
}

// legacy returns a connected 2024-11-05 HTTP+SSE client of h.
func legacy(t testing.TB, h *mcphandler.Handler, tenant, subject string) *mcptest.LegacyClient {
	t.Helper()
	sse, msgs := h.LegacySSE("/messages")
	mux := http.NewServeMux()
	mux.Handle("/sse", sse)
	mux.Handle("/messages", msgs)
	c := mcptest.NewLegacy(t, mux, "/sse", mcptest.WithToken(token(tenant, subject)))
	if _, err := c.Initialize(context.Background()); err != nil {
		t.Fatalf("legacy initialize: %v", err)
	}
	return c
}

// caller is what the clients of every revision have in common.
type caller interface {
	CallTool(ctx context.Context, name string, args any) (*mcptest.ToolResult, error)
}

// refusal is the data of a -32000 refusal.
type refusal struct {
	Limit struct {
		Name     string `json:"name"`
		Rate     int    `json:"rate"`
		PeriodMs int64  `json:"periodMs"`
		Burst    int    `json:"burst"`
	} `json:"limit"`
	RetryAfterMs int64 `json:"retryAfterMs"`
}

// call calls tool and reports whether it ran; a refusal must be a
// well-formed -32000, whose data it returns. Any other answer fails the
// test.
func call(t testing.TB, c caller, tool string) (bool, *refusal, *mcptest.RPCError) {
	t.Helper()
	res, err := c.CallTool(context.Background(), tool, nil)
	if err == nil {
		if res.IsError {
			t.Fatalf("%s: an error result %s", tool, res.Text())
		}
		return true, nil, nil
	}
	var re *mcptest.RPCError
	if !errors.As(err, &re) || re.Code != mcphandler.CodeRateLimited {
		t.Fatalf("%s: %v, want a result or -32000", tool, err)
	}
	var r refusal
	if err := json.Unmarshal(re.Data, &r); err != nil || r.RetryAfterMs <= 0 || r.Limit.Name == "" {
		t.Fatalf("%s: -32000 with data %s", tool, re.Data)
	}
	return false, &r, re
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
