package mcphandler_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/mcptest"
	"github.com/mcphandler/mcphandler/session"
)

// The arguments the audit tests send, as the client encodes them, and
// their canonical form: what a confirmed or approved call runs with.
const (
	auditArgs      = `{"b":1.0,"a":"x"}`
	auditCanonical = `{"a":"x","b":1}`
)

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// auditHost serves delete_doc, which records the arguments it ran with,
// under the decisions of decide (n counts BeforeCall's calls: a message
// built from it differs on every call), and collects the events.
type auditHost struct {
	mu     sync.Mutex
	ran    [][]byte
	calls  atomic.Int64
	events chan mcphandler.CallEvent
	decide func(n int64, call *mcphandler.ToolCall) mcphandler.Decision
}

func (a *auditHost) config() mcphandler.Config {
	a.events = make(chan mcphandler.CallEvent, 100)
	return mcphandler.Config{
		Authenticate:   bearer,
		Roles:          []string{"viewer", "editor", "admin"},
		Logger:         slog.New(slog.DiscardHandler),
		ConfirmTimeout: 2 * time.Second,
		ListTools: func(context.Context) ([]mcphandler.Tool, error) {
			return []mcphandler.Tool{{Name: "delete_doc", Handler: a.run}}, nil
		},
		BeforeCall: func(_ context.Context, call *mcphandler.ToolCall) (mcphandler.Decision, error) {
			return a.decide(a.calls.Add(1), call), nil
		},
		OnCall: func(ev mcphandler.CallEvent) { a.events <- ev },
	}
}

func (a *auditHost) run(_ context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
	a.mu.Lock()
	a.ran = append(a.ran, bytes.Clone(call.Arguments))
	a.mu.Unlock()
	return mcphandler.TextResult("deleted"), nil
}

// ranWith returns the arguments of each run.
func (a *auditHost) ranWith() [][]byte {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.ran)
}

// eventsUntilIdle returns the events reported until none came for wait.
func eventsUntilIdle(ch <-chan mcphandler.CallEvent, wait time.Duration) []mcphandler.CallEvent {
	var out []mcphandler.CallEvent
	for {
		select {
		case ev := <-ch:
			out = append(out, ev)
		case <-time.After(wait):
			return out
		}
	}
}

// theAudit returns the one Audit record among events, failing unless
// exactly one event carries one.
func theAudit(t *testing.T, events []mcphandler.CallEvent) (*mcphandler.Audit, mcphandler.CallEvent) {
	t.Helper()
	var got []mcphandler.CallEvent
	for _, ev := range events {
		if ev.Audit != nil {
			got = append(got, ev)
		}
	}
	if len(got) != 1 {
		var outcomes []mcphandler.Outcome
		for _, ev := range events {
			outcomes = append(outcomes, ev.Outcome)
		}
		t.Fatalf("%d events carry an audit record, want 1 (outcomes %v)", len(got), outcomes)
	}
	return got[0].Audit, got[0]
}

// auditEras are the two ways a decision travels to a client: pushed on a
// 2025 session's stream, and input_required rounds of 2026-07-28.
var auditEras = []struct {
	name string
	opts []mcptest.Option
}{
	{"2025-11-25", nil},
	{"2026-07-28", []mcptest.Option{mcptest.WithEra(mcptest.Stateless)}},
}

// dialAudit returns a client of url in era opts for token, initialized
// where its era has an initialize.
func dialAudit(t *testing.T, url, token string, opts []mcptest.Option, more ...mcptest.Option) *mcptest.Client {
	t.Helper()
	c := mcptest.Dial(url, append(append([]mcptest.Option{mcptest.WithToken(token)}, opts...), more...)...)
	t.Cleanup(c.Close)
	if c.Era() != mcptest.Stateless {
		if _, err := c.Initialize(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// shown records what a client was asked, exactly as received.
type shown struct {
	mu    sync.Mutex
	asked []mcptest.ElicitParams
}

func (s *shown) answer(action string, content map[string]any) mcptest.Option {
	return mcptest.WithElicitationHandler(func(_ context.Context, p mcptest.ElicitParams) (mcptest.ElicitResult, error) {
		s.mu.Lock()
		s.asked = append(s.asked, p)
		s.mu.Unlock()
		return mcptest.ElicitResult{Action: action, Content: content}, nil
	})
}

func (s *shown) only(t *testing.T) mcptest.ElicitParams {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.asked) != 1 {
		t.Fatalf("the client was asked %d times, want once", len(s.asked))
	}
	return s.asked[0]
}

// checkTimes fails unless from ≤ asked ≤ decided ≤ to, to the millisecond.
func checkTimes(t *testing.T, a *mcphandler.Audit, from, to time.Time) {
	t.Helper()
	from, to = from.Truncate(time.Millisecond), to.Add(time.Millisecond)
	if a.Asked.Before(from) || a.Decided.Before(a.Asked) || a.Decided.After(to) || a.Asked.Location() != time.UTC {
		t.Errorf("asked %v, decided %v: not within [%v, %v] in order, UTC", a.Asked, a.Decided, from, to)
	}
}

// TestAuditConfirm: the audit record of a confirmed and of a declined
// call, on a 2025 session (the question pushed on the stream) and on
// 2026-07-28 (input_required rounds): the message and form exactly as
// the client received them — on 2026-07-28 as round 1 asked them, though
// BeforeCall words its message differently on the retry — the caller as
// asker and as the one who answered, the digest of the canonical
// arguments that ran, and only the event that ends the decision carries
// it.
func TestAuditConfirm(t *testing.T) {
	for _, era := range auditEras {
		for _, tc := range []struct {
			action  string
			outcome mcphandler.Outcome
		}{{"accept", mcphandler.OutcomeConfirmed}, {"decline", mcphandler.OutcomeDeclined}} {
			t.Run(era.name+"/"+tc.action, func(t *testing.T) {
				host := &auditHost{decide: func(n int64, call *mcphandler.ToolCall) mcphandler.Decision {
					return mcphandler.Confirm("Delete " + string(call.Arguments) + "? (asked " + strconv.FormatInt(n, 10) + ")")
				}}
				srv := newServer(t, mcphandler.New(host.config()))
				var s shown
				var content map[string]any
				if tc.action == "accept" {
					content = map[string]any{"confirm": true}
				}
				c := dialAudit(t, srv.URL, "acme-admin", era.opts, s.answer(tc.action, content))
				from := time.Now()
				res, err := c.CallTool(context.Background(), "delete_doc", json.RawMessage(auditArgs))
				if err != nil {
					t.Fatal(err)
				}
				to := time.Now()
				events := eventsUntilIdle(host.events, 200*time.Millisecond)
				a, ev := theAudit(t, events)
				p := s.only(t)
				ran := host.ranWith()
				if tc.action == "accept" {
					if res.IsError || len(ran) != 1 || string(ran[0]) != auditCanonical {
						t.Fatalf("confirmed call: %+v, ran with %q", res, ran)
					}
				} else if !res.IsError || len(ran) != 0 {
					t.Fatalf("declined call: %+v, ran %d times", res, len(ran))
				}
				if a.Message != p.Message || !bytes.Equal(a.Form, p.RequestedSchema) {
					t.Errorf("audited %q %s;\nthe client was shown %q %s", a.Message, a.Form, p.Message, p.RequestedSchema)
				}
				if !strings.HasSuffix(p.Message, "(asked 1)") {
					t.Errorf("the client was shown %q, not round 1's question", p.Message)
				}
				if tc.action == "accept" && a.ArgsDigest != digestOf(ran[0]) {
					t.Errorf("digest %s is not of the arguments that ran", a.ArgsDigest)
				}
				want := mcphandler.Audit{Decision: "confirm", Tool: "delete_doc", Tenant: "acme", Subject: "bob", Role: "admin",
					Message: a.Message, Form: a.Form, By: "client", DeciderTenant: "acme", DeciderSubject: "bob", DeciderRole: "admin",
					Asked: a.Asked, Decided: a.Decided, ArgsDigest: digestOf([]byte(auditCanonical)), Outcome: tc.outcome,
					ConfirmID: ev.ConfirmID, SessionID: c.SessionID()}
				if !reflect.DeepEqual(*a, want) {
					t.Errorf("audit\n%+v\nwant\n%+v", *a, want)
				}
				if ev.ConfirmID == "" || ev.Outcome != tc.outcome {
					t.Errorf("event: confirm %q, outcome %s", ev.ConfirmID, ev.Outcome)
				}
				checkTimes(t, a, from, to)
				if era.name == "2026-07-28" && (len(events) != 2 || events[0].Outcome != mcphandler.OutcomeInputRequired) {
					t.Errorf("events %v: want round 1 (no record), then the retry", events)
				}
			})
		}
	}
}

// TestAuditPolicy: a call BeforeCall allows or denies has a record by
// "policy" with the digest of the arguments exactly as the tool got them
// (or would have); a handler without BeforeCall decides nothing, and its
// events carry none.
func TestAuditPolicy(t *testing.T) {
	for _, era := range auditEras {
		for _, tc := range []struct {
			name    string
			d       *mcphandler.Decision // nil: no BeforeCall
			outcome mcphandler.Outcome
		}{
			{"allow", &mcphandler.Decision{}, mcphandler.OutcomeAllowed},
			{"deny", ptr(mcphandler.Deny("not today")), mcphandler.OutcomeDenied},
			{"none", nil, mcphandler.OutcomeAllowed},
		} {
			t.Run(era.name+"/"+tc.name, func(t *testing.T) {
				host := &auditHost{}
				cfg := host.config()
				if tc.d == nil {
					cfg.BeforeCall = nil
				} else {
					host.decide = func(int64, *mcphandler.ToolCall) mcphandler.Decision { return *tc.d }
				}
				srv := newServer(t, mcphandler.New(cfg))
				c := dialAudit(t, srv.URL, "acme-viewer", era.opts)
				from := time.Now()
				c.CallTool(context.Background(), "delete_doc", json.RawMessage(auditArgs))
				to := time.Now()
				events := eventsUntilIdle(host.events, 100*time.Millisecond)
				if len(events) != 1 || events[0].Outcome != tc.outcome {
					t.Fatalf("events %+v", events)
				}
				a := events[0].Audit
				if tc.d == nil {
					if a != nil {
						t.Fatalf("a call nothing decided has an audit record: %+v", *a)
					}
					return
				}
				if a == nil {
					t.Fatal("no audit record")
				}
				sent := auditArgs
				if ran := host.ranWith(); tc.name == "allow" {
					if len(ran) != 1 {
						t.Fatalf("ran %d times", len(ran))
					}
					sent = string(ran[0])
				}
				want := mcphandler.Audit{Decision: tc.name, Tool: "delete_doc", Tenant: "acme", Subject: "alice", Role: "viewer",
					By: "policy", Asked: a.Asked, Decided: a.Asked, ArgsDigest: digestOf([]byte(sent)), Outcome: tc.outcome,
					SessionID: c.SessionID()}
				if !reflect.DeepEqual(*a, want) {
					t.Errorf("audit\n%+v\nwant\n%+v", *a, want)
				}
				checkTimes(t, a, from, to)
			})
		}
	}
}

// TestAuditSchema pins the member names of an encoded Audit record, each
// always present: hosts write it as JSON lines and rely on them.
func TestAuditSchema(t *testing.T) {
	b, err := json.Marshal(mcphandler.Audit{})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	json.Unmarshal(b, &m)
	var names []string
	for k := range m {
		names = append(names, k)
	}
	slices.Sort(names)
	want := []string{"approvalId", "argsDigest", "arguments", "asked", "by", "confirmId", "decided", "deciderRole", "deciderSubject",
		"deciderTenant", "decision", "form", "message", "outcome", "role", "sessionId", "subject", "taskId", "tenant", "tool", "url"}
	if !slices.Equal(names, want) {
		t.Fatalf("members %v\nwant %v", names, want)
	}
}

// auditRig is an approval rig whose delete_thing records the arguments
// it ran with.
func auditRig(t *testing.T, ttl time.Duration) (*approvalRig, *auditHost) {
	host := &auditHost{}
	rig := newApprovalRig(t, 2, ttl, func(cfg *mcphandler.Config) {
		cfg.ListTools = func(context.Context) ([]mcphandler.Tool, error) {
			return []mcphandler.Tool{{Name: "delete_thing", Handler: host.run}}, nil
		}
	})
	return rig, host
}

// TestAuditApproval: the audit record of an approved, a declined and an
// expired approval, on a 2025-11-25 session (a URL elicitation pushed on
// the stream, the call waiting) and on 2026-07-28 (a round carrying the
// URL, its retry waiting), two replicas on Redis with every request
// round robin: the page's message, tool and canonical arguments as the
// approval store holds them, the URL exactly as the client received it,
// the approver from the page's decision (made through the approval Store
// as the page makes it), the digest of what ran.
func TestAuditApproval(t *testing.T) {
	for _, era := range auditEras {
		for _, tc := range []struct {
			name    string
			decide  *bool
			outcome mcphandler.Outcome
		}{
			{"approved", ptr(true), mcphandler.OutcomeConfirmed},
			{"declined", ptr(false), mcphandler.OutcomeDeclined},
			{"expired", nil, mcphandler.OutcomeTimedOut},
		} {
			t.Run(era.name+"/"+tc.name, func(t *testing.T) {
				ttl := 5 * time.Second
				if tc.decide == nil {
					ttl = 800 * time.Millisecond
				}
				rig, host := auditRig(t, ttl)
				var s shown
				handler := mcptest.WithElicitationHandler(func(_ context.Context, p mcptest.ElicitParams) (mcptest.ElicitResult, error) {
					s.mu.Lock()
					s.asked = append(s.asked, p)
					s.mu.Unlock()
					if tc.decide != nil {
						decideLater(t, rig.stores[1], strings.TrimPrefix(p.URL, approvalPage), *tc.decide)
					}
					return mcptest.ElicitResult{Action: "accept"}, nil
				})
				c := dialAudit(t, rig.cl.proxy.URL, "acme-viewer", era.opts, mcptest.WithCapabilities(urlCaps), handler)
				from := time.Now()
				res, err := c.CallTool(context.Background(), "delete_thing", json.RawMessage(auditArgs))
				if err != nil {
					t.Fatal(err)
				}
				to := time.Now()
				a, ev := theAudit(t, eventsUntilIdle(rig.f.events, 300*time.Millisecond))
				p := s.only(t)
				id := strings.TrimPrefix(p.URL, approvalPage)
				stored, err := rig.stores[0].Get(context.Background(), id)
				if err != nil {
					t.Fatal(err)
				}
				ran := host.ranWith()
				if (tc.outcome == mcphandler.OutcomeConfirmed) != (len(ran) == 1 && !res.IsError) || len(ran) > 1 {
					t.Fatalf("result %+v, ran %q", res, ran)
				}
				if len(ran) == 1 && a.ArgsDigest != digestOf(ran[0]) {
					t.Errorf("digest %s is not of the arguments that ran, %s", a.ArgsDigest, ran[0])
				}
				want := mcphandler.Audit{Decision: "approve", Tool: "delete_thing", Tenant: "acme", Subject: "alice", Role: "viewer",
					Message: "Delete it?", Arguments: json.RawMessage(auditCanonical), URL: p.URL,
					Asked: stored.Created.UTC(), Decided: stored.Decided.UTC(), ArgsDigest: digestOf([]byte(auditCanonical)),
					Outcome: tc.outcome, ConfirmID: a.ConfirmID, ApprovalID: id, SessionID: c.SessionID()}
				if tc.decide != nil {
					want.By, want.DeciderTenant, want.DeciderSubject, want.DeciderRole = "page", "acme", "bob", "admin"
				} else {
					want.Decided = stored.Expires.UTC()
				}
				if stored.Message != want.Message || string(stored.Arguments) != auditCanonical || p.URL != stored.URL {
					t.Fatalf("the store's approval: %+v; the client got %s", stored, p.URL)
				}
				if !reflect.DeepEqual(*a, want) {
					t.Errorf("audit\n%+v\nwant\n%+v", *a, want)
				}
				if a.ConfirmID == "" || ev.Outcome != tc.outcome {
					t.Errorf("confirm id %q, event outcome %s", a.ConfirmID, ev.Outcome)
				}
				checkTimes(t, a, from, to)
				if served := []int64{rig.cl.served[0].Load(), rig.cl.served[1].Load()}; served[0] == 0 || served[1] == 0 {
					t.Errorf("requests per replica %v: one replica did everything", served)
				}
			})
		}
	}
}

// TestAuditTakeOver: the record of a decision ended on another replica
// than the one that asked, two replicas (three for the confirm) on
// Redis: it holds what the asker showed, read from the confirm's or the
// approval's record in the store.
func TestAuditTakeOver(t *testing.T) {
	// The replica that pushed the confirm dies as the client answers;
	// the replica that gets the answer runs the call and reports it.
	t.Run("2025 confirm, asker dies", func(t *testing.T) {
		host := &auditHost{decide: func(n int64, call *mcphandler.ToolCall) mcphandler.Decision {
			return mcphandler.Confirm("Delete " + string(call.Arguments) + "? (asked " + strconv.FormatInt(n, 10) + ")")
		}}
		cl := newCluster(t, 3, host.config(), redisClient(t))
		var s shown
		killed := atomic.Int64{}
		killed.Store(-1)
		c := dialAudit(t, cl.proxy.URL, "acme-admin", nil, mcptest.WithElicitationHandler(
			func(_ context.Context, p mcptest.ElicitParams) (mcptest.ElicitResult, error) {
				s.mu.Lock()
				s.asked = append(s.asked, p)
				s.mu.Unlock()
				i := cl.lastCall.Load()
				cl.replicas[i].kill()
				killed.Store(i)
				return mcptest.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
			}))
		res, err := c.CallTool(context.Background(), "delete_doc", json.RawMessage(auditArgs))
		if err != nil || res.IsError || killed.Load() < 0 {
			t.Fatalf("%+v, %v (killed %d)", res, err, killed.Load())
		}
		a, _ := theAudit(t, eventsUntilIdle(host.events, 500*time.Millisecond))
		p, ran := s.only(t), host.ranWith()
		if len(ran) != 1 || a.ArgsDigest != digestOf(ran[0]) {
			t.Fatalf("ran with %q; audited digest %s", ran, a.ArgsDigest)
		}
		if a.Message != p.Message || !bytes.Equal(a.Form, p.RequestedSchema) || a.Role != "admin" {
			t.Errorf("audited %q %s (asker role %q); the client was shown %q %s", a.Message, a.Form, a.Role, p.Message, p.RequestedSchema)
		}
		if a.By != "client" || a.DeciderSubject != "bob" || a.Outcome != mcphandler.OutcomeConfirmed || a.SessionID != c.SessionID() {
			t.Errorf("audit %+v", *a)
		}
	})

	// The replica the approved call waits on dies; the replica serving
	// the resumed stream reads the decision and runs the call.
	t.Run("2025 approval, asker dies", func(t *testing.T) {
		rig, host := auditRig(t, 3*time.Second)
		var s shown
		c := dialAudit(t, rig.cl.proxy.URL, "acme-viewer", nil, mcptest.WithCapabilities(urlCaps), mcptest.WithElicitationHandler(
			func(_ context.Context, p mcptest.ElicitParams) (mcptest.ElicitResult, error) {
				s.mu.Lock()
				s.asked = append(s.asked, p)
				s.mu.Unlock()
				i := rig.cl.lastCall.Load()
				go func() {
					time.Sleep(100 * time.Millisecond)
					rig.cl.replicas[i].kill()
					time.Sleep(100 * time.Millisecond)
					if _, err := rig.stores[1-i].Decide(context.Background(), p.ElicitationID, bobApproves, true); err != nil {
						t.Errorf("decide: %v", err)
					}
				}()
				return mcptest.ElicitResult{Action: "accept"}, nil
			}))
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		res, err := c.CallTool(ctx, "delete_thing", json.RawMessage(auditArgs))
		if err != nil || res.IsError {
			t.Fatalf("%+v, %v", res, err)
		}
		a, _ := theAudit(t, eventsUntilIdle(rig.f.events, 500*time.Millisecond))
		p, ran := s.only(t), host.ranWith()
		if len(ran) != 1 || a.ArgsDigest != digestOf(ran[0]) || string(a.Arguments) != string(ran[0]) {
			t.Fatalf("ran with %q; audited %s, digest %s", ran, a.Arguments, a.ArgsDigest)
		}
		if a.URL != p.URL || a.ApprovalID != p.ElicitationID || a.Message != "Delete it?" || !strings.HasPrefix(a.ConfirmID, "mcphc-") {
			t.Errorf("audited %+v; the client got %s", *a, p.Raw)
		}
		if a.By != "page" || a.DeciderSubject != "bob" || a.Outcome != mcphandler.OutcomeConfirmed || a.Subject != "alice" {
			t.Errorf("audit %+v", *a)
		}
	})

	// Round 1 on one replica, the retry with the answer on the other.
	t.Run("2026-07-28 confirm, retry elsewhere", func(t *testing.T) {
		host := &auditHost{decide: func(n int64, call *mcphandler.ToolCall) mcphandler.Decision {
			return mcphandler.Confirm("Delete " + string(call.Arguments) + "? (asked " + strconv.FormatInt(n, 10) + ")")
		}}
		cl := newCluster(t, 2, host.config(), redisClient(t))
		var s shown
		c := dialAudit(t, cl.proxy.URL, "acme-admin", auditEras[1].opts, s.answer("accept", map[string]any{"confirm": true}))
		res, err := c.CallTool(context.Background(), "delete_doc", json.RawMessage(auditArgs))
		if err != nil || res.IsError {
			t.Fatalf("%+v, %v", res, err)
		}
		if cl.served[0].Load() != 1 || cl.served[1].Load() != 1 {
			t.Fatalf("requests per replica %d, %d: want round 1 on one, the retry on the other", cl.served[0].Load(), cl.served[1].Load())
		}
		a, _ := theAudit(t, eventsUntilIdle(host.events, 300*time.Millisecond))
		p, ran := s.only(t), host.ranWith()
		if len(ran) != 1 || a.ArgsDigest != digestOf(ran[0]) {
			t.Fatalf("ran with %q; audited digest %s", ran, a.ArgsDigest)
		}
		if a.Message != p.Message || !bytes.Equal(a.Form, p.RequestedSchema) || a.By != "client" || a.Outcome != mcphandler.OutcomeConfirmed {
			t.Errorf("audit %+v; the client was shown %q %s", *a, p.Message, p.RequestedSchema)
		}
	})
}

// TestAuditAttack: answers that must not decide — a replayed answer, an
// answer from another session or another identity, a requestState
// retried by someone else or again — and records tampered in the store
// never yield an audit record that claims a decision nobody made.
func TestAuditAttack(t *testing.T) {
	ctx := context.Background()
	confirm := func(int64, *mcphandler.ToolCall) mcphandler.Decision { return mcphandler.Confirm("Really delete?") }

	t.Run("2025 replayed answer", func(t *testing.T) {
		host := &auditHost{decide: confirm}
		c := connect(t, mcphandler.New(host.config()), "acme-admin", mcptest.WithElicitationHandler(answer("accept", map[string]any{"confirm": true})))
		if res, err := c.CallTool(ctx, "delete_doc", json.RawMessage(auditArgs)); err != nil || res.IsError {
			t.Fatalf("%+v, %v", res, err)
		}
		id := confirmID(t, c)
		for range 2 {
			if err := c.Respond(ctx, id, map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}); !isHTTP(err, 400) {
				t.Fatalf("a replayed answer: %v, want 400", err)
			}
		}
		events := eventsUntilIdle(host.events, 100*time.Millisecond)
		a, ev := theAudit(t, events)
		if ev.Outcome != mcphandler.OutcomeConfirmed || a.By != "client" || len(events) != 3 || len(host.ranWith()) != 1 {
			t.Fatalf("events %+v", events)
		}
	})

	t.Run("2025 answers from another session and identity", func(t *testing.T) {
		l := newLab(t, labOptions{replicas: 1, confirmTimeout: 600 * time.Millisecond, lease: 200 * time.Millisecond, poll: 50 * time.Millisecond, store: memoryStores()})
		cs := l.session("acme-admin")
		pc := startCall(t, cs[0], 1)
		for name, c := range map[string]*mcptest.Client{
			"another session of the caller": l.session("acme-admin")[0],
			"another user's session":        l.session("globex-editor")[0],
		} {
			if err := c.Respond(ctx, pc.id, accept); !isHTTP(err, 400) {
				t.Errorf("%s: %v, want 400", name, err)
			}
		}
		intruder := mcptest.Dial(l.reps[0].srv.URL, mcptest.WithToken("globex-editor"))
		defer intruder.Close()
		intruder.SetSessionID(cs[0].SessionID())
		intruder.SetProtocolVersion(cs[0].ProtocolVersion())
		if err := intruder.Respond(ctx, pc.id, accept); err == nil {
			t.Error("another user in the caller's session answered")
		}
		told := verdictOf(pc.await(cs, alwaysAlive, 3*time.Second))
		l.idle(3 * time.Second)
		checkConfirmInvariants(t, l, pc, 1, told, "foreign answers")
		noAnswerAudited(t, l, pc, "foreign answers")
	})

	// The confirm's record, its message rewritten: it no longer verifies,
	// so the caller's genuine answer is refused, and the record of the
	// decision is the asker's own: what it showed, and that nobody
	// answered.
	t.Run("2025 record rewritten", func(t *testing.T) {
		eachStore(t, func(t *testing.T, stores func(int) session.Store) {
			l := newLab(t, labOptions{replicas: 2, confirmTimeout: 800 * time.Millisecond, lease: 200 * time.Millisecond, poll: 50 * time.Millisecond, store: stores})
			cs := l.session("acme-admin")
			pc := startCall(t, cs[0], 1)
			st, key := l.reps[0].st.Store, "confirm/"+pc.confirmID()
			raw, err := st.Load(ctx, key)
			if err != nil || !bytes.Contains(raw, []byte("Really delete?")) {
				t.Fatalf("the record %q does not hold the message: %v", raw, err)
			}
			if !overwrite(st, key, bytes.Replace(raw, []byte("Really delete?"), []byte("Really keep it"), 1)) {
				t.Fatal("no record to overwrite")
			}
			if err := cs[1].Respond(ctx, pc.id, accept); !isHTTP(err, 400) {
				t.Errorf("an answer to a rewritten record: %v, want 400", err)
			}
			told := verdictOf(pc.await(cs, alwaysAlive, 3*time.Second))
			l.idle(3 * time.Second)
			checkConfirmInvariants(t, l, pc, 1, told, "rewritten record")
			noAnswerAudited(t, l, pc, "rewritten record")
		})
	})

	// 2026-07-28: another identity retries with the caller's
	// requestState and an accept before the caller does; the caller's
	// answer decides; the same retry again replays; a pending record
	// rewritten in the store decides nothing.
	t.Run("2026-07-28", func(t *testing.T) {
		host := &auditHost{decide: confirm}
		cfg := host.config()
		st := &faultStore{Store: session.NewMemory()}
		cfg.Store, cfg.StateKeys = st, testStateKeys
		srv := newServer(t, mcphandler.New(cfg))
		args := `{"id":"x"}`
		round1 := func() (string, string) {
			t.Helper()
			_, _, b := modernPost(t, srv, "acme-admin", modernBody(1, "tools/call", `"name":"delete_doc","arguments":`+args, `{"elicitation":{}}`), nil)
			var m map[string]any
			json.Unmarshal(b, &m)
			keys, state := inputRound(m)
			if len(keys) != 1 {
				t.Fatalf("round 1: %s", b)
			}
			return keys[0], state
		}
		retry := func(token, key, action, state string) []byte {
			t.Helper()
			_, _, b := modernPost(t, srv, token, modernBody(2, "tools/call", answerParams("delete_doc", args, key, action, state), `{"elicitation":{}}`), nil)
			return b
		}
		key, state := round1()
		for _, who := range []string{"globex-editor", "acme-viewer"} {
			retry(who, key, "accept", state)
		}
		if n := len(host.ranWith()); n != 0 {
			t.Fatalf("another identity's answer ran the call %d times", n)
		}
		for _, ev := range eventsUntilIdle(host.events, 100*time.Millisecond) {
			if ev.Audit != nil && ev.Outcome != mcphandler.OutcomeInputRequired {
				t.Errorf("an answer of %s/%s yielded an audit record: %+v", ev.Identity.Tenant, ev.Identity.Subject, *ev.Audit)
			} else if ev.Audit != nil {
				t.Errorf("round 1 carries an audit record: %+v", *ev.Audit)
			}
		}
		retry("acme-admin", key, "accept", state)
		retry("acme-admin", key, "accept", state) // replayed
		retry("acme-admin", key, "decline", state)
		events := eventsUntilIdle(host.events, 100*time.Millisecond)
		a, ev := theAudit(t, events)
		if ev.Outcome != mcphandler.OutcomeConfirmed || a.By != "client" || a.DeciderSubject != "bob" || len(events) != 3 || len(host.ranWith()) != 1 {
			t.Fatalf("events %+v, audit %+v", events, *a)
		}

		key, state = round1()
		nonces := st.keys("nonce/")
		raw, err := st.Store.Load(ctx, nonces[len(nonces)-1])
		if err != nil || !bytes.Contains(raw, []byte("Really delete?")) {
			t.Fatalf("the pending record %q does not hold the message: %v", raw, err)
		}
		if !overwrite(st.Store, nonces[len(nonces)-1], bytes.Replace(raw, []byte("Really delete?"), []byte("Really keep it"), 1)) {
			t.Fatal("no record to overwrite")
		}
		retry("acme-admin", key, "accept", state)
		for _, ev := range eventsUntilIdle(host.events, 100*time.Millisecond) {
			if ev.Audit != nil {
				t.Errorf("a rewritten record yielded an audit record: %s, %+v", ev.Outcome, *ev.Audit)
			}
		}
		if n := len(host.ranWith()); n != 1 {
			t.Fatalf("ran %d times, want 1", n)
		}
	})
}

// TestAuditTask: a confirmed call that became a task names it in its
// record, on 2026-07-28 (RunAsTask in the retry that answered) and on
// 2025-11-25 (params.task).
func TestAuditTask(t *testing.T) {
	ct := &confirmTasks{}
	cfg := ct.config()
	events := make(chan mcphandler.CallEvent, 16)
	cfg.OnCall = func(ev mcphandler.CallEvent) { events <- ev }
	h := mcphandler.New(cfg)
	t.Cleanup(func() { h.Close() })
	url := newServer(t, h).URL

	key, state, _ := taskRound(t, callURL(t, url, "acme-admin", "purge", `"arguments":{}`, capsTasks))
	modern := taskOf(t, callURL(t, url, "acme-admin", "purge", roundAnswer(`{}`, key, "accept", state), capsTasks))
	a, _ := theAudit(t, eventsUntilIdle(events, 100*time.Millisecond))
	if a.TaskID != modern || a.By != "client" || a.Outcome != mcphandler.OutcomeConfirmed {
		t.Fatalf("2026-07-28: task %s, audit %+v", modern, *a)
	}

	c := v1Client(t, h, "acme-admin", mcptest.WithElicitationHandler(answer("accept", map[string]any{"confirm": true})))
	created, err := callJSON(t, c, "tools/call", map[string]any{"name": "purge", "arguments": map[string]any{}, "task": map[string]any{"ttl": 60000}})
	task, _ := created["task"].(map[string]any)
	if err != nil || task == nil {
		t.Fatalf("2025-11-25 task: %v, %v", created, err)
	}
	a, _ = theAudit(t, eventsUntilIdle(events, 100*time.Millisecond))
	if a.TaskID != task["taskId"] || a.TaskID == modern || a.SessionID != c.SessionID() || a.Outcome != mcphandler.OutcomeConfirmed {
		t.Fatalf("2025-11-25: task %v, audit %+v", task["taskId"], *a)
	}
}
