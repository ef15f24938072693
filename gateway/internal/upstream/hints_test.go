package upstream_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/gateway/internal/upstream"
)

// A 2026-07-28 list carries its cache hints (the library's own: its
// CacheTTL, "private"); the other eras have none.
func TestListHintsEachEra(t *testing.T) {
	l := newLib(t, mcphandler.Config{ListTools: tools(), CacheTTL: 90 * time.Second})
	for _, e := range eras {
		t.Run(e.name, func(t *testing.T) {
			_, h, err := upstream.ListToolsHinted(context.Background(), l.at(e.era, e.path), allCaps)
			if err != nil {
				t.Fatal(err)
			}
			stateless := e.era == upstream.Stateless || e.name == "probe-stateless"
			want := upstream.Hints{}
			if stateless {
				want = upstream.Hints{Given: true, TTL: 90 * time.Second}
			}
			if h != want {
				t.Errorf("hints %+v, want %+v", h, want)
			}
		})
	}
}

// The hints of a list are its pages' together: the smallest ttlMs, public
// only when every page says so. What an upstream writes there is read as
// the revision says, and a number of any size costs no more than its
// bytes: absent, negative, fractional, exponent or string values are 0;
// a value past a day is a day. (A number of more than 128 bytes, or one
// that is not JSON, fails the list before it is read:
// TestAttackListHintsMalformed.)
func TestAttackListHints(t *testing.T) {
	for _, tc := range []struct {
		name  string
		pages []string // ttlMs and cacheScope members of each page
		want  upstream.Hints
	}{
		{"one page", []string{`"ttlMs":600000,"cacheScope":"public"`}, upstream.Hints{Given: true, TTL: 10 * time.Minute, Public: true}},
		{"smallest of pages", []string{`"ttlMs":600000,"cacheScope":"public"`, `"ttlMs":5000,"cacheScope":"public"`, `"ttlMs":70000,"cacheScope":"public"`},
			upstream.Hints{Given: true, TTL: 5 * time.Second, Public: true}},
		{"one private page", []string{`"ttlMs":1000,"cacheScope":"public"`, `"ttlMs":1000,"cacheScope":"private"`}, upstream.Hints{Given: true, TTL: time.Second}},
		{"no hints", []string{``}, upstream.Hints{Given: true}},
		{"odd scope", []string{`"ttlMs":1000,"cacheScope":"PUBLIC"`}, upstream.Hints{Given: true, TTL: time.Second}},
		{"negative", []string{`"ttlMs":-5,"cacheScope":"public"`}, upstream.Hints{Given: true, Public: true}},
		{"fraction", []string{`"ttlMs":1500.5`}, upstream.Hints{Given: true}},
		{"exponent", []string{`"ttlMs":1e5`}, upstream.Hints{Given: true}},
		{"string", []string{`"ttlMs":"60000"`}, upstream.Hints{Given: true}},
		{"zero", []string{`"ttlMs":0`}, upstream.Hints{Given: true}},
		{"past a day", []string{`"ttlMs":86400001`}, upstream.Hints{Given: true, TTL: upstream.MaxHintTTL}},
		{"128 digits", []string{`"ttlMs":` + strings.Repeat("9", 128)}, upstream.Hints{Given: true, TTL: upstream.MaxHintTTL}},
		{"max int64 and more", []string{`"ttlMs":9223372036854775807`, `"ttlMs":92233720368547758070`}, upstream.Hints{Given: true, TTL: upstream.MaxHintTTL}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var page atomic.Int32
			f := newFake(t, func(w http.ResponseWriter, r *http.Request, m rpc) bool {
				if !m.is("tools/list") {
					return false
				}
				n := int(page.Add(1))
				next := ""
				if n < len(tc.pages) {
					next = fmt.Sprintf(`,"nextCursor":"p%d"`, n)
				}
				hints := tc.pages[n-1]
				if hints != "" {
					hints += ","
				}
				writeJSON(w, m.ID, fmt.Sprintf(`{"resultType":"complete",%s"tools":[{"name":"t%d","inputSchema":{"type":"object"}}]%s}`, hints, n, next))
				return true
			})
			ep := f.endpoint(upstream.Stateless)
			ep.MaxResponseBytes = 4 << 20
			ts, h, err := upstream.ListToolsHinted(context.Background(), ep, nil)
			if err != nil || len(ts) != len(tc.pages) {
				t.Fatalf("%d tools, %v", len(ts), err)
			}
			if h != tc.want {
				t.Errorf("hints %+v, want %+v", h, tc.want)
			}
		})
	}
}

// A ttlMs that is not JSON (a leading zero) or longer than the 128 bytes
// the package reads of any number fails the list: a malformed answer.
func TestAttackListHintsMalformed(t *testing.T) {
	for _, ttl := range []string{"0600", strings.Repeat("9", 129), strings.Repeat("9", 1<<20)} {
		f := newFake(t, func(w http.ResponseWriter, r *http.Request, m rpc) bool {
			if !m.is("tools/list") {
				return false
			}
			writeJSON(w, m.ID, `{"resultType":"complete","ttlMs":`+ttl+`,"cacheScope":"public","tools":[]}`)
			return true
		})
		ep := f.endpoint(upstream.Stateless)
		ep.MaxResponseBytes = 4 << 20
		if _, _, err := upstream.ListToolsHinted(context.Background(), ep, nil); !errors.Is(err, upstream.ErrMalformed) {
			t.Errorf("ttlMs of %d bytes: %v", len(ttl), err)
		}
	}
}
