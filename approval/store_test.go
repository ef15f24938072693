package approval

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler/session"
	"github.com/mcphandler/mcphandler/session/redisstore"
	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
)

// eachStore runs f once per backend, with a constructor of Stores that all
// share that backend (one per replica).
func eachStore(t *testing.T, f func(t *testing.T, newStore func(mod func(*Config)) *Store)) {
	for _, name := range []string{"memory", "redis"} {
		t.Run(name, func(t *testing.T) {
			var replica func() Shared
			if name == "memory" {
				m := session.NewMemory()
				replica = func() Shared { return m }
			} else {
				prefix := redistest.Prefix(t, redistest.Client(t))
				replica = func() Shared {
					st := redisstore.New(redistest.Client(t), redisstore.Options{Prefix: prefix})
					t.Cleanup(func() { st.Close() })
					return st
				}
			}
			f(t, func(mod func(*Config)) *Store {
				return newTestStore(t, replica(), mod)
			})
		})
	}
}

func TestDecideOnce(t *testing.T) {
	eachStore(t, func(t *testing.T, newStore func(func(*Config)) *Store) {
		ctx := context.Background()
		s := newStore(nil)
		a := begin(t, s, deleteReq(`{"id":"n1"}`))
		if !ValidID(a.ID) || a.URL != "https://app.example/approvals/"+a.ID {
			t.Fatalf("id %q url %q", a.ID, a.URL)
		}
		// Eight approvers on eight replicas race; exactly one decision.
		var wins, decided atomic.Int64
		var wg sync.WaitGroup
		for i := range 8 {
			r := newStore(nil)
			wg.Go(func() {
				who := []Identity{admin, admin2}[i%2]
				_, err := r.Decide(ctx, a.ID, who, i%3 != 0)
				switch {
				case err == nil:
					wins.Add(1)
				case errors.Is(err, ErrDecided):
					decided.Add(1)
				default:
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if wins.Load() != 1 || decided.Load() != 7 {
			t.Fatalf("wins %d, already decided %d; want 1 and 7", wins.Load(), decided.Load())
		}
		got, err := s.Get(ctx, a.ID)
		if err != nil || (got.State != Approved && got.State != Declined) || got.DecidedBy.Subject == "" {
			t.Fatalf("after: %+v %v", got, err)
		}
	})
}

func TestBeginBindsTheCall(t *testing.T) {
	eachStore(t, func(t *testing.T, newStore func(func(*Config)) *Store) {
		ctx := context.Background()
		s := newStore(nil)
		a := begin(t, s, deleteReq(`{"id":"n1","force":true}`))
		// The same call, written differently, finds the same approval.
		b, created, err := newStore(nil).Begin(ctx, deleteReq(" {\"force\" : true, \"id\":\"n\\u0031\"}"))
		if err != nil || created || b.ID != a.ID {
			t.Fatalf("same call: %v created=%v id %s vs %s", err, created, b.ID, a.ID)
		}
		if string(b.Arguments) != `{"force":true,"id":"n1"}` {
			t.Fatalf("arguments %s, want canonical", b.Arguments)
		}
		// Another argument, tool or caller is another approval.
		others := []Request{deleteReq(`{"id":"n2","force":true}`), deleteReq(`{"id":"n1","force":true}`), deleteReq(`{"id":"n1","force":true}`)}
		others[1].Tool = "archive_note"
		others[2].Asker = Identity{Subject: "ed", Tenant: "globex", Role: "editor"}
		for i, req := range others {
			if o := begin(t, s, req); o.ID == a.ID {
				t.Fatalf("other call %d got the same approval", i)
			}
		}
		// Another policy or message is another approval: what the host
		// decides now applies.
		stricter := deleteReq(`{"id":"n1","force":true}`)
		stricter.Policy.Rule = "owners-only"
		reworded := deleteReq(`{"id":"n1","force":true}`)
		reworded.Message = "Delete it for good?"
		for _, req := range []Request{stricter, reworded} {
			if o := begin(t, s, req); o.ID == a.ID {
				t.Fatalf("%+v got the approval made under another policy or message", req.Policy)
			}
		}
		// Concurrent Begins of one new call agree on one approval.
		var ids sync.Map
		var wg sync.WaitGroup
		for range 8 {
			r := newStore(nil)
			wg.Go(func() {
				x, _, err := r.Begin(ctx, deleteReq(`{"id":"n9"}`))
				if err != nil {
					t.Error(err)
					return
				}
				ids.Store(x.ID, true)
			})
		}
		wg.Wait()
		n := 0
		ids.Range(func(any, any) bool { n++; return true })
		if n != 1 {
			t.Fatalf("concurrent Begins returned %d approvals, want 1", n)
		}
	})
}

func TestConsumeOnce(t *testing.T) {
	eachStore(t, func(t *testing.T, newStore func(func(*Config)) *Store) {
		ctx := context.Background()
		s := newStore(nil)
		req := deleteReq(`{"id":"n1"}`)
		a := begin(t, s, req)
		if _, err := s.Consume(ctx, a.ID, editor, req.Tool, req.Arguments); !errors.Is(err, ErrNotApproved) {
			t.Fatalf("consume pending: %v, want ErrNotApproved", err)
		}
		if _, err := s.Decide(ctx, a.ID, admin, true); err != nil {
			t.Fatal(err)
		}
		// Repeating the call before it ran finds the approved approval.
		if b, created, err := s.Begin(ctx, req); err != nil || created || b.ID != a.ID || b.State != Approved {
			t.Fatalf("repeat: %+v created=%v %v", b, created, err)
		}
		// Another caller, tool or arguments cannot use it.
		for _, c := range []struct {
			who  Identity
			tool string
			args string
		}{{admin, req.Tool, `{"id":"n1"}`}, {editor, "other", `{"id":"n1"}`}, {editor, req.Tool, `{"id":"n2"}`}, {editor, req.Tool, `{"id":"n1","id":"n2"}`}} {
			if _, err := s.Consume(ctx, a.ID, c.who, c.tool, []byte(c.args)); !errors.Is(err, ErrMismatch) {
				t.Fatalf("consume by %+v: %v, want ErrMismatch", c, err)
			}
		}
		var ran, used atomic.Int64
		var wg sync.WaitGroup
		for range 8 {
			r := newStore(nil)
			wg.Go(func() {
				_, err := r.Consume(ctx, a.ID, editor, req.Tool, []byte(`{ "id": "n1" }`))
				switch {
				case err == nil:
					ran.Add(1)
				case errors.Is(err, ErrUsed):
					used.Add(1)
				default:
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if ran.Load() != 1 || used.Load() != 7 {
			t.Fatalf("ran %d, used %d; want 1 and 7", ran.Load(), used.Load())
		}
		// A further identical call asks again.
		if b := begin(t, s, req); b.ID == a.ID {
			t.Fatal("the call after the used approval got it again")
		}
	})
}

func TestDecline(t *testing.T) {
	eachStore(t, func(t *testing.T, newStore func(func(*Config)) *Store) {
		ctx := context.Background()
		s := newStore(nil)
		req := deleteReq(`{"id":"n1"}`)
		a := begin(t, s, req)
		d, err := s.Decide(ctx, a.ID, admin, false)
		if err != nil || d.State != Declined || d.DecidedBy != admin {
			t.Fatalf("decline: %+v %v", d, err)
		}
		if _, err := s.Decide(ctx, a.ID, admin2, true); !errors.Is(err, ErrDecided) {
			t.Fatalf("approve after decline: %v", err)
		}
		if _, err := s.Consume(ctx, a.ID, editor, req.Tool, req.Arguments); !errors.Is(err, ErrNotApproved) {
			t.Fatalf("consume declined: %v", err)
		}
		if b := begin(t, s, req); b.ID == a.ID {
			t.Fatal("the call after a decline got the declined approval")
		}
	})
}

func TestPolicy(t *testing.T) {
	deny := errors.New("on leave")
	rules := map[string]RuleFunc{
		"not-bob": func(_ context.Context, _ *Approval, who Identity) error {
			if who.Subject == "bob" {
				return deny
			}
			return nil
		},
	}
	cases := []struct {
		name   string
		pol    Policy
		who    Identity
		reason string
	}{
		{"self", Policy{}, editor, ReasonSelf},
		{"self with the role", Policy{MinRole: "editor"}, editor, ReasonSelf},
		{"other workspace", Policy{}, foreign, ReasonTenant},
		{"role too low", Policy{MinRole: "admin"}, viewer, ReasonRole},
		{"unknown role", Policy{MinRole: "owner"}, admin, ReasonRole},
		{"approver role unknown", Policy{MinRole: "viewer"}, Identity{Subject: "x", Tenant: "acme", Role: "root"}, ReasonRole},
		{"no subject", Policy{}, Identity{Tenant: "acme", Role: "admin"}, ReasonNoIdentity},
		{"unknown rule", Policy{Rule: "nope"}, admin, ReasonRule},
		{"rule refuses", Policy{Rule: "not-bob"}, admin2, ReasonRule},
		{"ok", Policy{MinRole: "admin", Rule: "not-bob"}, admin, ""},
		{"self allowed", Policy{AllowSelf: true}, editor, ""},
		{"any tenant", Policy{AnyTenant: true}, foreign, ""},
	}
	eachStore(t, func(t *testing.T, newStore func(func(*Config)) *Store) {
		ctx := context.Background()
		s := newStore(func(c *Config) { c.Rules = rules })
		for i, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				req := deleteReq(`{"id":"` + string(rune('a'+i)) + `"}`)
				req.Policy = c.pol
				a := begin(t, s, req)
				_, err := s.Decide(ctx, a.ID, c.who, true)
				if c.reason == "" {
					if err != nil {
						t.Fatal(err)
					}
					return
				}
				var na *NotAllowedError
				if !errors.As(err, &na) || na.Reason != c.reason || !errors.Is(err, ErrNotAllowed) {
					t.Fatalf("got %v, want not allowed (%s)", err, c.reason)
				}
				if c.name == "rule refuses" && !errors.Is(err, deny) {
					t.Fatalf("the rule's error is lost: %v", err)
				}
				if got, _ := s.Get(ctx, a.ID); got.State != Pending {
					t.Fatalf("refused approver decided: %s", got.State)
				}
			})
		}
	})
}

func TestExpiry(t *testing.T) {
	eachStore(t, func(t *testing.T, newStore func(func(*Config)) *Store) {
		ctx := context.Background()
		s := newStore(func(c *Config) { c.TTL = 300 * time.Millisecond })
		req := deleteReq(`{"id":"n1"}`)
		a := begin(t, s, req)
		start := time.Now()
		w, err := newStore(nil).Wait(ctx, a.ID)
		if err != nil || w.State != Expired {
			t.Fatalf("wait: %+v %v", w, err)
		}
		if el := time.Since(start); el < 200*time.Millisecond || el > 2*time.Second {
			t.Fatalf("expired after %v, want about 300ms", el)
		}
		if _, err := s.Decide(ctx, a.ID, admin, true); !errors.Is(err, ErrExpired) {
			t.Fatalf("decide after expiry: %v", err)
		}
		if _, err := s.Consume(ctx, a.ID, editor, req.Tool, req.Arguments); !errors.Is(err, ErrNotApproved) {
			t.Fatalf("consume expired: %v", err)
		}
		// A decision at the deadline on a replica whose Get did not run yet
		// is refused too.
		b := begin(t, s, req)
		time.Sleep(time.Until(b.Expires) + 10*time.Millisecond)
		if _, err := newStore(nil).Decide(ctx, b.ID, admin, true); !errors.Is(err, ErrExpired) {
			t.Fatalf("decide at expiry: %v", err)
		}
	})
}

// TestWaitAcrossReplicas: a decision on replica B wakes the waiter on
// replica A at once, through Pub/Sub (the poll is an hour).
func TestWaitAcrossReplicas(t *testing.T) {
	eachStore(t, func(t *testing.T, newStore func(func(*Config)) *Store) {
		ctx := context.Background()
		hour := func(c *Config) { c.Poll = time.Hour }
		a, b := newStore(hour), newStore(hour)
		ap := begin(t, a, deleteReq(`{"id":"n1"}`))
		got := make(chan *Approval, 1)
		go func() {
			w, err := a.Wait(ctx, ap.ID)
			if err != nil {
				t.Error(err)
			}
			got <- w
		}()
		time.Sleep(100 * time.Millisecond) // let it subscribe
		start := time.Now()
		if _, err := b.Decide(ctx, ap.ID, admin, true); err != nil {
			t.Fatal(err)
		}
		select {
		case w := <-got:
			if w == nil || w.State != Approved {
				t.Fatalf("waiter got %+v", w)
			}
			if el := time.Since(start); el > 2*time.Second {
				t.Fatalf("woke after %v", el)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the waiter did not wake")
		}
	})
}

// TestForgedRecords: what something with write access to the store but
// not the keys puts there is never acted on.
func TestForgedRecords(t *testing.T) {
	eachStore(t, func(t *testing.T, newStore func(func(*Config)) *Store) {
		ctx := context.Background()
		s := newStore(nil)
		a := begin(t, s, deleteReq(`{"id":"n1"}`))
		b := begin(t, s, deleteReq(`{"id":"n2"}`))
		if _, err := s.Decide(ctx, b.ID, admin, true); err != nil {
			t.Fatal(err)
		}
		sh := s.cfg.Store
		rawA, _ := sh.Load(ctx, recordKey(a.ID))
		rawB, _ := sh.Load(ctx, recordKey(b.ID))
		other := newTestStore(t, sh, func(c *Config) { c.Keys = [][]byte{[]byte("another key of 32 bytes at least!")} })
		forged := other.records.Encode(recordKey(a.ID), &stored{State: Approved, Asker: editor, Tool: "delete_note", Digest: strings.Repeat("0", 64),
			Args: []byte(`{}`), Created: 1, Expires: 1 << 50, By: &admin, Decided: 1})
		for name, v := range map[string][]byte{
			"garbage":             []byte("approved"),
			"other keys":          forged,
			"copied from another": rawB,
			"truncated":           rawA[:len(rawA)-1],
		} {
			if ok, err := sh.CompareAndSwap(ctx, recordKey(a.ID), rawA, v, time.Minute); !ok || err != nil {
				t.Fatalf("%s: cannot plant: %v", name, err)
			}
			if _, err := s.Get(ctx, a.ID); !errors.Is(err, ErrNotFound) {
				t.Fatalf("%s: Get = %v, want ErrNotFound", name, err)
			}
			if _, err := s.Consume(ctx, a.ID, editor, "delete_note", []byte(`{"id":"n1"}`)); !errors.Is(err, ErrNotFound) {
				t.Fatalf("%s: Consume = %v, want ErrNotFound", name, err)
			}
			sh.CompareAndSwap(ctx, recordKey(a.ID), v, rawA, time.Minute)
		}
		for _, id := range []string{"", "../approval/x", strings.Repeat("a", 23), strings.Repeat("a", 21) + "=", strings.Repeat("é", 11)} {
			if _, err := s.Get(ctx, id); !errors.Is(err, ErrNotFound) {
				t.Fatalf("Get(%q) = %v", id, err)
			}
			if _, err := s.Wait(ctx, id); !errors.Is(err, ErrNotFound) {
				t.Fatalf("Wait(%q) = %v", id, err)
			}
		}
	})
}

func TestBounds(t *testing.T) {
	s := newTestStore(t, session.NewMemory(), func(c *Config) { c.MaxArgumentBytes = 100; c.MaxMessageBytes = 10 })
	ctx := context.Background()
	for name, req := range map[string]Request{
		"arguments":   deleteReq(`{"id":"` + strings.Repeat("x", 100) + `"}`),
		"message":     {Asker: editor, Tool: "t", Message: strings.Repeat("m", 11)},
		"tool":        {Asker: editor, Tool: strings.Repeat("t", MaxFieldBytes+1)},
		"subject":     {Asker: Identity{Subject: strings.Repeat("s", MaxFieldBytes+1)}, Tool: "t"},
		"huge as raw": deleteReq(`{"id":"x"}` + strings.Repeat(" ", 201)),
	} {
		if _, _, err := s.Begin(ctx, req); !errors.Is(err, ErrTooLarge) {
			t.Errorf("%s: %v, want ErrTooLarge", name, err)
		}
	}
	for name, req := range map[string]Request{
		"duplicate key": deleteReq(`{"id":"a","id":"b"}`),
		"not json":      deleteReq(`{"id":`),
		"no subject":    {Tool: "t"},
		"no tool":       {Asker: editor},
		"bad message":   {Asker: editor, Tool: "t", Message: "\xff"},
	} {
		if _, _, err := s.Begin(ctx, req); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	for name, cfg := range map[string]Config{
		"no store": {Keys: testKeys, URL: "u"},
		"no url":   {Store: session.NewMemory(), Keys: testKeys},
		"no keys":  {Store: session.NewMemory(), URL: "u"},
		"short":    {Store: session.NewMemory(), URL: "u", Keys: [][]byte{[]byte("short")}},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: New accepted", name)
		}
	}
}

// TestRedisFaults puts a failing network between the replicas and Redis:
// a decision that cannot be written is not made, and a waiter rides out
// the outage and sees the decision made after it.
func TestRedisFaults(t *testing.T) {
	ctx := context.Background()
	proxy := redistest.NewProxy(t, "")
	prefix := redistest.Prefix(t, redistest.Client(t))
	viaProxy := func() Shared {
		st := redisstore.New(proxy.Client(t), redisstore.Options{Prefix: prefix, OpTimeout: 300 * time.Millisecond, BreakerThreshold: -1})
		t.Cleanup(func() { st.Close() })
		return st
	}
	direct := redisstore.New(redistest.Client(t), redisstore.Options{Prefix: prefix})
	t.Cleanup(func() { direct.Close() })
	poll := func(c *Config) { c.Poll = 100 * time.Millisecond }
	a, b := newTestStore(t, viaProxy(), poll), newTestStore(t, direct, poll)

	ap := begin(t, b, deleteReq(`{"id":"n1"}`))
	got := make(chan *Approval, 1)
	go func() {
		w, err := a.Wait(ctx, ap.ID)
		if err != nil {
			t.Error(err)
		}
		got <- w
	}()
	time.Sleep(100 * time.Millisecond)
	proxy.Stall()
	// A decision through the stalled link fails and decides nothing.
	if _, err := a.Decide(ctx, ap.ID, admin, true); err == nil {
		t.Fatal("decision through a stalled store succeeded")
	}
	proxy.CutAll()
	proxy.Resume()
	if cur, _ := b.Get(ctx, ap.ID); cur.State != Pending {
		t.Fatalf("failed decision left %s", cur.State)
	}
	// The waiter's subscription was cut; the decision still reaches it.
	if _, err := b.Decide(ctx, ap.ID, admin2, false); err != nil {
		t.Fatal(err)
	}
	select {
	case w := <-got:
		if w == nil || w.State != Declined || w.DecidedBy != admin2 {
			t.Fatalf("waiter got %+v", w)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter did not see the decision after the outage")
	}
}

func TestWithdraw(t *testing.T) {
	eachStore(t, func(t *testing.T, newStore func(func(*Config)) *Store) {
		ctx := context.Background()
		s := newStore(nil)
		req := deleteReq(`{"id":"n1"}`)
		a := begin(t, s, req)
		if _, err := s.Withdraw(ctx, a.ID, admin); !errors.Is(err, ErrMismatch) {
			t.Fatalf("withdraw by another: %v", err)
		}
		got := make(chan *Approval, 1)
		go func() {
			w, _ := newStore(nil).Wait(ctx, a.ID)
			got <- w
		}()
		w, err := s.Withdraw(ctx, a.ID, Identity{Subject: "ed", Tenant: "acme", Role: "other role"})
		if err != nil || w.State != Withdrawn {
			t.Fatalf("withdraw: %+v %v", w, err)
		}
		if w := <-got; w == nil || w.State != Withdrawn {
			t.Fatalf("waiter: %+v", w)
		}
		if _, err := s.Decide(ctx, a.ID, admin, true); !errors.Is(err, ErrWithdrawn) {
			t.Fatalf("decide withdrawn: %v", err)
		}
		if _, err := s.Consume(ctx, a.ID, editor, req.Tool, req.Arguments); !errors.Is(err, ErrNotApproved) {
			t.Fatalf("consume withdrawn: %v", err)
		}
		if w, err := s.Withdraw(ctx, a.ID, editor); err != nil || w.State != Withdrawn {
			t.Fatalf("withdraw twice: %+v %v", w, err)
		}
		if b := begin(t, s, req); b.ID == a.ID {
			t.Fatal("the call after a withdrawal got the withdrawn approval")
		}
		// A decision that came first wins over the withdrawal.
		c := begin(t, s, deleteReq(`{"id":"n2"}`))
		s.Decide(ctx, c.ID, admin, true)
		if w, err := s.Withdraw(ctx, c.ID, editor); !errors.Is(err, ErrDecided) || w.State != Approved {
			t.Fatalf("withdraw after approval: %+v %v", w, err)
		}
	})
}
