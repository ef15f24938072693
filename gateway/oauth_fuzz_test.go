package gateway

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/internal/costguard"
)

// fuzzGateway is a Gateway for the fuzz targets of the authorizations.
func fuzzGateway(f *testing.F) *Gateway {
	g, err := New(Config{Upstreams: func(context.Context, mcphandler.Identity) ([]Upstream, error) { return nil, nil },
		AuthURL: "https://gw.test/upstream-auth/", StateKeys: [][]byte{[]byte("0123456789abcdef0123456789abcdef")},
		MaxWatches: -1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { g.Close() })
	return g
}

// FuzzTokenResponse: whatever a token endpoint answers is read without a
// panic, in time linear in its size, and taken only as a bearer token of
// at most 16 KiB that can be sent in a header, with a refresh token of at
// most 16 KiB, expiring in the future within ten years, or not at all.
func FuzzTokenResponse(f *testing.F) {
	now := time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC)
	for _, seed := range []string{
		`{"access_token":"a.b.c","token_type":"Bearer","expires_in":3600,"refresh_token":"r"}`,
		`{"access_token":"a","token_type":"bearer"}`, `{"access_token":"a","token_type":"mac"}`,
		`{"access_token":"a b","token_type":"Bearer"}`, `{"access_token":"a","token_type":"Bearer","expires_in":1e400}`,
		`{"access_token":"a","token_type":"Bearer","expires_in":-1}`, `{"access_token":"a","token_type":"Bearer","expires_in":"3600"}`,
		`{"access_token":"a","token_type":"Bearer","expires_in":99999999999}`, `[]`, `null`, ``,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var tr tokenResponse
		var gr *grant
		var err error
		costguard.Check(t, len(in), func() { gr, err = tokens(&tr, json.Unmarshal(in, &tr), now) })
		if err != nil {
			return
		}
		if gr.Access == "" || len(gr.Access) > maxGrantToken || len(gr.Refresh) > maxGrantToken || !headerSafe(gr.Access) ||
			!strings.EqualFold(tr.TokenType, "bearer") {
			t.Fatalf("taken: %+v", gr)
		}
		if gr.Expiry != 0 && (gr.Expiry <= now.UnixMilli() || gr.Expiry > now.AddDate(10, 0, 1).UnixMilli()) {
			t.Fatalf("expiry %d of %s", gr.Expiry, in)
		}
	})
}

// FuzzAuthLink: an authorization link is taken only when it is one the
// gateway signed, unexpired, for a subject and a valid upstream; any
// other string is refused without a panic, in time linear in its size.
func FuzzAuthLink(f *testing.F) {
	g := fuzzGateway(f)
	u := &Upstream{ID: "docs", URL: "https://docs.test/mcp"}
	good := g.auths.link(mcphandler.Identity{Tenant: "acme", Subject: "alice"}, u)
	_, l, _ := strings.Cut(good, "?l=")
	f.Add(l)
	f.Add(l[:len(l)-1])
	f.Add(strings.Repeat("A", 3000))
	f.Add("")
	f.Fuzz(func(t *testing.T, in string) {
		var c linkClaims
		var ok bool
		costguard.Check(t, len(in), func() { c, ok = g.auths.openLink(in) })
		if ok && (in != l || c.Subject != "alice" || c.Tenant != "acme" || c.Upstream != "docs") {
			t.Fatalf("took %q as a link: %+v", in, c)
		}
	})
}

// FuzzStoredGrant: whatever the sealed tokens of a person hold, had a
// replica (or a holder of the keys) written anything, is read without a
// panic, in time linear in its size, as none or as tokens with an access
// token; and a value that is not sealed for its key is none.
func FuzzStoredGrant(f *testing.F) {
	g := fuzzGateway(f)
	a := g.auths
	ctx := context.Background()
	id := mcphandler.Identity{Tenant: "acme", Subject: "alice"}
	u := &Upstream{ID: "docs", URL: "https://docs.test/mcp"}
	key := a.key(id, "https://as.test", u)
	for _, seed := range []string{`{"a":"tok","r":"ref","e":1,"i":"https://as.test","t":"https://as.test/token","c":"gw"}`,
		`{"a":""}`, `{}`, `[]`, `null`, `{"a":1}`} {
		f.Add([]byte(seed), true)
	}
	f.Add([]byte("not sealed"), false)
	f.Fuzz(func(t *testing.T, in []byte, sealed bool) {
		v := in
		if sealed {
			tok, err := a.keys.Seal(grantBinding(id.Tenant, key), in, time.Now().Add(time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			v = []byte(tok)
		}
		old, _ := a.recs.Load(ctx, key)
		if old == nil {
			if _, err := a.recs.PutIfAbsent(ctx, key, v, time.Hour); err != nil {
				t.Fatal(err)
			}
		} else if _, err := a.recs.CompareAndSwap(ctx, key, old, v, time.Hour); err != nil {
			t.Fatal(err)
		}
		var gr *grant
		var err error
		costguard.Check(t, len(in), func() { gr, _, err = a.load(ctx, id.Tenant, key) })
		if err != nil {
			t.Fatal(err)
		}
		if gr != nil && (gr.Access == "" || !sealed) {
			t.Fatalf("took %q (sealed %v) as tokens: %+v", in, sealed, gr)
		}
		// Another person's key never opens it.
		if other, _, _ := a.load(ctx, "globex", key); other != nil {
			t.Fatal("tokens sealed for acme opened for globex")
		}
	})
}
