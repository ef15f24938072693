package ratelimit_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/mcptest"
	"github.com/mcphandler/mcphandler/ratelimit"
	"github.com/mcphandler/mcphandler/session/redisstore"
	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
)

// TestAttackForeignBucketValues: a bucket's key replaced in Redis by a
// value of every Redis type, or by a number the limiter never writes.
// A value that is not a number fails the limit's calls by its fail mode,
// as garbage does (TestAttackKeysAreBounded); a number is a time, which
// may refuse the bucket's calls, but never with a retryAfterMs outside
// what the limit itself can ask (one interval, Period/Rate): neither a
// wait of centuries nor an invitation to retry within a millisecond.
// None of them counts for the store's breaker, which here opens at the
// first failure it counts: a fresh bucket is still checked afterwards.
func TestAttackForeignBucketValues(t *testing.T) {
	c := redistest.Client(t)
	prefix := rateKeys(t, c)
	st := redisstore.New(redistest.Client(t), redisstore.Options{Prefix: prefix,
		BreakerThreshold: 1, BreakerMinBackoff: time.Hour, BreakerMaxBackoff: time.Hour})
	t.Cleanup(func() { st.Close() })
	const period = time.Hour
	lim := newLimiter(t, ratelimit.Options{Redis: st, Prefix: prefix, Logger: slog.New(slog.DiscardHandler)},
		ratelimit.Limit{Name: "call", By: ratelimit.BySubject, Rate: 1, Period: period, Burst: 1})
	h := newHost()
	cfg := h.config(lim.Policy(nil))
	cfg.Store = st
	cfg.StateKeys = [][]byte{[]byte("0123456789abcdef0123456789abcdef")}
	hd := mcphandler.New(cfg)
	t.Cleanup(func() { hd.Close() })
	ctx := context.Background()

	n := 0
	// bucket makes a caller's bucket and returns the caller and its key.
	bucket := func() (caller, string) {
		t.Helper()
		n++
		before := redistest.Keys(t, c, "rate:"+prefix)
		cl := mcptest.NewModern(t, hd, mcptest.WithToken(token("acme", fmt.Sprint("u", n))))
		if ok, r, _ := call(t, cl, "search"); !ok {
			t.Fatalf("a new bucket's first call: %+v", r)
		}
		for _, k := range redistest.Keys(t, c, "rate:"+prefix) {
			if !contains(before, k) {
				return cl, k
			}
		}
		t.Fatal("the bucket has no key")
		return nil, ""
	}
	for _, typ := range redistest.Types {
		cl, k := bucket()
		redistest.Replace(t, c, k, typ)
		ok, r, re := call(t, cl, "search")
		if ok || re.Message != "Rate limited: the limit cannot be checked now" || r.RetryAfterMs != 1000 {
			t.Fatalf("a call whose bucket is a %s: admitted %v, %+v, %+v", typ, ok, re, r)
		}
	}
	// Times far ahead, which the limiter never writes: refused, and told
	// to wait one interval, the most this limit ever asks.
	for _, v := range []string{"1e300", "inf", "1e15", "9223372036854775807", "0x7fffffff"} {
		cl, k := bucket()
		if err := c.Set(ctx, k, v, 0).Err(); err != nil {
			t.Fatal(err)
		}
		if ok, r, re := call(t, cl, "search"); ok || r.RetryAfterMs != period.Milliseconds() {
			t.Fatalf("a call whose bucket holds %s: admitted %v, %+v, %+v; want a wait of %d ms", v, ok, re, r, period.Milliseconds())
		}
	}
	// Times long past, and no time at all: the bucket is full.
	for _, v := range []string{"-inf", "-1e300", "nan"} {
		cl, k := bucket()
		if err := c.Set(ctx, k, v, 0).Err(); err != nil {
			t.Fatal(err)
		}
		if ok, r, re := call(t, cl, "search"); !ok {
			t.Fatalf("a call whose bucket holds %s: %+v, %+v", v, re, r)
		}
	}
	bucket() // the breaker counted none of them: a new bucket is checked
}
