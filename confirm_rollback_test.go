package mcphandler_test

// Attacks by something that can write the shared store but holds no
// StateKeys, with genuine records: one written back after it moved on
// (rolled back), or kept past its lifetime (its TTL rewritten). Such an
// attacker cannot forge anything (see storeauth_attack_test.go); each case
// here says what a record rolled back must not get: a tool run again, or
// a decision used past its signed end of life. Values copied to another
// position are in stream_replay_test.go.

import (
	"bytes"
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/elicitation"
	"github.com/mcphandler/mcphandler/mcptest"
	"github.com/mcphandler/mcphandler/session"
)

// resumeFor resumes a POST stream through c after last and returns the
// response it delivers within wait (nil if none).
func resumeFor(c *mcptest.Client, last string, wait time.Duration) *mcptest.Message {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	s, err := c.Resume(ctx, last)
	if err != nil {
		return nil
	}
	defer s.Close()
	for {
		ev, err := s.Next(ctx)
		if err != nil {
			return nil
		}
		if m := ev.Message; m != nil && m.IsResponse() {
			return m
		}
	}
}

// A 2025 confirm is answered and its tool runs. The attacker had taken a
// snapshot (DUMP) of the confirm's record while it read "answered" and of
// the call's event log before its response; afterwards it writes both back
// (RESTORE, REPLACE, no TTL), and the client resumes its stream, as a
// client whose connection dropped would. On main, every replica took the
// rolled-back confirm over and ran the tool again, as often as the
// attacker liked, for ever.
//
// Now: a replica that saw the confirm move on refuses the older revision;
// one that never saw it can take it over once (after which it has seen
// it) — and no replica acts on it past its signed end of life, whatever
// its TTL in Redis.
func TestAttackRollbackConfirmRunsAgain(t *testing.T) {
	stores, atk := redisLabStores(t)
	const timeout, linger = 600 * time.Millisecond, 400 * time.Millisecond
	l := newLab(t, labOptions{replicas: 3, confirmTimeout: timeout, lease: 200 * time.Millisecond, poll: 50 * time.Millisecond, store: stores})
	for _, r := range l.reps {
		mcphandler.SetConfirmLinger(r.h, linger)
	}
	cs := l.session("acme-admin")
	pc := startCall(t, cs[0], 1)
	id, asked := pc.confirmID(), pc.lastID // asked: the event of the question
	stream, _, _ := strings.Cut(asked, "-")
	recKey, logKey := atk.record("confirm/"+id), atk.log("events/"+cs[0].SessionID()+"/"+stream)
	var mu sync.Mutex
	var snapRec, snapLog string
	var answeredAt time.Time
	hook := func(key string, next []byte) {
		mu.Lock()
		defer mu.Unlock()
		if key == "confirm/"+id && bytes.Contains(next, []byte(`"st":"answered"`)) {
			answeredAt = time.Now()
		}
		if key == "confirm/"+id && bytes.Contains(next, []byte(`"st":"running"`)) && snapRec == "" {
			snapRec, snapLog = atk.dump(recKey), atk.dump(logKey)
		}
	}
	for _, r := range l.reps {
		r.st.beforeCAS.Store(&hook)
	}
	if err := cs[0].Respond(context.Background(), pc.id, accept); err != nil {
		t.Fatalf("answer: %v", err)
	}
	if told := verdictOf(pc.await(cs[:1], alwaysAlive, 5*time.Second)); told != toldRan || l.count(1) != 1 {
		t.Fatalf("the confirmed call: told %v, ran %d times", told, l.count(1))
	}
	l.idle(3 * time.Second)
	mu.Lock()
	rec, log, at := snapRec, snapLog, answeredAt
	mu.Unlock()
	if rec == "" || log == "" || at.IsZero() {
		t.Fatal("no snapshot of the answered record")
	}
	// attack rolls the record and the log back and resumes the stream
	// through replica rep; it reports whether the tool ran again.
	attack := func(rep int) bool {
		t.Helper()
		atk.restore(recKey, rec)
		atk.restore(logKey, log)
		before := l.count(1)
		resumeFor(cs[rep], asked, 600*time.Millisecond)
		l.idle(3 * time.Second)
		return l.count(1) > before
	}
	if attack(0) || attack(0) {
		t.Fatalf("the replica that ran the confirm ran it again from a rolled-back record (%d runs)", l.count(1))
	}
	// A replica that never read the record may act on it once.
	if attack(1) && attack(1) {
		t.Fatalf("a replica ran a rolled-back confirm twice (%d runs)", l.count(1))
	}
	// Past the record's signed end of life (its last genuine write plus
	// ConfirmTimeout and the linger), kept in Redis for ever: nobody.
	time.Sleep(time.Until(at.Add(timeout + linger + 100*time.Millisecond)))
	if attack(2) {
		t.Fatalf("a confirm record kept past its end of life ran the tool (%d runs)", l.count(1))
	}
}

// restoreRecord writes value back under key, for an hour, whether or not
// the key still exists, as anything with write access to the store could.
func restoreRecord(t *testing.T, st session.Store, key string, value []byte) {
	t.Helper()
	if overwrite(st, key, value) {
		return
	}
	if ok, err := st.PutIfAbsent(context.Background(), key, value, time.Hour); !ok || err != nil {
		t.Fatalf("restoring %s: %v, %v", key, ok, err)
	}
}

// rollbackModernLab is a 2026-07-28 replica over store with a short
// ConfirmTimeout and linger, confirming every call.
func rollbackModernLab(t *testing.T, store session.Store, tool mcphandler.Tool, timeout time.Duration) *modernLab {
	st := &faultStore{Store: store}
	h := mcphandler.New(mcphandler.Config{
		Authenticate:   bearer,
		Roles:          []string{"viewer", "editor", "admin"},
		StateKeys:      testStateKeys,
		Store:          st,
		ConfirmTimeout: timeout,
		Logger:         slog.New(slog.DiscardHandler),
		ListTools:      func(context.Context) ([]mcphandler.Tool, error) { return []mcphandler.Tool{tool}, nil },
		BeforeCall: func(context.Context, *mcphandler.ToolCall) (mcphandler.Decision, error) {
			return mcphandler.Confirm("Really delete?"), nil
		},
	})
	mcphandler.SetConfirmLinger(h, 200*time.Millisecond)
	srv := httptest.NewServer(h)
	t.Cleanup(func() { srv.Close(); h.Close() })
	return &modernLab{t: t, srv: srv, st: st}
}

// A 2026-07-28 confirm runs its tool. The attacker wrote the confirm's
// nonce record back to an earlier genuine state — pending (the confirm
// not yet answered), or awaiting a round the tool asked and that was since
// answered — and the client retries with the same requestState and
// answers (a network retry does exactly that). On main, every retry ran
// the tool again, on every replica.
//
// Now: a replica that saw the record move on refuses it; one that never
// saw it can act on it once; after the requestState's sealed expiry,
// nobody.
func TestAttackRollbackNonceRunsAgain(t *testing.T) {
	eachStore(t, func(t *testing.T, stores func(int) session.Store) {
		const timeout = 1500 * time.Millisecond
		var runs atomic.Int64
		confirmed := mcphandler.Tool{Name: "delete_thing", Handler: func(context.Context, *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
			runs.Add(1)
			return mcphandler.TextResult("deleted"), nil
		}}
		asksMore := mcphandler.Tool{Name: "delete_thing", Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
			if _, err := call.Exchange.Elicit(ctx, mcphandler.ElicitRequest{Key: "more", Message: "Sure?", Schema: elicitation.Confirm("ok", "OK")}); err != nil {
				return nil, err
			}
			runs.Add(1)
			return mcphandler.TextResult("deleted"), nil
		}}
		confirm := map[string]any{mcphandler.ReservedKeyPrefix + "confirm": acceptConfirm}
		more := map[string]any{"more": map[string]any{"action": "accept", "content": map[string]any{"ok": true}}}
		for _, tc := range []struct {
			name string
			tool mcphandler.Tool
			// run takes the call to its end on ml and returns the state
			// and answers of the round to retry, and the record to write
			// back, read from store.
			run func(ml *modernLab, store session.Store) (state string, answers map[string]any, snapshot []byte, key string)
		}{
			{"pending", confirmed, func(ml *modernLab, store session.Store) (string, map[string]any, []byte, string) {
				_, m := ml.call(1, "delete_thing", `{}`, nil, "")
				_, state := inputRound(m)
				key := ml.st.keys("nonce/")[0]
				snap, _ := store.Load(context.Background(), key)
				if _, m := ml.call(2, "delete_thing", `{}`, confirm, state); resultText(m) != "deleted" {
					t.Fatalf("the confirmed call: %v", m)
				}
				return state, confirm, snap, key
			}},
			{"awaiting", asksMore, func(ml *modernLab, store session.Store) (string, map[string]any, []byte, string) {
				_, m := ml.call(1, "delete_thing", `{}`, nil, "")
				_, state := inputRound(m)
				key := ml.st.keys("nonce/")[0]
				_, m = ml.call(2, "delete_thing", `{}`, confirm, state)
				if keys, _ := inputRound(m); len(keys) != 1 || keys[0] != "more" {
					t.Fatalf("the confirmed tool's own question: %v", m)
				}
				_, state = inputRound(m)
				snap, _ := store.Load(context.Background(), key)
				if _, m := ml.call(3, "delete_thing", `{}`, more, state); resultText(m) != "deleted" {
					t.Fatalf("the confirmed call's last round: %v", m)
				}
				return state, more, snap, key
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				runs.Store(0)
				store := stores(0)
				reps := []*modernLab{rollbackModernLab(t, store, tc.tool, timeout), rollbackModernLab(t, store, tc.tool, timeout), rollbackModernLab(t, store, tc.tool, timeout)}
				issued := time.Now()
				state, answers, snap, key := tc.run(reps[0], store)
				if runs.Load() != 1 || len(snap) == 0 {
					t.Fatalf("ran %d times; snapshot %q", runs.Load(), snap)
				}
				attack := func(rep int) bool {
					t.Helper()
					restoreRecord(t, store, key, snap)
					before := runs.Load()
					_, m := reps[rep].call(9, "delete_thing", `{}`, answers, state)
					if m["result"] == nil && m["error"] == nil {
						t.Fatalf("no clean answer: %v", m)
					}
					return runs.Load() > before
				}
				if attack(0) || attack(0) {
					t.Fatalf("the replica that ran the call ran it again from a rolled-back record (%d runs)", runs.Load())
				}
				if attack(1) && attack(1) {
					t.Fatalf("a replica ran a rolled-back confirm twice (%d runs)", runs.Load())
				}
				time.Sleep(time.Until(issued.Add(timeout + 300*time.Millisecond)))
				if attack(2) {
					t.Fatalf("a retry past the requestState's expiry ran the tool (%d runs)", runs.Load())
				}
			})
		}
	})
}

// The same with the record written back to pending, the confirm not yet
// answered, and the client's answer sent again (a client that retries
// its POST does exactly that). A replica that saw the confirm answered
// refuses it (400); one that never saw it may take it once; past the
// question's signed deadline nobody takes it, whatever the record's TTL.
func TestAttackRollbackConfirmPending(t *testing.T) {
	stores, atk := redisLabStores(t)
	const timeout = 1500 * time.Millisecond
	l := newLab(t, labOptions{replicas: 3, confirmTimeout: timeout, lease: 200 * time.Millisecond, poll: 50 * time.Millisecond, store: stores})
	cs := l.session("acme-admin")
	asked := time.Now()
	pc := startCall(t, cs[0], 1)
	recKey := atk.record("confirm/" + pc.confirmID())
	pending := atk.dump(recKey)
	if err := cs[0].Respond(context.Background(), pc.id, accept); err != nil {
		t.Fatalf("answer: %v", err)
	}
	if told := verdictOf(pc.await(cs[:1], alwaysAlive, 5*time.Second)); told != toldRan || l.count(1) != 1 {
		t.Fatalf("the confirmed call: told %v, ran %d times", told, l.count(1))
	}
	l.idle(3 * time.Second)
	// attack writes the pending record back and answers again through
	// replica rep; it reports whether the answer was taken and whether
	// the tool ran again.
	attack := func(rep int) (taken, ran bool) {
		t.Helper()
		atk.restore(recKey, pending)
		before := l.count(1)
		err := cs[rep].Respond(context.Background(), pc.id, accept)
		l.idle(3 * time.Second)
		return err == nil, l.count(1) > before
	}
	if taken, ran := attack(0); taken || ran {
		t.Fatalf("the replica that saw the answer took it again: taken %v, ran %v", taken, ran)
	}
	taken1, _ := attack(1)
	if taken, _ := attack(1); taken1 && taken {
		t.Fatal("a replica took a second answer to a rolled-back confirm")
	}
	time.Sleep(time.Until(asked.Add(timeout + 100*time.Millisecond)))
	if taken, ran := attack(2); taken || ran {
		t.Fatalf("an answer past the confirm's deadline was taken: ran %v", ran)
	}
	if n := l.count(1); n > 2 {
		t.Fatalf("the tool ran %d times", n)
	}
}
