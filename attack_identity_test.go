package mcphandler_test

// Attacks by one identity on what it can make the handler keep: records
// in the store (confirms of both eras), event logs of a session's POST
// streams, and requests that go on running after their client left. Each
// kind has a bound with a default; past it the identity gets a clear
// error (or, for what is only an optimisation, goes without it), and no
// other identity is affected. SPEC.md's table "What one identity can make
// the handler keep" lists every kind and names these tests.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/mcptest"
	"github.com/mcphandler/mcphandler/session"
)

// defaultMaxConfirms is the default of Config.MaxConfirmsPerIdentity.
const defaultMaxConfirms = 100

// tooManyConfirms reports whether err is the refusal of a confirm past
// the bound of its identity: -32000 saying how many are held.
func tooManyConfirms(code int, msg string, max int) bool {
	return code == int(mcphandler.CodeRateLimited) &&
		strings.Contains(msg, fmt.Sprintf("%d confirmations held, at most %d", max, max))
}

// TestAttackConfirmsPerIdentity: one identity asks for confirmation of
// call after call, through two replicas, and never answers (2026-07-28:
// each first round makes a nonce record, and the client never retries)
// or answers at once (2025: each call makes a confirm record, kept after
// its decision). Past the default bound, the next confirm is refused
// with -32000 saying how many are held, on every replica, before any
// record is written; another identity is not affected; the store holds
// no more confirm records of the identity than the bound.
//
// On main every one of them was asked, and kept for ConfirmTimeout plus a
// minute after its last change.
func TestAttackConfirmsPerIdentity(t *testing.T) {
	const max = defaultMaxConfirms
	records := func(l *lab, prefix string) int {
		n := 0
		for _, r := range l.reps {
			n += len(r.st.keys(prefix))
		}
		return n
	}
	t.Run("2026-07-28", func(t *testing.T) {
		eachStore(t, func(t *testing.T, stores func(int) session.Store) {
			l := newLab(t, labOptions{replicas: 2, store: stores})
			first := func(token string, i int) (int, map[string]any) {
				status, _, b := modernPost(t, l.reps[i%2].srv, token,
					modernBody(i, "tools/call", fmt.Sprintf(`"name":"delete_thing","arguments":{"i":%d}`, i), `{"elicitation":{}}`), nil)
				var m map[string]any
				if err := json.Unmarshal(b, &m); err != nil {
					t.Fatalf("call %d: %d %q", i, status, b)
				}
				return status, m
			}
			for i := range max {
				if _, m := first("acme-viewer", i); m["result"] == nil {
					t.Fatalf("first round %d: %v", i, m)
				} else if keys, _ := inputRound(m); len(keys) != 1 {
					t.Fatalf("first round %d is not a question: %v", i, m)
				}
			}
			for i := max; i < max+2; i++ { // through both replicas
				_, m := first("acme-viewer", i)
				e, _ := m["error"].(map[string]any)
				code, _ := e["code"].(float64)
				msg, _ := e["message"].(string)
				if !tooManyConfirms(int(code), msg, max) {
					t.Fatalf("one confirm more: %v", m)
				}
			}
			if _, m := first("acme-admin", 0); m["result"] == nil {
				t.Fatalf("another identity: %v", m)
			}
			if n := records(l, "nonce/"); n != max+1 {
				t.Fatalf("%d nonce records written, want %d", n, max+1)
			}
		})
	})
	t.Run("2025-11-25", func(t *testing.T) {
		eachStore(t, func(t *testing.T, stores func(int) session.Store) {
			l := newLab(t, labOptions{replicas: 2, store: stores})
			clients := func(token string) []*mcptest.Client {
				var cs []*mcptest.Client
				for _, r := range l.reps {
					c := mcptest.Dial(r.srv.URL, mcptest.WithToken(token), mcptest.WithAutoResume(false),
						mcptest.WithElicitationHandler(func(context.Context, mcptest.ElicitParams) (mcptest.ElicitResult, error) {
							return mcptest.ElicitResult{Action: "decline"}, nil
						}))
					t.Cleanup(c.Close)
					if len(cs) == 0 {
						if _, err := c.Initialize(context.Background()); err != nil {
							t.Fatal(err)
						}
					} else {
						c.SetSessionID(cs[0].SessionID())
						c.SetProtocolVersion(cs[0].ProtocolVersion())
					}
					cs = append(cs, c)
				}
				return cs
			}
			alice := clients("acme-viewer")
			call := func(cs []*mcptest.Client, i int) (*mcptest.ToolResult, error) {
				return cs[i%2].CallTool(context.Background(), "delete_thing", map[string]any{"i": i})
			}
			for i := range max {
				res, err := call(alice, i)
				if err != nil || !res.IsError || !strings.Contains(res.Text(), "declined") {
					t.Fatalf("call %d: %+v %v", i, res, err)
				}
			}
			for i := max; i < max+2; i++ {
				_, err := call(alice, i)
				var re *mcptest.RPCError
				if !errors.As(err, &re) || !tooManyConfirms(int(re.Code), re.Message, max) {
					t.Fatalf("one confirm more: %v", err)
				}
			}
			if res, err := call(clients("acme-admin"), 0); err != nil || !strings.Contains(res.Text(), "declined") {
				t.Fatalf("another identity: %+v %v", res, err)
			}
			if n := records(l, "confirm/"); n != max+1 {
				t.Fatalf("%d confirm records written, want %d", n, max+1)
			}
			if n := l.count(0); n != 0 {
				t.Fatalf("ran %d times", n)
			}
		})
	})
}

// modernRefusal returns the code and message of a 2026-07-28 answer's
// error (0 and "" for a result).
func modernRefusal(m map[string]any) (int, string) {
	e, _ := m["error"].(map[string]any)
	code, _ := e["code"].(float64)
	msg, _ := e["message"].(string)
	return int(code), msg
}

// TestAttackApprovalRoundsPerIdentity: the approvals of an identity are
// bounded (approval.Config.MaxPendingPerIdentity), but the same call
// repeated while its one approval is pending finds that approval, and
// each repetition made a record of its own: a 2026-07-28 first round a
// nonce, a 2025-11-25 URL-mode wait a confirm record. They count against
// the identity's confirms like any: past the bound the repetition is
// refused with -32000, and the store holds no more.
func TestAttackApprovalRoundsPerIdentity(t *testing.T) {
	const max = defaultMaxConfirms
	rig := newApprovalRig(t, 2, 5*time.Second, func(c *mcphandler.Config) { c.OnCall = nil })
	ctx := context.Background()
	nonces := func() int {
		keys, err := rig.cl.replicas[0].client.Keys(ctx, rig.prefix+"{nonce/*").Result()
		if err != nil {
			t.Fatal(err)
		}
		return len(keys)
	}
	caps := `{"elicitation":{"url":{}}}`
	for i := range max {
		status, m := postModern(t, rig.cl.proxy.URL, "acme-viewer", i, `"name":"delete_thing","arguments":{"id":"x"}`, caps)
		if keys, _ := inputRound(m); status != 200 || len(keys) != 1 {
			t.Fatalf("first round %d: %d %v", i, status, m)
		}
	}
	for i := max; i < max+2; i++ {
		_, m := postModern(t, rig.cl.proxy.URL, "acme-viewer", i, `"name":"delete_thing","arguments":{"id":"x"}`, caps)
		if code, msg := modernRefusal(m); !tooManyConfirms(code, msg, max) {
			t.Fatalf("one first round more: %v", m)
		}
	}
	if n := nonces(); n != max {
		t.Fatalf("%d nonce records, want %d", n, max)
	}
	if _, m := postModern(t, rig.cl.proxy.URL, "acme-admin", 0, `"name":"delete_thing","arguments":{"id":"x"}`, caps); m["result"] == nil {
		t.Fatalf("another identity: %v", m)
	}
	if n := rig.f.count("delete_thing"); n != 0 {
		t.Fatalf("ran %d times", n)
	}
}

// TestConfirmsPerIdentityCounted: with Config.MaxConfirmsPerIdentity 3, a
// fourth confirm is refused with retryAfterMs; answering one (the tool
// runs) frees no place, since its record stays; once the first stop
// counting (twice ConfirmTimeout plus the linger after their creation),
// confirms are asked again. The zero identity (no Authenticate) is one
// identity.
func TestConfirmsPerIdentityCounted(t *testing.T) {
	for _, anonymous := range []bool{false, true} {
		t.Run(fmt.Sprint("anonymous=", anonymous), func(t *testing.T) {
			var ran atomic.Int64
			cfg := mcphandler.Config{
				Authenticate:           bearer,
				MaxConfirmsPerIdentity: 3,
				ConfirmTimeout:         300 * time.Millisecond,
				Logger:                 slog.New(slog.DiscardHandler),
				ListTools: func(context.Context) ([]mcphandler.Tool, error) {
					return []mcphandler.Tool{{Name: "delete_thing", Handler: func(context.Context, *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
						ran.Add(1)
						return mcphandler.TextResult("deleted"), nil
					}}}, nil
				},
				BeforeCall: func(context.Context, *mcphandler.ToolCall) (mcphandler.Decision, error) {
					return mcphandler.Confirm("Really delete?"), nil
				},
			}
			token := "acme-viewer"
			if anonymous {
				cfg.Authenticate, token = nil, ""
			}
			h := mcphandler.New(cfg)
			mcphandler.SetConfirmLinger(h, 100*time.Millisecond)
			srv := httptest.NewServer(h)
			t.Cleanup(func() { srv.Close(); h.Close() })
			call := func(i int, responses map[string]any, state string) map[string]any {
				params := fmt.Sprintf(`"name":"delete_thing","arguments":{"i":%d}`, i)
				if responses != nil {
					b, _ := json.Marshal(responses)
					params += `,"inputResponses":` + string(b) + `,"requestState":"` + state + `"`
				}
				_, _, b := modernPost(t, srv, token, modernBody(i, "tools/call", params, `{"elicitation":{}}`), nil)
				var m map[string]any
				json.Unmarshal(b, &m)
				return m
			}
			start := time.Now()
			var states []string
			for i := range 3 {
				keys, state := inputRound(call(i, nil, ""))
				if len(keys) != 1 {
					t.Fatalf("first round %d", i)
				}
				states = append(states, state)
			}
			refused := func() time.Duration {
				m := call(3, nil, "")
				code, msg := modernRefusal(m)
				if !tooManyConfirms(code, msg, 3) {
					t.Fatalf("a fourth confirm: %v", m)
				}
				var data struct{ RetryAfterMs int64 }
				b, _ := json.Marshal(m["error"].(map[string]any)["data"])
				if json.Unmarshal(b, &data) != nil || data.RetryAfterMs <= 0 || data.RetryAfterMs > 700 {
					t.Fatalf("retryAfterMs of %s", b)
				}
				return time.Duration(data.RetryAfterMs) * time.Millisecond
			}
			refused()
			if m := call(0, map[string]any{"mcphandler/confirm": acceptConfirm}, states[0]); ran.Load() != 1 {
				t.Fatalf("the answered confirm: %v", m)
			}
			wait := refused()
			if time.Since(start) > 600*time.Millisecond {
				t.Skip("too slow to see the count before it ends")
			}
			time.Sleep(wait)
			if keys, _ := inputRound(call(4, nil, "")); len(keys) != 1 {
				t.Fatal("no confirm asked once the first stopped counting")
			}
		})
	}
}
