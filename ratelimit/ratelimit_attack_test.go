package ratelimit_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/mcptest"
	"github.com/mcphandler/mcphandler/ratelimit"
	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
)

// TestAttackCannotResetLimit: a caller over its limit tries to start
// afresh — a new 2025 session, the other replica, the 2026-07-28
// stateless revision, the legacy HTTP+SSE transport, a session it opened
// before and kept. Every path draws on the same bucket: of all these
// calls, exactly Burst are admitted. Its neighbours (another subject of
// its tenant, the same subject name in another tenant) keep their own.
func TestAttackCannotResetLimit(t *testing.T) {
	const burst = 3
	h := newHost()
	rs := replicas(t, 2, h, nil, ratelimit.Limit{Name: "identity", By: ratelimit.BySubject, Rate: 1, Period: time.Hour, Burst: burst})
	kept := session(t, rs[1].h, "acme", "mallory")
	paths := []struct {
		name string
		c    func() caller
	}{
		{"2025 session on replica 0", func() caller { return session(t, rs[0].h, "acme", "mallory") }},
		{"a new 2025 session on replica 0", func() caller { return session(t, rs[0].h, "acme", "mallory") }},
		{"a 2025 session on replica 1", func() caller { return session(t, rs[1].h, "acme", "mallory") }},
		{"2026-07-28 on replica 0", func() caller { return mcptest.NewModern(t, rs[0].h, mcptest.WithToken(token("acme", "mallory"))) }},
		{"2026-07-28 on replica 1", func() caller { return mcptest.NewModern(t, rs[1].h, mcptest.WithToken(token("acme", "mallory"))) }},
		{"legacy SSE on replica 0", func() caller { return legacy(t, rs[0].h, "acme", "mallory") }},
		{"legacy SSE on replica 1", func() caller { return legacy(t, rs[1].h, "acme", "mallory") }},
		{"the session kept from before", func() caller { return kept }},
	}
	for i, p := range paths {
		if ok, _, _ := call(t, p.c(), "search"); ok != (i < burst) {
			t.Fatalf("call %d, through %s: admitted %v; want the first %d of all paths admitted, the rest refused", i, p.name, ok, burst)
		}
	}
	for _, id := range [][2]string{{"acme", "alice"}, {"globex", "mallory"}} {
		c := session(t, rs[0].h, id[0], id[1])
		for i := range burst {
			if ok, r, _ := call(t, c, "search"); !ok {
				t.Fatalf("%v, call %d: refused after mallory's calls: %+v", id, i, r)
			}
		}
	}
}

// TestAttackKeys: tenants, subjects and tool names chosen to collide —
// separators, length prefixes spelled out, braces that would end a hash
// tag, control bytes, 64 KiB names — each get a bucket of their own, and
// every key the limiter writes in Redis is short (at most 130 bytes past
// its prefix), one hash tag wide, and expires. A value someone else wrote
// at a limiter key is not trusted: the call fails closed, nothing panics,
// and other buckets are unaffected. A tool name the handler does not
// serve (outside the spec's characters, or over 128 bytes) is refused by
// the handler as an unknown tool, and given to the policy directly, as a
// host that calls it itself would.
func TestAttackKeys(t *testing.T) {
	huge := strings.Repeat("x", 64<<10)
	ids := []struct{ tenant, subject, tool string }{
		{"a", "b/c", "search"},
		{"a/b", "c", "search"},
		{"a", "bs1:c", "search"},
		{"at1:b", "c", "search"},
		{"a", "b", "o6:search"},
		{"a", "bo6:search", "search"},
		{"{a}", "b", "search"},
		{"a", "}{", "search"},
		{"a\x00", "b", "search"},
		{"a", "b\n", "search"},
		{huge, "b", "search"},
		{huge + "y", "b", "search"},
		{"a", huge, "search"},
		{"a", "b", huge},
		{"a", "b", huge + "y"},
		{"a", "b", "search"},
	}
	var more []string
	for _, id := range ids {
		if id.tool != "search" {
			more = append(more, id.tool)
		}
	}
	h := newHost(more...)
	ctx := context.Background()
	rs := replicas(t, 1, h, nil, ratelimit.Limit{Name: "call", By: ratelimit.BySubject | ratelimit.ByTool, Rate: 1, Period: time.Hour, Burst: 1})
	policy := rs[0].lim.Policy(nil)
	for _, id := range ids {
		c := mcptest.NewModern(t, rs[0].h, mcptest.WithToken(token(id.tenant, id.subject)))
		admit := func() bool { ok, _, _ := call(t, c, id.tool); return ok }
		if mcphandler.CheckTools(mcphandler.Config{}, []mcphandler.Tool{{Name: id.tool, Handler: h.tools[0].Handler}}) != nil {
			if _, err := c.CallTool(ctx, id.tool, nil); err == nil || !strings.Contains(err.Error(), `"code":-32602,"message":"Unknown tool: `) {
				t.Fatalf("%.40q: a tool name the handler does not serve: %v, want unknown tool", id.tool, err)
			}
			admit = func() bool {
				d, err := policy(ctx, &mcphandler.ToolCall{Tool: mcphandler.Tool{Name: id.tool}, Identity: mcphandler.Identity{Tenant: id.tenant, Subject: id.subject}})
				return err == nil && d.Kind == mcphandler.DecisionAllow
			}
		}
		if !admit() {
			t.Fatalf("%.40q/%.40q/%.40q: first call refused (its bucket is someone else's)", id.tenant, id.subject, id.tool)
		}
		if admit() {
			t.Fatalf("%.40q/%.40q/%.40q: second call admitted by a limit of burst 1", id.tenant, id.subject, id.tool)
		}
	}

	c := redistest.Client(t)
	prefix := "rate:" + rs[0].prefix
	keys := redistest.Keys(t, c, prefix)
	if len(keys) != len(ids) {
		t.Fatalf("%d keys for %d buckets: %q", len(keys), len(ids), keys)
	}
	for _, k := range keys {
		rest := strings.TrimPrefix(k, prefix)
		if len(rest) > 130 || strings.Count(rest, "{") != 1 || strings.Count(rest, "}") != 1 || rest[0] != '{' || rest[len(rest)-1] != '}' {
			t.Fatalf("key %.200q: want {id} of at most 130 bytes, one hash tag", k)
		}
		if ttl := c.PTTL(ctx, k).Val(); ttl <= 0 || ttl > time.Hour+time.Second {
			t.Fatalf("key %.200q expires in %v", k, ttl)
		}
	}

	// Garbage at one bucket's key: its calls fail closed; the others'
	// buckets still work.
	victim := mcptest.NewModern(t, rs[0].h, mcptest.WithToken(token("v", "w")))
	call(t, victim, "search")
	after := redistest.Keys(t, c, prefix)
	var vkey string
	for _, k := range after {
		if !contains(keys, k) {
			vkey = k
		}
	}
	for _, garbage := range []func() error{
		func() error { return c.Set(ctx, vkey, "not a number", time.Minute).Err() },
		func() error { c.Del(ctx, vkey); return c.RPush(ctx, vkey, "a list").Err() },
	} {
		if err := garbage(); err != nil {
			t.Fatal(err)
		}
		ok, r, re := call(t, victim, "search")
		if ok || re.Message != "Rate limited: the limit cannot be checked now" || r.RetryAfterMs != 1000 {
			t.Fatalf("a call whose bucket holds garbage: admitted %v, %+v", ok, re)
		}
	}
	fresh := mcptest.NewModern(t, rs[0].h, mcptest.WithToken(token("v", "other")))
	if ok, r, _ := call(t, fresh, "search"); !ok {
		t.Fatalf("another bucket after garbage in one: %+v", r)
	}
}

// TestAttackOtherTenantsTraffic, in memory: a tenant spending its whole
// limit, and far more, leaves another tenant's limit untouched, and a
// global limit (By zero), which every tenant shares, is the only way one
// tenant's traffic can refuse another's.
func TestAttackOtherTenantsTraffic(t *testing.T) {
	h := newHost()
	lim := newLimiter(t, ratelimit.Options{}, ratelimit.Limit{Name: "tenant", By: ratelimit.ByTenant, Rate: 1, Period: time.Hour, Burst: 5})
	hd := mcphandler.New(h.config(lim.Policy(nil)))
	attacker := session(t, hd, "evil", "e")
	for range 100 {
		call(t, attacker, "search")
	}
	victim := session(t, hd, "acme", "alice")
	for i := range 5 {
		if ok, r, _ := call(t, victim, "search"); !ok {
			t.Fatalf("acme call %d refused after evil's 100: %+v", i, r)
		}
	}
	global := newLimiter(t, ratelimit.Options{}, ratelimit.Limit{Name: "all", Rate: 1, Period: time.Hour, Burst: 5})
	hd = mcphandler.New(h.config(global.Policy(nil)))
	attacker = session(t, hd, "evil", "e")
	for range 5 {
		call(t, attacker, "search")
	}
	if ok, _, _ := call(t, session(t, hd, "acme", "alice"), "search"); ok {
		t.Fatal("a global limit used up by one tenant admitted another's call")
	}
}
