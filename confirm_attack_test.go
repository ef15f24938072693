package mcphandler_test

// Attacks on the promise "human decisions you can trust": a confirm cannot
// be forged, replayed, moved or run twice, and what the client is told is
// what happened. Each case says what the attacker (or the bad luck of a
// distributed system) tries, and what they must not get.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
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

// The answer arrives in the instant the asker gives up: after its wait
// ended, just before it closes the record. The client must not be told
// "timed out" while the tool runs, nor may OnCall report both timed_out
// and confirmed: the store decides, in one transition, which came first.
func TestAttackConfirmAnsweredAtTimeout(t *testing.T) {
	eachStore(t, func(t *testing.T, stores func(int) session.Store) {
		l := newLab(t, labOptions{replicas: 2, confirmTimeout: 300 * time.Millisecond, store: stores})
		cs := l.session("acme-admin")
		var call atomic.Pointer[pendingCall]
		var hooked atomic.Int32
		answerErr := make(chan error, 1)
		hook := func(key string, new []byte) {
			if strings.HasPrefix(key, "confirm/") && bytes.Contains(new, []byte(`"st":"closed"`)) && hooked.Add(1) == 1 {
				answerErr <- cs[0].Respond(context.Background(), call.Load().id, accept)
			}
		}
		l.reps[0].st.beforeCAS.Store(&hook)
		pc := startCall(t, cs[0], 1)
		call.Store(pc)
		told := verdictOf(pc.await(cs, alwaysAlive, 5*time.Second))
		if hooked.Load() == 0 {
			t.Fatal("the asker never closed its record: the test proves nothing")
		}
		if !l.idle(5 * time.Second) {
			t.Fatal("a replica is still busy")
		}
		checkConfirmInvariants(t, l, pc, 1, told, "answer at the close")
		accepted := <-answerErr == nil
		if accepted && told != toldRan {
			t.Fatalf("the answer was accepted (202), and the client was told %v", told)
		}
		if !accepted && told != toldNotRun {
			t.Fatalf("the answer was refused, and the client was told %v", told)
		}
	})
}

// On Redis Cluster PUBLISH counts only the subscribers of the node that
// received it, so an answer posted to another replica may be told that
// nobody listens. Liveness must not come from that count: the tool runs
// once, whichever replica the answer reaches.
func TestAttackConfirmPublishCountLies(t *testing.T) {
	eachStore(t, func(t *testing.T, stores func(int) session.Store) {
		l := newLab(t, labOptions{replicas: 2, store: stores})
		for _, r := range l.reps {
			r.st.zeroCount.Store(true)
		}
		cs := l.session("acme-admin")
		pc := startCall(t, cs[0], 1)
		if err := cs[1].Respond(context.Background(), pc.id, accept); err != nil {
			t.Fatalf("answer through replica 1: %v", err)
		}
		told := verdictOf(pc.await(cs, alwaysAlive, 5*time.Second))
		l.idle(5 * time.Second)
		checkConfirmInvariants(t, l, pc, 1, told, "answer via another replica")
		if told != toldRan {
			t.Fatalf("the client was told %v", told)
		}
	})
}

// The Pub/Sub message that wakes the asker is lost (Redis Pub/Sub is at
// most once). The answer was accepted, so the asker must not end with
// "timed out"; reading the record costs it latency, never the answer.
func TestAttackConfirmReplyLost(t *testing.T) {
	eachStore(t, func(t *testing.T, stores func(int) session.Store) {
		l := newLab(t, labOptions{replicas: 2, confirmTimeout: 3 * time.Second, store: stores})
		l.reps[1].st.dropReply.Store(true)
		cs := l.session("acme-admin")
		pc := startCall(t, cs[0], 1)
		if err := cs[1].Respond(context.Background(), pc.id, accept); err != nil {
			t.Fatalf("answer: %v", err)
		}
		told := verdictOf(pc.await(cs, alwaysAlive, 6*time.Second))
		l.idle(5 * time.Second)
		checkConfirmInvariants(t, l, pc, 1, told, "reply lost")
		if told != toldRan {
			t.Fatalf("the answer was accepted, and the client was told %v", told)
		}
	})
}

// The store fails just when the replica that received the answer reads
// the confirm. The client must be told to try again (503), not that nobody
// waits (400): its answer is not lost, and the retry decides it.
func TestConfirmAnswerWhileStoreFails(t *testing.T) {
	eachStore(t, func(t *testing.T, stores func(int) session.Store) {
		l := newLab(t, labOptions{replicas: 2, store: stores})
		cs := l.session("acme-admin")
		pc := startCall(t, cs[0], 1)
		prefix := "confirm/"
		l.reps[1].st.failKeys.Store(&prefix)
		if err := cs[1].Respond(context.Background(), pc.id, accept); !isHTTP(err, 503) {
			t.Fatalf("an answer the store could not take: %v, want 503", err)
		}
		l.reps[1].st.failKeys.Store(nil)
		if err := cs[1].Respond(context.Background(), pc.id, accept); err != nil {
			t.Fatalf("the answer again: %v", err)
		}
		told := verdictOf(pc.await(cs, alwaysAlive, 5*time.Second))
		l.idle(5 * time.Second)
		checkConfirmInvariants(t, l, pc, 1, told, "store failing at the answer")
		if told != toldRan {
			t.Fatalf("client told %v", told)
		}
	})
}

// Someone with write access to the store (another application on a shared
// Redis) publishes an accept on the confirm's reply channel, or writes an
// answered record, without the client ever answering. They must not make
// the tool run.
func TestAttackConfirmForgedAnswer(t *testing.T) {
	eachStore(t, func(t *testing.T, stores func(int) session.Store) {
		l := newLab(t, labOptions{replicas: 1, confirmTimeout: 600 * time.Millisecond, lease: 200 * time.Millisecond, poll: 50 * time.Millisecond, store: stores})
		cs := l.session("acme-admin")
		pc := startCall(t, cs[0], 1)
		st, sid, id := l.reps[0].st.Store, cs[0].SessionID(), pc.confirmID()
		msg := fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"result":{"action":"accept","content":{"confirm":true}}}`, id)
		forged := fmt.Sprintf(`{"role":"admin","msg":%s}`, msg)
		for range 3 {
			st.Publish(context.Background(), "reply/"+sid+"/"+id, []byte(forged))
		}
		told := verdictOf(pc.await(cs, alwaysAlive, 3*time.Second))
		l.idle(3 * time.Second)
		if n := l.count(1); n != 0 || told == toldRan {
			t.Fatalf("a forged reply ran the tool %d times (client told %v)", n, told)
		}
		checkConfirmInvariants(t, l, pc, 1, told, "forged reply")
		noAnswerAudited(t, l, pc, "forged reply")

		// The same with a forged record: the old, unsigned shape of an
		// answered confirm, written over the pending one.
		pc = startCall(t, cs[0], 2)
		id = pc.confirmID()
		rec := fmt.Sprintf(`{"st":"answered","sid":%q,"own":"4:acme/bob","tool":"delete_thing","args":"x","dl":%d,"ans":{"action":"accept","content":{"confirm":true}},"role":"admin"}`,
			sid, time.Now().Add(time.Minute).UnixMilli())
		if !overwrite(st, "confirm/"+id, []byte(rec)) {
			t.Fatal("no confirm record to overwrite")
		}
		st.Publish(context.Background(), "reply/"+sid+"/"+id, []byte(forged))
		told = verdictOf(pc.await(cs, alwaysAlive, 3*time.Second))
		l.idle(3 * time.Second)
		if n := l.count(2); n != 0 || told == toldRan {
			t.Fatalf("a forged record ran the tool %d times (client told %v)", n, told)
		}
		// The real answer, after the forgery, cannot run it either: the
		// record is no longer one of ours.
		if err := cs[0].Respond(context.Background(), pc.id, accept); !isHTTP(err, 400) {
			t.Fatalf("an answer to a forged record: %v, want 400", err)
		}
		checkConfirmInvariants(t, l, pc, 2, told, "forged record")
		noAnswerAudited(t, l, pc, "forged record")
	})
}

// noAnswerAudited fails unless the one Audit record of lab call pc says
// that nobody answered: no answer was accepted for it.
func noAnswerAudited(t *testing.T, l *lab, pc *pendingCall, note string) {
	t.Helper()
	n := 0
	for _, ev := range l.eventsFor(pc.confirmID()) {
		if a := ev.Audit; a != nil {
			n++
			if a.By != "" || a.DeciderSubject != "" || a.Outcome == mcphandler.OutcomeConfirmed {
				t.Errorf("%s: the audit claims a decision nobody made: %+v", note, *a)
			}
		}
	}
	if n != 1 {
		t.Errorf("%s: %d audit records, want 1", note, n)
	}
}

// Records of unexpected shape — garbage, truncated, the old unsigned
// format, a genuine record moved from another confirm — written into the
// store where a confirm's record, lease or stream pointer lives. Reading
// them must not panic, and nothing may run: they read as absent.
func TestAttackConfirmGarbageRecords(t *testing.T) {
	eachStore(t, func(t *testing.T, stores func(int) session.Store) {
		l := newLab(t, labOptions{replicas: 2, confirmTimeout: 800 * time.Millisecond, lease: 200 * time.Millisecond, poll: 50 * time.Millisecond, store: stores})
		cs := l.session("acme-admin")
		st := l.reps[0].st.Store
		// A genuine record of another confirm, to be moved.
		other := startCall(t, cs[0], 99)
		moved, err := st.Load(context.Background(), "confirm/"+other.confirmID())
		if err != nil {
			t.Fatal(err)
		}
		garbage := map[string][]byte{
			"empty":      {},
			"not json":   []byte("\x00\xffgarbage"),
			"json array": []byte(`[1,2,3]`),
			"old format": []byte(`{"st":"answered","sid":"x","own":"4:acme/bob","tool":"delete_thing","args":"00","ans":{"action":"accept","content":{"confirm":true}}}`),
			"truncated":  moved[:len(moved)/2],
			"moved":      moved,
			"signed tag": append([]byte("r"), bytes.Repeat([]byte{0}, 40)...),
		}
		i := 0
		for name, value := range garbage {
			i++
			t.Run(name, func(t *testing.T) {
				pc := startCall(t, cs[0], i)
				id := pc.confirmID()
				if !overwrite(st, "confirm/"+id, value) {
					t.Fatal("no record to overwrite")
				}
				// The pointer of the call's stream and the lease too.
				stream, _, _ := strings.Cut(pc.lastID, "-")
				overwrite(st, "confirm-of/"+cs[0].SessionID()+"/"+stream, value)
				overwrite(st, "lease/"+id, value)
				if err := cs[1].Respond(context.Background(), pc.id, accept); !isHTTP(err, 400) {
					t.Errorf("an answer to a garbage record: %v, want 400", err)
				}
				told := verdictOf(pc.await(cs, alwaysAlive, 3*time.Second))
				l.idle(3 * time.Second)
				if n := l.count(i); n != 0 || told == toldRan {
					t.Fatalf("ran %d times (client told %v)", n, told)
				}
				checkConfirmInvariants(t, l, pc, i, told, name)
				noAnswerAudited(t, l, pc, name)
			})
		}
		other.disconnect()
		other.await(cs, alwaysAlive, time.Second)
		l.idle(3 * time.Second)
	})
}

// A garbage lease (the replica responsible for a confirm looks alive for
// ever) can only delay who finishes a confirm: the asker still decides,
// and the tool runs once.
func TestAttackConfirmGarbageLease(t *testing.T) {
	eachStore(t, func(t *testing.T, stores func(int) session.Store) {
		l := newLab(t, labOptions{replicas: 2, store: stores})
		cs := l.session("acme-admin")
		pc := startCall(t, cs[0], 1)
		overwrite(l.reps[0].st.Store, "lease/"+pc.confirmID(), []byte("\x00garbage"))
		if err := cs[1].Respond(context.Background(), pc.id, accept); err != nil {
			t.Fatalf("answer: %v", err)
		}
		told := verdictOf(pc.await(cs, alwaysAlive, 5*time.Second))
		l.idle(5 * time.Second)
		checkConfirmInvariants(t, l, pc, 1, told, "garbage lease")
		if told != toldRan {
			t.Fatalf("client told %v", told)
		}
	})
}

// A confirmed 2026-07-28 tool that then asks its own question goes on
// through the rounds to its result. Retrying any round's state — the
// current one, one already answered, one of a finished call, several at
// once — runs nothing a second time.
func TestAttackModernConfirmedToolAsksMore(t *testing.T) {
	eachStore(t, func(t *testing.T, stores func(int) session.Store) {
		var effects atomic.Int64 // the tool's side effect: after every answer
		tool := mcphandler.Tool{Name: "delete_thing", Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
			res, err := call.Elicit(ctx, mcphandler.ElicitRequest{Key: "why", Message: "Why?", Schema: elicitation.NewSchema().String("why", elicitation.Required())})
			if err != nil {
				return nil, err
			}
			effects.Add(1)
			return mcphandler.TextResult("deleted because " + res.Content["why"].(string)), nil
		}}
		ml := newModernLab(t, stores(0), tool, func(context.Context, *mcphandler.ToolCall) (mcphandler.Decision, error) {
			return mcphandler.Confirm("Really delete?"), nil
		})
		_, m := ml.call(1, "delete_thing", `{}`, nil, "")
		keys, s1 := inputRound(m)
		if len(keys) != 1 || keys[0] != mcphandler.ReservedKeyPrefix+"confirm" {
			t.Fatalf("round 1: %v", m)
		}
		_, m = ml.call(2, "delete_thing", `{}`, map[string]any{keys[0]: acceptConfirm}, s1)
		keys2, s2 := inputRound(m)
		if len(keys2) != 1 || keys2[0] != "why" {
			t.Fatalf("round 2, after the accept: %v, want the tool's question", m)
		}
		// The client lost that answer and retries round 2: the same
		// question comes back, and the confirm is not asked again.
		_, m = ml.call(3, "delete_thing", `{}`, map[string]any{keys[0]: acceptConfirm}, s1)
		if k, s := inputRound(m); len(k) != 1 || k[0] != "why" || s != s2 {
			t.Fatalf("round 2 retried: %v", m)
		}
		why := map[string]any{"why": map[string]any{"action": "accept", "content": map[string]any{"why": "tidy"}}}
		var wg sync.WaitGroup
		texts := make([]string, 8)
		for i := range 8 { // the last round, several times at once
			wg.Go(func() {
				_, m := ml.call(10+i, "delete_thing", `{}`, why, s2)
				texts[i] = resultText(m)
			})
		}
		wg.Wait()
		for i, text := range texts {
			if text != "deleted because tidy" && !strings.Contains(text, "still running") {
				t.Errorf("concurrent last round %d: %q", i, text)
			}
		}
		// Once finished, every state of the call gets the recorded result.
		for name, tc := range map[string]struct {
			resp  map[string]any
			state string
		}{"last round": {why, s2}, "round 2": {map[string]any{keys[0]: acceptConfirm}, s1}, "a decline of round 2": {map[string]any{keys[0]: map[string]any{"action": "decline"}}, s1}} {
			if _, m := ml.call(30, "delete_thing", `{}`, tc.resp, tc.state); resultText(m) != "deleted because tidy" {
				t.Errorf("%s after the end: %v", name, m)
			}
		}
		if n := effects.Load(); n != 1 {
			t.Fatalf("the tool completed %d times, want 1", n)
		}
	})
}

// A tool asks its own question under the key "confirm" while its call is
// allowed; later the policy asks for a confirm. The tool's answer must not
// stand for the human's confirm: the confirm's key is reserved, and the
// human is asked.
func TestAttackModernToolAnswerCannotConfirm(t *testing.T) {
	var confirmNow atomic.Bool
	var runs atomic.Int64
	tool := mcphandler.Tool{Name: "delete_thing", Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
		if _, err := call.Elicit(ctx, mcphandler.ElicitRequest{Key: "confirm", Message: "Proceed?", Schema: elicitation.Confirm("confirm", "Proceed")}); err != nil {
			return nil, err
		}
		runs.Add(1)
		return mcphandler.TextResult("deleted"), nil
	}}
	ml := newModernLab(t, session.NewMemory(), tool, func(context.Context, *mcphandler.ToolCall) (mcphandler.Decision, error) {
		if confirmNow.Load() {
			return mcphandler.Confirm("Really delete?"), nil
		}
		return mcphandler.Allow(), nil
	})
	_, m := ml.call(1, "delete_thing", `{}`, nil, "")
	keys, s1 := inputRound(m)
	if len(keys) != 1 || keys[0] != "confirm" {
		t.Fatalf("the tool's question: %v", m)
	}
	confirmNow.Store(true)
	_, m = ml.call(2, "delete_thing", `{}`, map[string]any{"confirm": acceptConfirm}, s1)
	if runs.Load() != 0 {
		t.Fatalf("the tool's own answer confirmed the call: %v", m)
	}
	if k, _ := inputRound(m); len(k) != 1 || k[0] != mcphandler.ReservedKeyPrefix+"confirm" {
		t.Fatalf("the human was not asked: %v", m)
	}
}

// A tool that names its question with the reserved prefix gets an error,
// on both eras: it cannot ask in the confirm's name.
func TestReservedInputKeyIsRefused(t *testing.T) {
	var errs sync.Map
	tool := mcphandler.Tool{Name: "ask", Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
		_, err := call.Elicit(ctx, mcphandler.ElicitRequest{Key: mcphandler.ReservedKeyPrefix + "confirm", Message: "?", Schema: elicitation.Confirm("confirm", "OK")})
		v, _ := mcphandler.ProtocolVersionFrom(ctx)
		errs.Store(v, err)
		return nil, err
	}}
	ml := newModernLab(t, session.NewMemory(), tool, nil)
	_, m := ml.call(1, "ask", `{}`, map[string]any{mcphandler.ReservedKeyPrefix + "confirm": acceptConfirm}, "")
	if k, _ := inputRound(m); k != nil {
		t.Fatalf("2026-07-28: the reserved key was asked: %v", m)
	}
	c := connect(t, ml.srv.Config.Handler, "acme-admin", mcptest.WithElicitationHandler(answer("accept", map[string]any{"confirm": true})))
	if res, err := c.CallTool(context.Background(), "ask", nil); err != nil || !res.IsError {
		t.Fatalf("2025: %+v, %v", res, err)
	}
	for _, v := range []string{"2026-07-28", "2025-11-25"} {
		err, _ := errs.Load(v)
		if e, _ := err.(error); e == nil || !strings.Contains(e.Error(), "reserved") {
			t.Errorf("%s: Elicit with a reserved key returned %v", v, err)
		}
	}
}

// The record of a 2026-07-28 confirm is overwritten with records of every
// odd shape — a result that is not an object, a number, the old unsigned
// format, truncated, moved from another nonce. A retry must get a clean
// answer, without a panic and without a run.
func TestAttackModernGarbageNonceRecords(t *testing.T) {
	eachStore(t, func(t *testing.T, stores func(int) session.Store) {
		var runs atomic.Int64
		tool := mcphandler.Tool{Name: "delete_thing", Handler: func(context.Context, *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
			runs.Add(1)
			return mcphandler.TextResult("deleted"), nil
		}}
		ml := newModernLab(t, stores(0), tool, func(context.Context, *mcphandler.ToolCall) (mcphandler.Decision, error) {
			return mcphandler.Confirm("Really delete?"), nil
		})
		answers := map[string]any{"confirm": acceptConfirm} // the old key too
		answers[mcphandler.ReservedKeyPrefix+"confirm"] = acceptConfirm
		// confirmed runs one confirmed call to its end and returns its
		// state and the key of its record.
		confirmed := func(id int) (string, string) {
			t.Helper()
			_, m := ml.call(id, "delete_thing", `{}`, nil, "")
			if keys, _ := inputRound(m); len(keys) != 1 {
				t.Fatalf("round 1: %v", m)
			}
			_, state := inputRound(m)
			before := runs.Load()
			if _, m := ml.call(id+1, "delete_thing", `{}`, answers, state); resultText(m) != "deleted" || runs.Load() != before+1 {
				t.Fatalf("round 2: %v", m)
			}
			nonces := ml.st.keys("nonce/")
			if len(nonces) == 0 {
				t.Fatal("no nonce record was written")
			}
			return state, nonces[len(nonces)-1]
		}
		_, otherKey := confirmed(1)
		moved, _ := ml.st.Store.Load(context.Background(), otherKey)
		for name, value := range map[string][]byte{
			"result a number":  []byte(`{"o":"confirmed","r":1}`),
			"result a string":  []byte(`{"o":"confirmed","r":"x"}`),
			"result too short": []byte(`{"st":"done","n":1,"r":"{"}`),
			"old running":      []byte(`{"o":"running"}`),
			"not json":         []byte("\xff\x00"),
			"empty":            {},
			"truncated":        moved[:len(moved)-3],
			"moved":            moved,
		} {
			t.Run(name, func(t *testing.T) {
				state, key := confirmed(10)
				if !overwrite(ml.st.Store, key, value) {
					t.Fatal("no record to overwrite")
				}
				before := runs.Load()
				status, m := ml.call(20, "delete_thing", `{}`, answers, state)
				if runs.Load() != before {
					t.Fatalf("a garbage record ran the tool again: %d %v", status, m)
				}
				if m["result"] == nil && m["error"] == nil {
					t.Fatalf("no clean answer: %d %v", status, m)
				}
			})
		}
	})
}

// argsHost serves one destructive tool, delete_doc, under ConfirmDestructive,
// that records the arguments it ran with; asked collects the confirm
// messages a client was shown.
type argsHost struct {
	mu    sync.Mutex
	ran   []string
	asked []string
}

func (a *argsHost) config() mcphandler.Config {
	return mcphandler.Config{
		Authenticate: bearer,
		Logger:       slog.New(slog.DiscardHandler),
		ListTools: func(context.Context) ([]mcphandler.Tool, error) {
			return []mcphandler.Tool{{Name: "delete_doc", Handler: func(_ context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
				a.mu.Lock()
				a.ran = append(a.ran, string(call.Arguments))
				a.mu.Unlock()
				return mcphandler.TextResult("deleted"), nil
			}}}, nil
		},
		BeforeCall:     mcphandler.ConfirmDestructive(nil),
		ConfirmTimeout: 2 * time.Second,
	}
}

func (a *argsHost) accept(_ context.Context, p mcptest.ElicitParams) (mcptest.ElicitResult, error) {
	a.mu.Lock()
	a.asked = append(a.asked, p.Message)
	a.mu.Unlock()
	return mcptest.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
}

// The attacker repeats a key, padding the first occurrence so that a
// message cut after a few hundred characters shows only it: the human
// would approve draft-notes.txt while the tool, which keeps the last
// value, deletes customers-prod. A repeated key gives the arguments no
// single meaning, so the call is refused before anything is shown or run
// — on every revision and transport, and wherever the repeat hides.
func TestAttackRepeatedKeyShowsOneRunsAnother(t *testing.T) {
	args := `{"id":"draft-notes.txt"` + strings.Repeat(" ", 400) + `,"id":"customers-prod"}`
	call := func(args string) string {
		return `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"delete_doc","arguments":` + args + `}}`
	}
	modern := func(args string) string {
		return `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"delete_doc","arguments":` + args +
			`,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}}}`
	}
	for _, tc := range []struct {
		name, body string
		code       mcphandler.Code
	}{
		{"2025 arguments", call(args), mcphandler.CodeInvalidParams},
		{"2025 nested", call(`{"doc":{"id":"a","id":"b"}}`), mcphandler.CodeInvalidParams},
		{"2025 escaped spelling", call(`{"id":"a","\u0069d":"b"}`), mcphandler.CodeInvalidParams},
		{"2025 envelope", `{"jsonrpc":"2.0","id":7,"method":"tools/list","method":"tools/call","params":{"name":"delete_doc"}}`, mcphandler.CodeInvalidRequest},
		{"2025 params", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"read","name":"delete_doc"}}`, mcphandler.CodeInvalidParams},
		{"2026-07-28 arguments", modern(args), mcphandler.CodeInvalidParams},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &argsHost{}
			h := mcphandler.New(a.config())
			var resp *http.Response
			var err error
			if strings.HasPrefix(tc.name, "2026") {
				c := mcptest.NewModern(t, h, mcptest.WithToken("acme-admin"), mcptest.WithElicitationHandler(a.accept))
				resp, err = c.Post(context.Background(), []byte(tc.body), nil)
			} else {
				c := connect(t, h, "acme-admin", mcptest.WithElicitationHandler(a.accept))
				resp, err = c.Post(context.Background(), []byte(tc.body), nil)
			}
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var m struct {
				Error *struct{ Code mcphandler.Code } `json:"error"`
			}
			if resp.StatusCode != http.StatusBadRequest || json.Unmarshal(body, &m) != nil || m.Error == nil || m.Error.Code != tc.code {
				t.Fatalf("status %d, body %s; want 400 with %d", resp.StatusCode, body, tc.code)
			}
			if len(a.ran) != 0 || len(a.asked) != 0 {
				t.Fatalf("ran %q, asked %q", a.ran, a.asked)
			}
		})
	}
	t.Run("legacy 2024-11-05", func(t *testing.T) {
		a := &argsHost{}
		h := mcphandler.New(a.config())
		sse, msgs := h.LegacySSE("/messages")
		mux := http.NewServeMux()
		mux.Handle("/sse", sse)
		mux.Handle("/messages", msgs)
		c := mcptest.NewLegacy(t, mux, "/sse", mcptest.WithToken("acme-admin"), mcptest.WithElicitationHandler(a.accept))
		ctx := context.Background()
		if err := c.Connect(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Initialize(ctx); err != nil {
			t.Fatal(err)
		}
		resp, err := c.Post(ctx, []byte(call(args)), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || len(a.ran) != 0 || len(a.asked) != 0 {
			t.Fatalf("status %d, ran %q, asked %q", resp.StatusCode, a.ran, a.asked)
		}
	})
	t.Run("2025-03-26 batch member", func(t *testing.T) {
		a := &argsHost{}
		h := mcphandler.New(a.config())
		c := mcptest.New(t, h, mcptest.WithToken("acme-admin"), mcptest.WithProtocolVersion("2025-03-26"))
		if _, err := c.Initialize(context.Background()); err != nil {
			t.Fatal(err)
		}
		resp, err := c.Post(context.Background(), []byte("["+call(args)+"]"), nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), `"code":-32602`) || len(a.ran) != 0 {
			t.Fatalf("batch answer %s, ran %q", body, a.ran)
		}
	})
}

// The attacker puts a huge value first so that the fields after it fall
// off a message cut at a fixed length, or hides a reordering character
// in a value. The default confirm message shows every key, elides a long
// value inside itself with a visible marker, and shows invisible
// characters escaped; the tool runs with exactly the canonical arguments
// the message was rendered from. Arguments too large to show in full are
// not run at all.
func TestAttackConfirmMessageHidesNothing(t *testing.T) {
	ctx := context.Background()
	t.Run("later fields survive a huge first value", func(t *testing.T) {
		a := &argsHost{}
		c := connect(t, mcphandler.New(a.config()), "acme-admin", mcptest.WithElicitationHandler(a.accept))
		args := map[string]any{"a_note": strings.Repeat("A", 5000), "id": "customers-prod", "z_force": true}
		if res, err := c.CallTool(ctx, "delete_doc", args); err != nil || res.IsError {
			t.Fatalf("%+v %v", res, err)
		}
		msg := a.asked[0]
		for _, want := range []string{`"id":"customers-prod"`, `"z_force":true`, "characters elided"} {
			if !strings.Contains(msg, want) {
				t.Fatalf("message %q lacks %q", msg, want)
			}
		}
		want, _ := json.Marshal(args) // encoding/json sorts keys: the canonical form here
		if len(a.ran) != 1 || a.ran[0] != string(want) {
			t.Fatalf("ran with %.80q, want the canonical arguments", a.ran)
		}
	})
	t.Run("reordering characters are shown escaped", func(t *testing.T) {
		a := &argsHost{}
		c := connect(t, mcphandler.New(a.config()), "acme-admin", mcptest.WithElicitationHandler(a.accept))
		if _, err := c.CallTool(ctx, "delete_doc", map[string]any{"id": "txt.\u202eprod-customers"}); err != nil {
			t.Fatal(err)
		}
		if msg := a.asked[0]; !strings.Contains(msg, `\u202e`) || strings.ContainsRune(msg, '\u202e') {
			t.Fatalf("message %q", msg)
		}
	})
	t.Run("too large to show is not run", func(t *testing.T) {
		a := &argsHost{}
		c := connect(t, mcphandler.New(a.config()), "acme-admin", mcptest.WithElicitationHandler(a.accept))
		args := map[string]any{}
		for i := range 400 {
			args[fmt.Sprintf("key_%03d_%s", i, strings.Repeat("k", 20))] = i
		}
		res, err := c.CallTool(ctx, "delete_doc", args)
		if err != nil || !res.IsError || !strings.Contains(res.Text(), "too large") {
			t.Fatalf("%+v %v", res, err)
		}
		if len(a.ran) != 0 || len(a.asked) != 0 {
			t.Fatalf("ran %d, asked %d", len(a.ran), len(a.asked))
		}
	})
	t.Run("2026-07-28", func(t *testing.T) {
		a := &argsHost{}
		c := mcptest.NewModern(t, mcphandler.New(a.config()), mcptest.WithToken("acme-admin"), mcptest.WithElicitationHandler(a.accept))
		args := map[string]any{"a_note": strings.Repeat("A", 5000), "id": "customers-prod"}
		if res, err := c.CallTool(ctx, "delete_doc", args); err != nil || res.IsError {
			t.Fatalf("%+v %v", res, err)
		}
		if len(a.asked) != 1 || !strings.Contains(a.asked[0], `"id":"customers-prod"`) || len(a.ran) != 1 {
			t.Fatalf("asked %q, ran %d", a.asked, len(a.ran))
		}
	})
}
