package approval

// Attacks by something that can write the shared store but does not hold
// the keys (another application on a shared Redis, a leaked Redis
// password): it cannot make a record that verifies, but it can copy a
// genuine one and write it back later, as often as it likes, with no
// expiry. Each case says what it tries and what it must not get.

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler/internal/canon"
	"github.com/mcphandler/mcphandler/session/redisstore"
	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
)

// tryCall is what the handler does with each attempt of the call req
// describes (approve.go): it reports whether the call ran.
func tryCall(t *testing.T, s *Store, req Request) bool {
	t.Helper()
	ran, err := tryCallErr(s, req)
	if err != nil {
		t.Fatal(err)
	}
	return ran
}

func tryCallErr(s *Store, req Request) (bool, error) {
	ctx := context.Background()
	a, _, err := s.Begin(ctx, req)
	if err != nil {
		return false, fmt.Errorf("Begin: %w", err)
	}
	if a.State != Approved {
		return false, nil
	}
	_, err = s.Consume(ctx, a.ID, req.Asker, req.Tool, req.Arguments)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, ErrUsed), errors.Is(err, ErrNotFound):
		return false, nil
	}
	return false, fmt.Errorf("Consume: %w", err)
}

// keysOf names the record of approval a and the index from its call.
func keysOf(t *testing.T, a *Approval, req Request) []string {
	t.Helper()
	d, err := canon.Digest(req.Arguments)
	if err != nil {
		t.Fatal(err)
	}
	return []string{recordKey(a.ID), bindingKey(req.Asker, req.Tool, d)}
}

// TestAttackRollbackUsed: the attacker copies the record and the index of
// an approval while it reads approved, and writes them back after the
// call used it, again and again. The same caller repeating the same call
// gets nothing on the replica that used the approval, nor on one that
// heard of the use; a replica that did neither (started after the use)
// runs it at most once, and none does at or after the approval's end
// (Expires + Linger), however long the copy stays in the store.
func TestAttackRollbackUsed(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		ctx := context.Background()
		a1, a2 := b.store(nil), b.store(nil)
		req := deleteReq(`{"id":"n1"}`)
		ap := begin(t, a1, req)
		if _, err := a2.Decide(ctx, ap.ID, admin, true); err != nil {
			t.Fatal(err)
		}
		restore := b.snapshot(keysOf(t, ap, req)...)
		if !tryCall(t, a1, req) {
			t.Fatal("the approved call did not run")
		}
		heard(t, a2, ap.ID, Used)
		for round := range 3 {
			for name, s := range map[string]*Store{"the replica that used it": a1, "a replica that heard": a2} {
				restore()
				if tryCall(t, s, req) {
					t.Fatalf("round %d: the rolled-back approval ran again on %s", round, name)
				}
			}
		}
		// Replicas started after the use, their clocks swept across the
		// approval's expiry and its end.
		end := ap.Expires.Add(DefaultLinger)
		for _, c := range []struct {
			name string
			now  time.Time
			may  bool
		}{
			{"before expiry", ap.Expires.Add(-time.Millisecond), true},
			{"at expiry", ap.Expires, true},
			{"before the end", end.Add(-time.Millisecond), true},
			{"at the end", end, false},
			{"after the end", end.Add(time.Millisecond), false},
			{"a day later", end.Add(24 * time.Hour), false},
		} {
			fresh := at(b.store(nil), c.now)
			restore()
			if ran := tryCall(t, fresh, req); ran && !c.may {
				t.Fatalf("%s: a rolled-back approval ran on a new replica", c.name)
			}
			for range 3 {
				restore()
				if tryCall(t, fresh, req) {
					t.Fatalf("%s: a rolled-back approval ran twice on one replica", c.name)
				}
			}
		}
	})
}

// TestAttackRollbackDecision: the attacker copies a pending approval's
// record and writes it back after a person declined it (or the caller
// withdrew it), hoping another approver approves it. A replica that saw
// or heard of the decision does not show it pending nor decide it again;
// none decides it at or after its expiry.
func TestAttackRollbackDecision(t *testing.T) {
	for _, end := range []string{"declined", "withdrawn"} {
		t.Run(end, func(t *testing.T) {
			eachBackend(t, func(t *testing.T, b *backend) {
				ctx := context.Background()
				a1, a2 := b.store(nil), b.store(nil)
				req := deleteReq(`{"id":"n1"}`)
				ap := begin(t, a1, req)
				restore := b.snapshot(recordKey(ap.ID))
				if end == "declined" {
					if _, err := a2.Decide(ctx, ap.ID, admin, false); err != nil {
						t.Fatal(err)
					}
				} else if _, err := a2.Withdraw(ctx, ap.ID, editor); err != nil {
					t.Fatal(err)
				}
				heard(t, a1, ap.ID, State(end))
				for name, s := range map[string]*Store{"a replica that heard": a1, "the replica that decided": a2} {
					restore()
					if got, err := s.Get(ctx, ap.ID); err == nil && got.State == Pending {
						t.Fatalf("%s shows the %s approval pending again", name, end)
					}
					if _, err := s.Decide(ctx, ap.ID, admin2, true); err == nil {
						t.Fatalf("%s approved the %s approval", name, end)
					}
					if tryCall(t, s, req) {
						t.Fatalf("the %s call ran on %s", end, name)
					}
				}
				// A replica that knows nothing cannot decide it once it expired.
				for _, now := range []time.Time{ap.Expires, ap.Expires.Add(time.Millisecond), ap.Expires.Add(24 * time.Hour)} {
					restore()
					fresh := at(b.store(nil), now)
					if _, err := fresh.Decide(ctx, ap.ID, admin2, true); err == nil {
						t.Fatalf("decided at %v, its expiry %v", now, ap.Expires)
					}
					if tryCall(t, fresh, req) {
						t.Fatalf("the %s call ran at %v", end, now)
					}
				}
			})
		})
	}
}

// heard waits until s knows that approval id is in state st (another
// replica told it); it fails the test after a few seconds.
func heard(t *testing.T, s *Store, id string, st State) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); s.seen.known(id) != st; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the replica never heard of the transition")
		}
	}
}

// TestAttackRollbackDeafReplica: replica B cannot hear the other replicas
// (its connections to Redis are cut, and refused) while A uses an
// approval; the attacker then writes back the approved copy. B, which
// never heard of the use, runs the call at most once, A never; once B can
// reach Redis again it hears the transitions that follow.
func TestAttackRollbackDeafReplica(t *testing.T) {
	ctx := context.Background()
	rc := redistest.Client(t)
	prefix := redistest.Prefix(t, rc)
	b := redisBackend(t, rc, prefix)
	proxy := redistest.NewProxy(t, "")
	direct := redisstore.New(redistest.Client(t), redisstore.Options{Prefix: prefix})
	viaProxy := redisstore.New(proxy.Client(t), redisstore.Options{Prefix: prefix, OpTimeout: 300 * time.Millisecond, BreakerThreshold: -1})
	t.Cleanup(func() { direct.Close(); viaProxy.Close() })
	a, deaf := newTestStore(t, direct, nil), newTestStore(t, viaProxy, nil)

	req := deleteReq(`{"id":"n1"}`)
	ap := begin(t, a, req)
	if _, err := deaf.Decide(ctx, ap.ID, admin, true); err != nil {
		t.Fatal(err)
	}
	restore := b.snapshot(keysOf(t, ap, req)...)
	proxy.RefuseConnections()
	proxy.CutAll()
	if !tryCall(t, a, req) {
		t.Fatal("the approved call did not run")
	}
	time.Sleep(100 * time.Millisecond) // what B would have heard by now
	proxy.AcceptConnections()
	if deaf.seen.known(ap.ID) != Approved {
		t.Fatalf("B knows %q; the test needs it deaf to the use", deaf.seen.known(ap.ID))
	}
	runs := 1
	for range 3 {
		for _, s := range []*Store{a, deaf} {
			restore()
			for try := 0; ; try++ { // B's connections come back
				ran, err := tryCallErr(s, req)
				if err == nil {
					if ran {
						runs++
					}
					break
				}
				if try == 50 {
					t.Fatal(err)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
	if runs > 2 {
		t.Fatalf("ran %d times: once approved, and more than once on the replica that never heard", runs)
	}
	// B hears again, once its Pub/Sub connection is back.
	for i := 0; ; i++ {
		next := begin(t, a, distinct(100+i))
		if _, err := a.Decide(ctx, next.ID, admin, false); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
		if deaf.seen.known(next.ID) == Declined {
			break
		}
		if i == 100 {
			t.Fatal("B never hears again")
		}
	}
}

func TestSeenBounded(t *testing.T) {
	var m seen
	now := int64(1_000_000)
	for i := range maxSeen + 100 {
		m.note(fmt.Sprintf("%022d", i), Used, now+int64(i)+1, now)
	}
	if len(m.state) != maxSeen || len(m.ends) != maxSeen {
		t.Fatalf("%d remembered, %d ends; want %d", len(m.state), len(m.ends), maxSeen)
	}
	if m.known(fmt.Sprintf("%022d", 99)) != "" || m.known(fmt.Sprintf("%022d", 100)) != Used {
		t.Fatal("not the earliest ends were forgotten")
	}
	// Past their end, they go at the next note.
	m.note("x", Approved, now+1<<40, now+maxSeen+100)
	if len(m.state) != 1 || m.known("x") != Approved {
		t.Fatalf("%d remembered after every end passed", len(m.state))
	}
	// A later state replaces an earlier one, never the reverse; pending
	// and ended approvals are not remembered.
	m.note("x", Used, now+1<<40, now)
	m.note("x", Approved, now+1<<40, now)
	m.note("y", Pending, now+1<<40, now)
	m.note("z", Declined, now, now)
	if m.known("x") != Used || m.known("y") != "" || m.known("z") != "" {
		t.Fatalf("x %q y %q z %q", m.known("x"), m.known("y"), m.known("z"))
	}
}
