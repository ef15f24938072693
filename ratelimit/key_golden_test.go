package ratelimit

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/internal/golden"
	"github.com/mcphandler/mcphandler/session/redisstore"
	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
)

// The golden file of testdata/golden holds the Redis keys of buckets: the
// replicas of two releases share them during a rolling upgrade, and a key
// spelt otherwise is a fresh, full bucket. The case makes each bucket
// through the limiter's Redis backend, on the Redis of the tests under a
// prefix of its own, compares the keys Redis then holds with the file,
// and checks that each holds what the limiter reads (a number).
//
// go test -run TestGolden -update rewrites the file: only for a change
// that says how mixed releases still interoperate.

// TestGolden pins the bucket keys; see the comment at the top of this file.
func TestGolden(t *testing.T) {
	ctx := context.Background()
	c := redistest.Client(t)
	prefix := redistest.Prefix(t, c)
	st := redisstore.New(c, redisstore.Options{Prefix: prefix})
	defer st.Close()
	be := &redisBackend{st: st, prefix: prefix, timeout: time.Second}
	call := &mcphandler.ToolCall{Tool: mcphandler.Tool{Name: "search"}, Identity: mcphandler.Identity{Tenant: "acme", Subject: "alice"}}
	var b strings.Builder
	// A tenant with a brace: its bucket id is hashed.
	braced := &mcphandler.ToolCall{Tool: call.Tool, Identity: mcphandler.Identity{Tenant: "acme{eu}", Subject: "alice"}}
	for _, x := range []struct {
		in   Limit
		call *mcphandler.ToolCall
	}{
		{Limit{Name: "all", Rate: 10}, call},
		{Limit{Name: "tenant", By: ByTenant, Rate: 10}, call},
		{Limit{Name: "id", By: BySubject, Rate: 10}, call},
		{Limit{Name: "x", By: ByTool, Rate: 10}, call},
		{Limit{Name: "every", By: ByTenant | BySubject | ByTool, Rate: 10}, call},
		{Limit{Name: "hashed", By: ByTenant, Rate: 10}, braced},
	} {
		in, call := x.in, x.call
		lim := testLimit(t, in)
		id := bucketID(nil, lim, call)
		if ok, _, err := be.allow(ctx, id, lim); !ok || err != nil {
			t.Fatalf("allow %s: %v, %v", in.Name, ok, err)
		}
		keys := redistest.Keys(t, c, "rate:"+prefix)
		found := false
		for _, k := range keys {
			if strings.HasSuffix(k, "{"+id+"}") {
				found = true
				v, err := c.Get(ctx, k).Result()
				if _, perr := strconv.ParseFloat(v, 64); err != nil || perr != nil {
					t.Errorf("%s holds %q (%v)", k, v, err)
				}
				fmt.Fprintf(&b, "%s %s\n", in.Name, strings.Replace(k, prefix, "<prefix>", 1))
			}
		}
		if !found {
			t.Fatalf("no key of bucket %q among %q", id, keys)
		}
	}
	golden.File(t, "keys.golden", []byte(b.String()))
}
