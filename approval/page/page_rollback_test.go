package page

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler/approval"
	"github.com/mcphandler/mcphandler/internal/oidctest"
	"github.com/mcphandler/mcphandler/session"
	"github.com/mcphandler/mcphandler/session/redisstore"
	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
)

// TestRolledBack: something that can write the store (without the keys)
// copies a pending approval's record and writes it back after an admin
// declined it on the page. Neither the replica whose page took the
// decision nor one that heard of it shows the approval pending again or
// takes a second decision: no other admin approves what was declined.
func TestRolledBack(t *testing.T) {
	ctx := context.Background()
	for _, backend := range []string{"memory", "redis"} {
		t.Run(backend, func(t *testing.T) {
			var replica func() approval.Shared
			var snapshot func(key string) (restore func())
			if backend == "memory" {
				m := session.NewMemory()
				replica = func() approval.Shared { return m }
				snapshot = func(key string) func() {
					raw, err := m.Load(ctx, key)
					if err != nil {
						t.Fatal(err)
					}
					return func() {
						cur, _ := m.Load(ctx, key)
						if ok, _ := m.CompareAndSwap(ctx, key, cur, raw, time.Hour); !ok {
							t.Fatal("cannot write the copy back")
						}
					}
				}
			} else {
				rc := redistest.Client(t)
				prefix := redistest.Prefix(t, rc)
				replica = func() approval.Shared {
					st := redisstore.New(redistest.Client(t), redisstore.Options{Prefix: prefix})
					t.Cleanup(func() { st.Close() })
					return st
				}
				snapshot = func(key string) func() {
					k := prefix + "{" + key + "}:r"
					d, err := rc.Dump(ctx, k).Result()
					if err != nil {
						t.Fatal(err)
					}
					return func() {
						if err := rc.RestoreReplace(ctx, k, 0, d).Err(); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
			idp := oidctest.New(t)
			e1, e2 := newEnv(t, envOpt{shared: replica(), idp: idp}), newEnv(t, envOpt{shared: replica(), idp: idp})
			a := e1.ask(`{"id":"n1"}`)
			restore := snapshot("approval/" + a.ID)
			// A second admin opened the page on each replica while it was
			// pending, and kept it open.
			open := map[*env]*browser{}
			tokens := map[*env]string{}
			for _, e := range []*env{e1, e2} {
				b := newBrowser(t)
				_, body := e.open(b, admin2, a)
				open[e], tokens[e] = b, csrfOf(t, body)
			}
			b := newBrowser(t)
			_, body := e1.open(b, admin, a)
			if code, body := b.post(a.URL, decision("decline", csrfOf(t, body)), nil); code != http.StatusOK || !strings.Contains(body, "Declined") {
				t.Fatalf("decline: %d\n%s", code, body)
			}
			time.Sleep(200 * time.Millisecond) // e2 hears of the decision
			for name, e := range map[string]*env{"the replica that decided": e1, "a replica that heard": e2} {
				restore()
				u := e.srv.URL + "/approvals/" + a.ID
				if code, body := open[e].get(u); code == http.StatusOK || strings.Contains(body, `name="decision"`) {
					t.Fatalf("%s shows the declined approval pending again: %d\n%s", name, code, body)
				}
				if code, body := open[e].post(u, decision("approve", tokens[e]), nil); code == http.StatusOK {
					t.Fatalf("%s took a second decision: %d\n%s", name, code, body)
				}
				fresh, err := approval.New(approval.Config{Store: replica(), Keys: testKeys, URL: "https://x/"})
				if err != nil {
					t.Fatal(err)
				}
				defer fresh.Close()
				if got, err := fresh.Get(ctx, a.ID); err != nil || got.State == approval.Approved {
					t.Fatalf("%s: the record reads %+v %v", name, got, err)
				}
			}
		})
	}
}
