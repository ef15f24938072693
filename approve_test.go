package mcphandler_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/approval"
	"github.com/mcphandler/mcphandler/mcptest"
	"github.com/mcphandler/mcphandler/session"
)

func hasNote(c *mcptest.Client, method, contains string) bool {
	for _, n := range c.Notifications() {
		if n.Method == method && strings.Contains(string(n.Params), contains) {
			return true
		}
	}
	return false
}

// TestApproveURLModeRunsOnce: a 2025-11-25 client that declared URL mode
// is asked with a URL-mode elicitation/create naming the page and the
// approval's id; the call waits, the approval (made by another person of
// the tenant) runs it once, notifications/elicitation/complete precedes
// the result; the same call again asks again, and its decline runs
// nothing.
func TestApproveURLModeRunsOnce(t *testing.T) {
	rig := newApprovalRig(t, 2, 5*time.Second)
	var u urlElicitations
	approve := true
	c := mcptest.Dial(rig.cl.proxy.URL, mcptest.WithToken("acme-viewer"), mcptest.WithCapabilities(urlCaps),
		u.handler(func(p mcptest.ElicitParams) {
			if p.URL != approvalPage+p.ElicitationID || !approval.ValidID(p.ElicitationID) {
				t.Errorf("url %q, elicitationId %q", p.URL, p.ElicitationID)
			}
			decideLater(t, rig.stores[1], p.ElicitationID, approve)
		}))
	defer c.Close()
	ctx := context.Background()
	if _, err := c.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := c.CallTool(ctx, "delete_thing", map[string]any{"id": "x"})
	if err != nil || res.IsError || res.Text() != "delete_thing ran for acme" {
		t.Fatalf("approved call: %+v, %v", res, err)
	}
	if by := rig.f.approvedBy(); by != "acme/bob" {
		t.Fatalf("the run saw ApprovedBy %q, want the approver", by)
	}
	id := u.last.Load().(mcptest.ElicitParams).ElicitationID
	if !hasNote(c, "notifications/elicitation/complete", id) {
		t.Fatalf("no notifications/elicitation/complete for %s: %v", id, c.Notifications())
	}
	if a, err := rig.stores[0].Get(ctx, id); err != nil || a.State != approval.Used {
		t.Fatalf("approval after the run: %+v, %v", a, err)
	}
	approve = false
	res, err = c.CallTool(ctx, "delete_thing", map[string]any{"id": "x"})
	if err != nil || !res.IsError || !strings.Contains(res.Text(), "declined") {
		t.Fatalf("declined call: %+v, %v", res, err)
	}
	if again := u.last.Load().(mcptest.ElicitParams).ElicitationID; again == id || u.asked.Load() != 2 {
		t.Fatalf("the repeated call was not asked again: %s after %s, %d asked", again, id, u.asked.Load())
	}
	if n := rig.f.count("delete_thing"); n != 1 {
		t.Fatalf("ran %d times, want 1", n)
	}
}

// TestApproveExpires: nobody decides; at the approval's expiry the call
// ends without running, saying so.
func TestApproveExpires(t *testing.T) {
	rig := newApprovalRig(t, 1, 700*time.Millisecond)
	var u urlElicitations
	c := mcptest.Dial(rig.cl.proxy.URL, mcptest.WithToken("acme-viewer"), mcptest.WithCapabilities(urlCaps), u.handler(func(mcptest.ElicitParams) {}))
	defer c.Close()
	ctx := context.Background()
	if _, err := c.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := c.CallTool(ctx, "delete_thing", map[string]any{"id": "x"})
	if err != nil || !res.IsError || !strings.Contains(res.Text(), "expired") {
		t.Fatalf("expired call: %+v, %v", res, err)
	}
	if n := rig.f.count("delete_thing"); n != 0 || u.asked.Load() != 1 {
		t.Fatalf("ran %d times (asked %d)", n, u.asked.Load())
	}
}

// TestApproveClientRefusesToOpen: a client whose person declines to open
// the page withdraws the approval; nothing runs, and the page can no
// longer decide it.
func TestApproveClientRefusesToOpen(t *testing.T) {
	rig := newApprovalRig(t, 1, 5*time.Second)
	var id atomic.Value
	c := mcptest.Dial(rig.cl.proxy.URL, mcptest.WithToken("acme-viewer"), mcptest.WithCapabilities(urlCaps),
		mcptest.WithElicitationHandler(func(_ context.Context, p mcptest.ElicitParams) (mcptest.ElicitResult, error) {
			id.Store(p.ElicitationID)
			return mcptest.ElicitResult{Action: "decline"}, nil
		}))
	defer c.Close()
	ctx := context.Background()
	if _, err := c.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := c.CallTool(ctx, "delete_thing", map[string]any{"id": "x"})
	if err != nil || !res.IsError || !strings.Contains(res.Text(), "withdrawn") {
		t.Fatalf("refused call: %+v, %v", res, err)
	}
	if _, err := rig.stores[0].Decide(ctx, id.Load().(string), bobApproves, true); !errors.Is(err, approval.ErrWithdrawn) {
		t.Fatalf("deciding a withdrawn approval: %v", err)
	}
	if n := rig.f.count("delete_thing"); n != 0 {
		t.Fatalf("ran %d times", n)
	}
}

// TestApproveDecidedOnAnotherReplica: the call waits on replica A; the
// approval is decided through replica B's store (where B's page runs);
// A wakes and runs the call once.
func TestApproveDecidedOnAnotherReplica(t *testing.T) {
	rig := newApprovalRig(t, 2, 5*time.Second)
	var u urlElicitations
	c := mcptest.Dial(rig.cl.replicas[0].srv.URL, mcptest.WithToken("acme-viewer"), mcptest.WithCapabilities(urlCaps),
		u.handler(func(p mcptest.ElicitParams) { decideLater(t, rig.stores[1], p.ElicitationID, true) }))
	defer c.Close()
	ctx := context.Background()
	if _, err := c.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := c.CallTool(ctx, "delete_thing", map[string]any{"id": "x"})
	if err != nil || res.IsError || res.Text() != "delete_thing ran for acme" {
		t.Fatalf("call: %+v, %v", res, err)
	}
	if n := rig.f.count("delete_thing"); n != 1 {
		t.Fatalf("ran %d times, want 1", n)
	}
}

// TestApproveAskerDies: the replica the call waits on dies before the
// approval; the client resumes its stream on the other replica, which
// finds the approval decided, takes the call over and runs it once.
func TestApproveAskerDies(t *testing.T) {
	rig := newApprovalRig(t, 2, 3*time.Second)
	c := rig.dialAskerDies(t)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := c.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := c.CallTool(ctx, "delete_thing", map[string]any{"id": "x"})
	if err != nil || res.IsError || res.Text() != "delete_thing ran for acme" {
		t.Fatalf("after the asking replica died: %+v, %v", res, err)
	}
	if n := rig.f.count("delete_thing"); n != 1 {
		t.Fatalf("ran %d times, want 1", n)
	}
	if by := rig.f.approvedBy(); by != "acme/bob" {
		t.Fatalf("the run taken over saw ApprovedBy %q, want the approver", by)
	}
	waitOutcome(t, rig.f, mcphandler.OutcomeConfirmed)
}

// TestApproveWithoutURLMode: a client that cannot open a URL (no URL
// mode; 2024-11-05 HTTP+SSE; 2026-07-28 without URL mode) gets a tool
// result naming the page; the same call after the approval runs once; a
// further identical call asks again; the same call with other arguments
// is another call, and the approval does not run it.
func TestApproveWithoutURLMode(t *testing.T) {
	formOnly := mcptest.WithCapabilities(json.RawMessage(`{"elicitation":{}}`))
	for _, tc := range []struct {
		name string
		dial func(t *testing.T, rig *approvalRig, opts ...mcptest.Option) *mcptest.Client
		opts []mcptest.Option
	}{
		{"2025-11-25 form only", dialProxy, []mcptest.Option{formOnly}},
		{"2025-06-18", dialProxy, []mcptest.Option{mcptest.WithProtocolVersion("2025-06-18"), mcptest.WithCapabilities(urlCaps)}},
		{"2026-07-28 form only", dialProxy, []mcptest.Option{mcptest.WithEra(mcptest.Stateless), formOnly}},
		{"2024-11-05", func(t *testing.T, rig *approvalRig, opts ...mcptest.Option) *mcptest.Client {
			// The legacy stream is held by one replica; the other decides.
			return mcptest.NewLegacy(t, legacyMux(rig.cl.replicas[0].h), "/sse", opts...)
		}, []mcptest.Option{mcptest.WithCapabilities(urlCaps)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rig := newApprovalRig(t, 2, 5*time.Second)
			c := tc.dial(t, rig, append(tc.opts, mcptest.WithToken("acme-viewer"))...)
			defer c.Close()
			ctx := context.Background()
			if c.Era() != mcptest.Stateless {
				if _, err := c.Initialize(ctx); err != nil {
					t.Fatal(err)
				}
			}
			call := func(args map[string]any) *mcptest.ToolResult {
				t.Helper()
				res, err := c.CallTool(ctx, "delete_thing", args)
				if err != nil {
					t.Fatal(err)
				}
				return res
			}
			x := map[string]any{"id": "x"}
			id := approvalIn(t, call(x))
			if again := approvalIn(t, call(x)); again != id {
				t.Fatalf("a pending approval was not found again: %s, then %s", id, again)
			}
			if _, err := rig.stores[1].Decide(ctx, id, bobApproves, true); err != nil {
				t.Fatal(err)
			}
			if other := approvalIn(t, call(map[string]any{"id": "y"})); other == id {
				t.Fatal("other arguments got the approval of x")
			}
			if res := call(x); res.IsError || res.Text() != "delete_thing ran for acme" {
				t.Fatalf("the call after the approval: %+v", res)
			}
			if by := rig.f.approvedBy(); by != "acme/bob" {
				t.Fatalf("the repeated call saw ApprovedBy %q, want the approver", by)
			}
			if next := approvalIn(t, call(x)); next == id {
				t.Fatal("a used approval was given again")
			}
			if n := rig.f.count("delete_thing"); n != 1 {
				t.Fatalf("ran %d times, want 1", n)
			}
		})
	}
}

// TestApproveModern: a 2026-07-28 client that declared URL mode gets an
// input request carrying the URL elicitation; its retry waits for the
// decision and runs the tool once; the same retry again returns the
// recorded result, and nothing runs again.
func TestApproveModern(t *testing.T) {
	rig := newApprovalRig(t, 2, 5*time.Second)
	h := rig.cl.proxy.URL
	caps := `{"elicitation":{"url":{}}}`
	status, m := postModern(t, h, "acme-viewer", 1, `"name":"delete_thing","arguments":{"id":"x"}`, caps)
	res, _ := m["result"].(map[string]any)
	if status != 200 || res == nil || res["resultType"] != "input_required" {
		t.Fatalf("round 1: %d %v", status, m)
	}
	var key, state string
	state, _ = res["requestState"].(string)
	for k, v := range res["inputRequests"].(map[string]any) {
		key = k
		p := v.(map[string]any)["params"].(map[string]any)
		if v.(map[string]any)["method"] != "elicitation/create" || p["mode"] != "url" || !strings.HasPrefix(p["url"].(string), approvalPage) {
			t.Fatalf("input request: %v", v)
		}
		decideLater(t, rig.stores[1], strings.TrimPrefix(p["url"].(string), approvalPage), true)
	}
	retry := `"name":"delete_thing","arguments":{"id":"x"},"inputResponses":{"` + key + `":{"action":"accept"}},"requestState":"` + state + `"`
	for i := range 2 {
		_, m = postModern(t, h, "acme-viewer", 2+i, retry, caps)
		if resultText(m) != "delete_thing ran for acme" {
			t.Fatalf("retry %d: %v", i, m)
		}
	}
	if n := rig.f.count("delete_thing"); n != 1 {
		t.Fatalf("ran %d times, want 1", n)
	}
	if by := rig.f.approvedBy(); by != "acme/bob" {
		t.Fatalf("the round's run saw ApprovedBy %q, want the approver", by)
	}
}

// TestApproveModernClient: the same through the mcptest 2026-07-28
// client, which answers the input request and retries by itself.
func TestApproveModernClient(t *testing.T) {
	rig := newApprovalRig(t, 2, 5*time.Second)
	var asked atomic.Int64
	c := mcptest.Dial(rig.cl.proxy.URL, mcptest.WithEra(mcptest.Stateless), mcptest.WithToken("acme-viewer"),
		mcptest.WithCapabilities(json.RawMessage(`{"elicitation":{"url":{}}}`)),
		mcptest.WithElicitationHandler(func(_ context.Context, p mcptest.ElicitParams) (mcptest.ElicitResult, error) {
			asked.Add(1)
			if p.Mode != "url" || p.ElicitationID != "" || !strings.HasPrefix(p.URL, approvalPage) {
				t.Errorf("2026-07-28 URL elicitation: %s", p.Raw)
			}
			decideLater(t, rig.stores[1], strings.TrimPrefix(p.URL, approvalPage), true)
			return mcptest.ElicitResult{Action: "accept"}, nil
		}))
	defer c.Close()
	res, err := c.CallTool(context.Background(), "delete_thing", map[string]any{"id": "x"})
	if err != nil || res.IsError || res.Text() != "delete_thing ran for acme" {
		t.Fatalf("call: %+v, %v", res, err)
	}
	if n := rig.f.count("delete_thing"); n != 1 || asked.Load() != 1 {
		t.Fatalf("ran %d times, asked %d", n, asked.Load())
	}
}

// TestApproveModernDecline: on 2026-07-28 a declined approval runs
// nothing; the refusal is recorded, so a repeated retry gets it again; a
// client that declines to open the page withdraws the approval.
func TestApproveModernDecline(t *testing.T) {
	rig := newApprovalRig(t, 2, 5*time.Second)
	caps := `{"elicitation":{"url":{}}}`
	for _, tc := range []struct{ client, want string }{{"accept", "declined"}, {"decline", "withdrawn"}} {
		_, m := postModern(t, rig.cl.proxy.URL, "acme-viewer", 1, `"name":"delete_thing","arguments":{"id":"`+tc.client+`"}`, caps)
		res, _ := m["result"].(map[string]any)
		if res == nil || res["resultType"] != "input_required" {
			t.Fatalf("round 1: %v", m)
		}
		state, _ := res["requestState"].(string)
		for key, v := range res["inputRequests"].(map[string]any) {
			u := v.(map[string]any)["params"].(map[string]any)["url"].(string)
			if tc.client == "accept" {
				decideLater(t, rig.stores[1], strings.TrimPrefix(u, approvalPage), false)
			}
			retry := `"name":"delete_thing","arguments":{"id":"` + tc.client + `"},"inputResponses":{"` + key + `":{"action":"` + tc.client + `"}},"requestState":"` + state + `"`
			for i := range 2 {
				_, m = postModern(t, rig.cl.proxy.URL, "acme-viewer", 2+i, retry, caps)
				if !strings.Contains(resultText(m), tc.want) {
					t.Fatalf("%s, retry %d: %v", tc.client, i, m)
				}
			}
		}
	}
	if n := rig.f.count("delete_thing"); n != 0 {
		t.Fatalf("ran %d times", n)
	}
}

// TestApproveWithoutStore: an Approve without Config.Approvals does not
// run the tool.
func TestApproveWithoutStore(t *testing.T) {
	f := &fixture{}
	cfg := f.config()
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg.BeforeCall = func(context.Context, *mcphandler.ToolCall) (mcphandler.Decision, error) {
		return mcphandler.Approve("", approval.Policy{}), nil
	}
	c := connect(t, mcphandler.New(cfg), "acme-viewer", mcptest.WithCapabilities(urlCaps))
	res, err := c.CallTool(context.Background(), "delete_thing", map[string]any{"id": "x"})
	if err != nil || !res.IsError || f.count("delete_thing") != 0 {
		t.Fatalf("%+v, %v; ran %d", res, err, f.count("delete_thing"))
	}
}

// TestApproveKeepsTheStreamAlive: while a person decides, a call that
// carried a progressToken gets notifications/progress every KeepAlive
// (the stream stays alive past a client's idle timeout); the approval
// then runs the call.
func TestApproveKeepsTheStreamAlive(t *testing.T) {
	rig := newApprovalRig(t, 2, 5*time.Second, func(c *mcphandler.Config) { c.Sessions.KeepAlive = 50 * time.Millisecond })
	c := mcptest.Dial(rig.cl.proxy.URL, mcptest.WithToken("acme-viewer"), mcptest.WithCapabilities(urlCaps),
		mcptest.WithElicitationHandler(func(_ context.Context, p mcptest.ElicitParams) (mcptest.ElicitResult, error) {
			go func() {
				time.Sleep(400 * time.Millisecond)
				rig.stores[1].Decide(context.Background(), p.ElicitationID, bobApproves, true)
			}()
			return mcptest.ElicitResult{Action: "accept"}, nil
		}))
	defer c.Close()
	ctx := context.Background()
	if _, err := c.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	raw, err := c.Call(ctx, "tools/call", map[string]any{"name": "delete_thing", "arguments": map[string]any{"id": "x"}, "_meta": map[string]any{"progressToken": "p-1"}})
	if err != nil || !strings.Contains(string(raw), "delete_thing ran for acme") {
		t.Fatalf("call: %s, %v", raw, err)
	}
	n := 0
	for _, note := range c.Notifications() {
		if note.Method == "notifications/progress" && strings.Contains(string(note.Params), `"progressToken":"p-1"`) {
			n++
		}
	}
	if n < 3 {
		t.Fatalf("%d progress notifications while waiting, want at least 3: %v", n, c.Notifications())
	}
}

// TestApproveCancelWithdraws: a call cancelled while it waits withdraws
// its approval: the page can no longer approve it, and nothing runs.
func TestApproveCancelWithdraws(t *testing.T) {
	rig := newApprovalRig(t, 2, 5*time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var id atomic.Value
	c := mcptest.Dial(rig.cl.proxy.URL, mcptest.WithToken("acme-viewer"), mcptest.WithCapabilities(urlCaps),
		mcptest.WithElicitationHandler(func(_ context.Context, p mcptest.ElicitParams) (mcptest.ElicitResult, error) {
			id.Store(p.ElicitationID)
			time.AfterFunc(100*time.Millisecond, cancel)
			return mcptest.ElicitResult{Action: "accept"}, nil
		}))
	defer c.Close()
	if _, err := c.Initialize(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CallTool(ctx, "delete_thing", map[string]any{"id": "x"}); err == nil {
		t.Fatal("a cancelled call returned a result")
	}
	deadline := time.Now().Add(3 * time.Second)
	for {
		a, err := rig.stores[1].Get(context.Background(), id.Load().(string))
		if err == nil && a.State == approval.Withdrawn {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the cancel: %+v, %v", a, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := rig.stores[1].Decide(context.Background(), id.Load().(string), bobApproves, true); !errors.Is(err, approval.ErrWithdrawn) {
		t.Fatalf("deciding after the cancel: %v", err)
	}
	if n := rig.f.count("delete_thing"); n != 0 {
		t.Fatalf("ran %d times", n)
	}
}

// TestApproveTTLBeyondConfirmTimeout: approvals that would outlive the
// records of the calls waiting for them are refused at New.
func TestApproveTTLBeyondConfirmTimeout(t *testing.T) {
	as, err := approval.New(approval.Config{Store: session.NewMemory(), Keys: [][]byte{[]byte("0123456789abcdef0123456789abcdef")},
		URL: approvalPage, TTL: 3 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if v := recover(); v == nil || !strings.Contains(v.(string), "ConfirmTimeout") {
			t.Fatalf("New did not panic on a TTL past ConfirmTimeout: %v", v)
		}
	}()
	mcphandler.New(mcphandler.Config{Approvals: as, ConfirmTimeout: 2 * time.Minute})
}

// TestApproveCancelMeetsApproval: the person approves at the instant the
// client cancels the waiting call, swept from the approval well before
// the cancel to well after it, on Redis across two replicas. Whatever the
// order, the tool runs at most once; it ran only if its approval was
// used; an approval the cancel withdrew is never used afterwards.
func TestApproveCancelMeetsApproval(t *testing.T) {
	for _, lead := range []time.Duration{-40 * time.Millisecond, -5 * time.Millisecond, 0, 5 * time.Millisecond, 40 * time.Millisecond} {
		t.Run(lead.String(), func(t *testing.T) {
			rig := newApprovalRig(t, 2, 5*time.Second)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var id atomic.Value
			decided := make(chan error, 1)
			c := mcptest.Dial(rig.cl.proxy.URL, mcptest.WithToken("acme-viewer"), mcptest.WithCapabilities(urlCaps),
				mcptest.WithElicitationHandler(func(_ context.Context, p mcptest.ElicitParams) (mcptest.ElicitResult, error) {
					id.Store(p.ElicitationID)
					// The cancel at 100 ms; the approval lead earlier (or
					// later, when lead is negative).
					time.AfterFunc(100*time.Millisecond, cancel)
					time.AfterFunc(100*time.Millisecond-lead, func() {
						_, err := rig.stores[1].Decide(context.Background(), p.ElicitationID, bobApproves, true)
						decided <- err
					})
					return mcptest.ElicitResult{Action: "accept"}, nil
				}))
			defer c.Close()
			if _, err := c.Initialize(context.Background()); err != nil {
				t.Fatal(err)
			}
			c.CallTool(ctx, "delete_thing", map[string]any{"id": "x"})
			if err := <-decided; err != nil && !errors.Is(err, approval.ErrWithdrawn) {
				t.Fatalf("deciding: %v", err)
			}
			// Let the waiting replica finish whatever it decided.
			var a *approval.Approval
			for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				var err error
				a, err = rig.stores[0].Get(context.Background(), id.Load().(string))
				if err != nil {
					t.Fatal(err)
				}
				if a.State != approval.Pending || time.Now().After(deadline) {
					break
				}
			}
			time.Sleep(200 * time.Millisecond)
			a, _ = rig.stores[0].Get(context.Background(), id.Load().(string))
			n := rig.f.count("delete_thing")
			switch {
			case n > 1:
				t.Fatalf("ran %d times", n)
			case n == 1 && a.State != approval.Used:
				t.Fatalf("ran, and its approval is %s", a.State)
			case n == 0 && a.State == approval.Used:
				t.Fatal("the approval was used, and nothing ran")
			case a.State == approval.Pending:
				t.Fatal("the approval is still pending after the approval and the cancel")
			}
			t.Logf("lead %v: ran %d, approval %s", lead, n, a.State)
		})
	}
}

// TestApproveOpenedAfterDecision: the person decides on the page before
// the client's answer to the URL elicitation (its "I opened it") reaches
// the server — a browser is faster than a slow client, or the answer is
// delayed. That answer decides nothing; it is accepted (202) whenever it
// comes, on any replica, and the call runs once. (Refused as a stray
// response, it made a real client report an error for a call that ran.)
func TestApproveOpenedAfterDecision(t *testing.T) {
	rig := newApprovalRig(t, 2, 5*time.Second)
	for _, approve := range []bool{true, false} {
		var u urlElicitations
		c := mcptest.Dial(rig.cl.proxy.URL, mcptest.WithToken("acme-viewer"), mcptest.WithCapabilities(urlCaps),
			u.handler(func(p mcptest.ElicitParams) {
				ctx := context.Background()
				if _, err := rig.stores[1].Decide(ctx, p.ElicitationID, bobApproves, approve); err != nil {
					t.Errorf("decide: %v", err)
				}
				// The waiter learns the decision (and, approved, uses it)
				// before the answer arrives.
				for deadline := time.Now().Add(5 * time.Second); approve && time.Now().Before(deadline); {
					if a, err := rig.stores[0].Get(ctx, p.ElicitationID); err == nil && a.State == approval.Used {
						break
					}
					time.Sleep(10 * time.Millisecond)
				}
				time.Sleep(300 * time.Millisecond)
			}))
		ctx := context.Background()
		if _, err := c.Initialize(ctx); err != nil {
			t.Fatal(err)
		}
		res, err := c.CallTool(ctx, "delete_thing", map[string]any{"id": "late-" + strconv.FormatBool(approve)})
		if err != nil {
			t.Fatalf("approve %v: the call failed: %v", approve, err)
		}
		if approve != !res.IsError {
			t.Fatalf("approve %v: %+v", approve, res)
		}
		c.Close()
	}
	if n := rig.f.count("delete_thing"); n != 1 {
		t.Fatalf("ran %d times, want 1", n)
	}
}

// A call run under any decision but an approval a person gave says so:
// ToolCall.ApprovedBy is false for an allowed call and for a confirmed
// one, whose "yes" came from the client.
func TestApprovedByOnlyUnderApproval(t *testing.T) {
	rig := newApprovalRig(t, 1, 5*time.Second, func(cfg *mcphandler.Config) {
		before := cfg.BeforeCall
		cfg.BeforeCall = func(ctx context.Context, call *mcphandler.ToolCall) (mcphandler.Decision, error) {
			if call.Tool.Name == "admin_op" {
				return mcphandler.Confirm("Sure?"), nil
			}
			return before(ctx, call)
		}
	})
	c := mcptest.Dial(rig.cl.proxy.URL, mcptest.WithToken("acme-admin"), mcptest.WithCapabilities(urlCaps),
		mcptest.WithElicitationHandler(func(ctx context.Context, p mcptest.ElicitParams) (mcptest.ElicitResult, error) {
			return mcptest.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
		}))
	defer c.Close()
	ctx := context.Background()
	if _, err := c.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	for _, tool := range []string{"read", "admin_op"} {
		rig.f.approver.Store("")
		if res, err := c.CallTool(ctx, tool, nil); err != nil || res.IsError {
			t.Fatalf("%s: %+v %v", tool, res, err)
		}
		if by := rig.f.approvedBy(); by != "-" {
			t.Fatalf("%s saw ApprovedBy %q", tool, by)
		}
	}
}
