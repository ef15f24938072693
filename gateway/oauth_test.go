package gateway_test

import (
	"bytes"
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler/mcptest"
	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
)

// Each person acts upstream as themselves: before they authorize, the
// upstream's tools are not listed for them (the list names where to
// authorize, signed for them) and a call of one of its names asks, in the
// client's era; the authorization runs through the gateway's page, signed
// in first, and its token is theirs alone. Two replicas on Redis, each
// request to the other.
func TestOAuthEachPersonActsAsThemselves(t *testing.T) {
	rig := newOAuthRig(t, 2, true)
	ctx := context.Background()

	// alice, 2025-11-25 with URL mode: the call waits while she authorizes.
	var asked mcptest.ElicitParams
	alice := rig.client(t, "alice", false, func(p mcptest.ElicitParams) string {
		asked = p
		go func() {
			if code, page := rig.browser(t).open(p.URL, people["alice"], people["alice"]); code != http.StatusOK || !strings.Contains(page, "docs authorized") {
				t.Errorf("alice's authorization: %d %s", code, page)
			}
		}()
		return "accept"
	})
	link, names := authorizeURL(t, alice)
	if link == "" || !strings.HasPrefix(link, rig.public.URL+"/upstream-auth/start?l=") || slices.Contains(names, "docs_whoami") {
		t.Fatalf("alice's list before authorizing: link %q, tools %v", link, names)
	}
	res, err := alice.CallTool(ctx, "docs_whoami", map[string]any{})
	if err != nil || res.IsError || resultText(res) != "whoami ran as acme/alice" {
		t.Fatalf("alice's call: %+v, %v", res, err)
	}
	if asked.Mode != "url" || !strings.HasPrefix(asked.URL, rig.public.URL+"/upstream-auth/start?l=") || asked.ElicitationID == "" {
		t.Fatalf("alice was asked %+v", asked)
	}
	rig.mu.Lock()
	decided := rig.decided
	rig.mu.Unlock()
	if len(decided) != 2 || !strings.Contains(decided[0], "needs your authorization") || decided[1] != "Says whose token it ran with." {
		t.Fatalf("BeforeCall decided on %q: the call did not start over with the upstream's tool", decided)
	}
	if _, names := authorizeURL(t, alice); !slices.Contains(names, "docs_whoami") {
		t.Fatalf("alice's list once authorized: %v", names)
	}

	// bob, 2026-07-28: an input request; the retry runs once he authorized.
	bob := rig.client(t, "bob", true, func(p mcptest.ElicitParams) string {
		if code, page := rig.browser(t).open(p.URL, people["bob"], people["bob"]); code != http.StatusOK {
			t.Errorf("bob's authorization: %d %s", code, page)
		}
		return "accept"
	})
	res, err = bob.CallTool(ctx, "docs_whoami", map[string]any{})
	if err != nil || res.IsError || resultText(res) != "whoami ran as acme/bob" {
		t.Fatalf("bob's call: %+v, %v", res, err)
	}

	// carol, a client that cannot open a URL: an error naming hers.
	carol := rig.client(t, "carol", false, nil)
	res, err = carol.CallTool(ctx, "docs_whoami", map[string]any{})
	if err != nil || !res.IsError || !strings.Contains(resultText(res), rig.public.URL+"/upstream-auth/start?l=") {
		t.Fatalf("carol's call: %+v, %v", res, err)
	}
	// dave, of a tenant without the upstream: an unknown tool.
	dave := rig.client(t, "dave", false, nil)
	if _, err := dave.CallTool(ctx, "docs_whoami", map[string]any{}); err == nil {
		t.Fatal("dave's call of an upstream he cannot reach did not fail as an unknown tool")
	}
	if got := rig.ran(); !slices.Equal(got, []string{"alice", "bob"}) {
		t.Fatalf("the upstream ran as %v, want alice then bob", got)
	}

	// carol's link opened by bob (signed in as himself): refused.
	carolLink, _ := authorizeURL(t, carol)
	code, page := rig.browser(t).open(carolLink, people["bob"], nil)
	if code != http.StatusForbidden || !strings.Contains(page, "made for someone else") {
		t.Fatalf("carol's link opened by bob: %d %s", code, page)
	}
	res, _ = carol.CallTool(ctx, "docs_whoami", map[string]any{})
	if !res.IsError || len(rig.ran()) != 2 {
		t.Fatalf("carol's call after bob opened her link: %+v, upstream ran %v", res, rig.ran())
	}
}

// A person's token lives as long as it may: refreshed a minute before it
// expires (once, the upstream then sent the new one), asked for again
// when it expires without a refresh token, when its refresh is refused,
// when the person revokes it on the page (and the authorization server
// is told), and when the upstream refuses it (401).
func TestOAuthTokenLifetime(t *testing.T) {
	rig := newOAuthRig(t, 1, false)
	ctx := context.Background()
	var mu sync.Mutex
	now := time.Now()
	rig.setClock(func() time.Time { mu.Lock(); defer mu.Unlock(); return now })
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	alice := rig.client(t, "alice", false, nil)
	call := func(wantRun bool) string {
		t.Helper()
		before := len(rig.ran())
		res, err := alice.CallTool(ctx, "docs_whoami", map[string]any{})
		if err != nil {
			t.Fatal(err)
		}
		if ran := len(rig.ran()) > before; ran != wantRun || res.IsError == wantRun {
			t.Fatalf("call ran upstream %v, want %v: %+v", ran, wantRun, resultText(res))
		}
		return resultText(res)
	}
	rig.authorize(t, alice, "alice")
	call(true)
	first := rig.lastToken()

	// Refreshed within a minute of its expiry (AccessTTL 1 h).
	advance(time.Hour - 50*time.Second)
	call(true)
	if rig.as.RefreshHits.Load() != 1 || rig.lastToken() == first {
		t.Fatalf("refreshes %d; the upstream got the old token again: %v", rig.as.RefreshHits.Load(), rig.lastToken() == first)
	}
	call(true)
	if rig.as.RefreshHits.Load() != 1 {
		t.Fatalf("refreshed again: %d", rig.as.RefreshHits.Load())
	}

	// A refused refresh: asked again.
	rig.as.SetRefreshFail(true)
	advance(time.Hour)
	if text := call(false); !strings.Contains(text, "/upstream-auth/start?l=") {
		t.Fatalf("after a refused refresh: %s", text)
	}
	rig.as.SetRefreshFail(false)

	// Revoked on the page: forgotten, and the server told.
	b := rig.browser(t)
	if code, _ := b.open(mustLink(t, alice), people["alice"], people["alice"]); code != http.StatusOK {
		t.Fatal("alice could not authorize again")
	}
	call(true)
	if code, page := b.revoke("docs"); code != http.StatusOK || !strings.Contains(page, "docs revoked") {
		t.Fatalf("revoke: %d %s", code, page)
	}
	if rig.as.RevokeHits.Load() != 1 {
		t.Fatalf("the authorization server was asked to revoke %d times", rig.as.RevokeHits.Load())
	}
	call(false)

	// No refresh token: used until it expires, then asked again.
	rig.as.RefreshTokens = false
	refreshes := rig.as.RefreshHits.Load()
	rig.authorize(t, alice, "alice")
	call(true)
	advance(time.Hour - 45*time.Second)
	call(true)
	advance(30 * time.Second)
	call(false)
	if n := rig.as.RefreshHits.Load(); n != refreshes {
		t.Fatalf("a token without a refresh token was refreshed: %d times", n-refreshes)
	}

	// Refused by the upstream: forgotten, and asked again.
	rig.authorize(t, alice, "alice")
	call(true)
	rig.refuse.Store(true) // the upstream no longer takes the token
	if text := call(false); !strings.Contains(text, "refused your authorization") {
		t.Fatalf("after the upstream's 401: %s", text)
	}
	rig.refuse.Store(false)
	if text := call(false); !strings.Contains(text, "needs your authorization first") {
		t.Fatalf("the call after a 401: %s", text)
	}
}

func mustLink(t *testing.T, c *mcptest.Client) string {
	t.Helper()
	link, _ := authorizeURL(t, c)
	if link == "" {
		t.Fatal("no authorization link in the list")
	}
	return link
}

// The tokens in the store are sealed: no value holds a token the
// upstream took, and a replica of other keys on the same store finds
// none (its person is asked to authorize), never someone's token.
func TestOAuthTokensSealed(t *testing.T) {
	rig := newOAuthRig(t, 2, true)
	ctx := context.Background()
	alice := rig.client(t, "alice", false, nil)
	rig.authorize(t, alice, "alice")
	if res, err := alice.CallTool(ctx, "docs_whoami", map[string]any{}); err != nil || res.IsError {
		t.Fatalf("alice's call: %+v, %v", res, err)
	}
	tok := strings.TrimPrefix(rig.lastToken(), "Bearer ")
	found := 0
	for _, k := range redistest.Keys(t, rig.redis, rig.prefix) {
		v, _ := rig.redis.Get(ctx, k).Bytes()
		if strings.Contains(k, "gw-oauth/") {
			found++
		}
		if bytes.Contains(v, []byte(tok)) || bytes.Contains(v, []byte(tok[len(tok)-40:])) {
			t.Fatalf("the store holds the access token in the clear under %s", k)
		}
	}
	if found != 1 {
		t.Fatalf("%d records of tokens in the store, want 1", found)
	}
	// bob authorizes too; the two records swapped in the store (what
	// whoever can write it could do) give each person none, never the
	// other's token.
	bob := rig.client(t, "bob", false, nil)
	rig.authorize(t, bob, "bob")
	var keys []string
	for _, k := range redistest.Keys(t, rig.redis, rig.prefix) {
		if strings.Contains(k, "gw-oauth/") && !strings.Contains(k, "/refresh/") {
			keys = append(keys, k)
		}
	}
	if len(keys) != 2 {
		t.Fatalf("records of tokens: %v", keys)
	}
	v0, _ := rig.redis.Get(ctx, keys[0]).Bytes()
	v1, _ := rig.redis.Get(ctx, keys[1]).Bytes()
	rig.redis.Set(ctx, keys[0], v1, time.Hour)
	rig.redis.Set(ctx, keys[1], v0, time.Hour)
	for _, c := range []*mcptest.Client{alice, bob} {
		res, err := c.CallTool(ctx, "docs_whoami", map[string]any{})
		if err != nil || !res.IsError || !strings.Contains(resultText(res), "needs your authorization first") {
			t.Fatalf("a call after the records were swapped: %+v, %v", res, err)
		}
	}
	if got := rig.ran(); len(got) != 1 {
		t.Fatalf("the upstream ran as %v after the swap", got)
	}
	other := [][]byte{bytes.Repeat([]byte{7}, 32)}
	rig.replicas = []*oauthReplica{rig.newReplica(t, rig.store(), other)}
	alice = rig.client(t, "alice", false, nil)
	res, err := alice.CallTool(ctx, "docs_whoami", map[string]any{})
	if err != nil || !res.IsError || !strings.Contains(resultText(res), "needs your authorization first") || len(rig.ran()) != 1 {
		t.Fatalf("alice's call on a replica of other keys: %+v, %v (upstream ran %v)", res, err, rig.ran())
	}
}

// StateKeys rotate without asking anyone again: a replica with a new key
// first (the old one after it) reads the tokens kept under the old one
// and moves them; a replica with the new key alone then has them too.
func TestOAuthKeyRotation(t *testing.T) {
	rig := newOAuthRig(t, 1, false)
	ctx := context.Background()
	alice := rig.client(t, "alice", false, nil)
	rig.authorize(t, alice, "alice")
	newKey := bytes.Repeat([]byte{9}, 32)
	for _, keys := range [][][]byte{{newKey, testKeys[0]}, {newKey}} {
		rig.replicas = []*oauthReplica{rig.newReplica(t, rig.store(), keys)}
		c := rig.client(t, "alice", false, nil)
		res, err := c.CallTool(ctx, "docs_whoami", map[string]any{})
		if err != nil || res.IsError || resultText(res) != "whoami ran as acme/alice" {
			t.Fatalf("keys %d: alice's call: %+v, %v", len(keys), res, err)
		}
	}
	if n := rig.as.TokenHits.Load(); n != 1 { // her one authorization
		t.Fatalf("%d token requests: someone was asked again", n)
	}
}
