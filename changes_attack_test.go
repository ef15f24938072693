package mcphandler_test

import (
	"bytes"
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/mcptest"
	"github.com/mcphandler/mcphandler/session"
	"github.com/mcphandler/mcphandler/session/redisstore"
	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
)

// A replica hands each change notification, verified once, to the
// streams of its target's tenant. The attacker holds a stream in tenant
// globex and wants acme's notifications: one published for acme, one for
// acme's subject bob, one for bob's subject name in globex's tenant, and
// a genuine acme notification copied from the store with its tenant
// rewritten to globex. globex's GET and listen streams must get none of
// them, nor acme's streams the one for another subject; and every stream
// still gets a notification for everyone afterwards.
func TestAttackChangesStayInTenant(t *testing.T) {
	eachStore(t, func(t *testing.T, stores func(int) session.Store) {
		ctx := context.Background()
		tools := []mcphandler.Tool{{Name: "x"}}
		a, _, _ := sharedHandler(t, stores(0), tools, nil)
		b, st, srv := sharedHandler(t, stores(1), tools, nil)
		streams := map[string]*mcptest.Stream{}
		for _, tok := range []string{"acme-viewer", "acme-admin", "globex-editor"} {
			streams[tok] = openGETStream(t, srv.URL, tok)
		}
		mc := mcptest.NewModern(t, b, mcptest.WithToken("globex-editor"))
		listen, err := mc.Listen(ctx, map[string]any{"toolsListChanged": true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { listen.Close() })
		if ack := nextMessage(t, listen, 5*time.Second); ack == nil {
			t.Fatal("no ack")
		}
		streams["globex listen"] = listen
		raw, err := st.Store.Subscribe(ctx, "notify")
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()

		expect := func(what string, want ...string) {
			t.Helper()
			for name, s := range streams {
				m := nextMessage(t, s, 300*time.Millisecond)
				if got := m != nil; got != contains(want, name) {
					t.Fatalf("%s: stream %s got %+v", what, name, m)
				}
				if m != nil && m.Method != "notifications/tools/list_changed" {
					t.Fatalf("%s: stream %s got %+v", what, name, m)
				}
			}
		}
		notify := func(tg mcphandler.Target) {
			t.Helper()
			if err := a.NotifyToolsChanged(ctx, tg); err != nil {
				t.Fatal(err)
			}
		}
		notify(mcphandler.TenantOf("acme"))
		expect("acme's notification", "acme-viewer", "acme-admin")
		genuine := <-raw.C()
		notify(mcphandler.Target{Tenant: "acme", Subject: "bob"})
		expect("bob's notification", "acme-admin")
		notify(mcphandler.Target{Tenant: "globex", Subject: "bob"})
		expect("bob in globex")
		forged := bytes.Replace(genuine, []byte(`"t":"acme"`), []byte(`"t":"globex"`), 1)
		if bytes.Equal(forged, genuine) {
			t.Fatalf("the published notification does not carry its tenant as expected: %q", genuine)
		}
		st.Store.Publish(ctx, "notify", forged)
		expect("acme's notification rewritten for globex")
		notify(mcphandler.Everyone())
		expect("everyone's notification", "acme-viewer", "acme-admin", "globex-editor", "globex listen")
	})
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// openGETStream opens tok's session on url and its GET stream, closed
// when the test ends.
func openGETStream(t *testing.T, url, tok string) *mcptest.Stream {
	t.Helper()
	ctx := context.Background()
	c := mcptest.Dial(url, mcptest.WithToken(tok))
	t.Cleanup(func() { c.Close() })
	if _, err := c.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := c.OpenStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	nextMessage(t, s, 100*time.Millisecond) // the priming event
	return s
}

// The replica's one subscription to change notifications loses its
// connection to Redis: every connection is cut, and none can be made for
// a second. Once Redis is reachable again, a notification published by
// another replica must reach the stream that was open all along, and a
// stream opened after the cut, without a restart.
func TestChangesResumeAfterCut(t *testing.T) {
	cfg := (&fixture{}).config()
	p := redistest.NewProxy(t, "")
	prefix := redistest.Prefix(t, redistest.Client(t))
	opts := redisstore.Options{OpTimeout: time.Second}
	b := redisReplica(t, cfg, p.Client(t), prefix, opts)
	a := redisReplica(t, cfg, redistest.Client(t), prefix, opts)
	srv := httptest.NewServer(b)
	t.Cleanup(srv.Close)

	before := openGETStream(t, srv.URL, "acme-viewer")
	if !notifyUntil(t, a, before, time.Second) {
		t.Fatal("no notification before the cut")
	}
	p.RefuseConnections()
	p.CutAll()
	time.Sleep(time.Second)
	p.AcceptConnections()
	if !notifyUntil(t, a, before, 10*time.Second) {
		t.Fatal("the stream open during the cut never got a notification after it")
	}
	after := openGETStream(t, srv.URL, "acme-admin")
	if !notifyUntil(t, a, after, 5*time.Second) {
		t.Fatal("a stream opened after the cut never got a notification")
	}
}

// notifyUntil publishes acme's tools/list_changed from a every 100ms until
// s receives it or wait passes; Pub/Sub delivers at most once, so one
// published while the receiver resubscribes is lost.
func notifyUntil(t *testing.T, a *mcphandler.Handler, s *mcptest.Stream, wait time.Duration) bool {
	t.Helper()
	for deadline := time.Now().Add(wait); time.Now().Before(deadline); {
		if err := a.NotifyToolsChanged(context.Background(), mcphandler.TenantOf("acme")); err != nil {
			t.Fatal(err)
		}
		if m := nextMessage(t, s, 100*time.Millisecond); m != nil {
			if m.Method != "notifications/tools/list_changed" {
				t.Fatalf("got %+v", m)
			}
			return true
		}
	}
	return false
}
