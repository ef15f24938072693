package ratelimit

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcphandler/mcphandler"
)

// TestMemoryGCRA, in a synctest bubble: a full bucket admits Burst calls
// at once, then one per Period/Rate; a refused call is told exactly when
// a call would be admitted and consumes nothing; an idle bucket is full
// again after Burst intervals; over a long dense run exactly Burst + T/e
// calls are admitted, and no window of W holds more than Burst + W/e.
func TestMemoryGCRA(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		m := newMemory()
		lim := testLimit(t, Limit{Name: "x", Rate: 10, Burst: 3}) // one per 100ms
		allow := func(id string) (bool, time.Duration) {
			ok, retry, err := m.allow(ctx, id, lim)
			if err != nil {
				t.Fatal(err)
			}
			return ok, retry
		}
		expect := func(what string, wantOK bool, wantRetry time.Duration) {
			t.Helper()
			if ok, retry := allow("k"); ok != wantOK || retry != wantRetry {
				t.Fatalf("%s: admitted %v, retry %v; want %v, %v", what, ok, retry, wantOK, wantRetry)
			}
		}
		for i := range 3 {
			expect(fmt.Sprint("burst call ", i), true, 0)
		}
		expect("over the burst", false, 100*time.Millisecond)
		for range 10 {
			expect("refused again at once", false, 100*time.Millisecond)
		}
		time.Sleep(99 * time.Millisecond)
		expect("1ms early", false, time.Millisecond)
		time.Sleep(time.Millisecond)
		expect("after retryAfter", true, 0)
		expect("the next one", false, 100*time.Millisecond)
		time.Sleep(300 * time.Millisecond)
		for i := range 3 {
			expect(fmt.Sprint("full again, call ", i), true, 0)
		}
		expect("full again, over the burst", false, 100*time.Millisecond)

		// Dense: a call every 10ms for 10s, on a bucket of its own.
		var at []time.Duration
		start := time.Now()
		for i := 0; i <= 1000; i++ {
			if ok, _ := allow("dense"); ok {
				at = append(at, time.Since(start))
			}
			if i < 1000 {
				time.Sleep(10 * time.Millisecond)
			}
		}
		if len(at) != 3+100 {
			t.Fatalf("%d admitted in 10s of dense calls, want Burst + 10s/100ms = 103", len(at))
		}
		for i := range at {
			n := 0
			for j := i; j < len(at) && at[j]-at[i] <= time.Second; j++ {
				n++
			}
			if n > 3+10 {
				t.Fatalf("%d admitted within 1s from %v, want at most Burst + 1s/100ms = 13", n, at[i])
			}
		}
	})
}

// TestMemorySweep: buckets that are full again are dropped once the map
// has doubled, so memory follows the buckets in use, not every bucket
// ever used; a dropped bucket is full, as it would have been.
func TestMemorySweep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		m := newMemory()
		lim := testLimit(t, Limit{Name: "x", Rate: 10, Burst: 1})
		for i := range 5000 {
			m.allow(ctx, fmt.Sprint("old", i), lim)
		}
		time.Sleep(time.Second)
		for i := range 4000 {
			m.allow(ctx, fmt.Sprint("new", i), lim)
		}
		if n := m.size(); n >= 5000 {
			t.Fatalf("%d buckets kept, want the 5000 full ones dropped", n)
		}
		if ok, _, _ := m.allow(ctx, "old1", lim); !ok {
			t.Fatal("a dropped bucket is not full")
		}
	})
}

// TestBucketID: ids of different buckets never meet, whatever the names
// hold; ids are bounded, and raw only when short and plain.
func TestBucketID(t *testing.T) {
	huge := strings.Repeat("x", 1<<16)
	all := testLimit(t, Limit{Name: "l", By: BySubject | ByTool, Rate: 1})
	tenant := testLimit(t, Limit{Name: "l", By: ByTenant, Rate: 1})
	tool := testLimit(t, Limit{Name: "l", By: ByTool, Rate: 1})
	other := testLimit(t, Limit{Name: "l2", By: BySubject | ByTool, Rate: 1})
	type in struct {
		lim                   *limit
		tenant, subject, tool string
	}
	ins := []in{
		{all, "a", "b/c", "t"}, {all, "a/b", "c", "t"}, {all, "a", "bs1:c", "t"}, {all, "at1:b", "c", "t"},
		{all, "a", "b", "o1:t"}, {all, "a", "bo1:t", "t"}, {all, "", "", ""}, {all, "a", "", ""}, {all, "", "a", ""}, {all, "", "", "a"},
		{all, "{a}", "b", "t"}, {all, "a", "}{", "t"}, {all, "a\x00", "b", "t"}, {all, huge, "b", "t"}, {all, huge + "y", "b", "t"},
		{all, "a", "b", huge}, {tenant, "a", "", ""}, {tool, "", "", "a"}, {other, "a", "b", "t"}, {tenant, "n1:lt1:a", "", ""},
	}
	seen := map[string]in{}
	for _, x := range ins {
		c := &mcphandler.ToolCall{Tool: mcphandler.Tool{Name: x.tool}, Identity: mcphandler.Identity{Tenant: x.tenant, Subject: x.subject}}
		id := bucketID(nil, x.lim, c)
		if prev, ok := seen[id]; ok {
			t.Fatalf("%+.20v and %+.20v share the id %q", prev, x, id)
		}
		seen[id] = x
		if id != bucketID(make([]byte, 0, 8), x.lim, c) {
			t.Fatalf("id of %+.20v is not deterministic", x)
		}
		switch {
		case id[0] == '#' && len(id) == 44:
		case id[0] == 'n' && len(id) <= maxRawID && plain([]byte(id)):
		default:
			t.Fatalf("id %.60q: want 'n' and at most %d plain bytes, or '#' and 43", id, maxRawID)
		}
	}
}

// FuzzBucketID: two calls whose tenant, subject or tool differ never get
// the same bucket id, and every id is bounded and fit for a hash tag.
func FuzzBucketID(f *testing.F) {
	f.Add("a", "b/c", "t", "a/b", "c", "t")
	f.Add("a", "bs1:c", "t", "at1:b", "c", "t")
	f.Add("{", "}", "o1:x", "", "", "x")
	f.Add(strings.Repeat("y", 200), "", "", strings.Repeat("y", 199), "y", "")
	lim := testLimitF(f, Limit{Name: "l", By: BySubject | ByTool, Rate: 1})
	f.Fuzz(func(t *testing.T, t1, s1, o1, t2, s2, o2 string) {
		id := func(tenant, subject, tool string) string {
			c := &mcphandler.ToolCall{Tool: mcphandler.Tool{Name: tool}, Identity: mcphandler.Identity{Tenant: tenant, Subject: subject}}
			id := bucketID(nil, lim, c)
			if len(id) > maxRawID || !plain([]byte(id)) {
				t.Fatalf("id %q: over %d bytes or not plain", id, maxRawID)
			}
			return id
		}
		a, b := id(t1, s1, o1), id(t2, s2, o2)
		if (a == b) != (t1 == t2 && s1 == s2 && o1 == o2) {
			t.Fatalf("%q/%q/%q → %q and %q/%q/%q → %q", t1, s1, o1, a, t2, s2, o2, b)
		}
	})
}

func testLimitF(f *testing.F, in Limit) *limit {
	lim, err := newLimit(in)
	if err != nil {
		f.Fatal(err)
	}
	return &lim
}
