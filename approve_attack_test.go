package mcphandler_test

// Attacks on approvals through the wire: an identity that asks for more
// approvals than anyone could look at, and something that can write Redis
// (without Config.StateKeys) rolling an approval back after its call ran.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/approval"
	"github.com/mcphandler/mcphandler/mcptest"
)

// TestAttackApprovalsPerIdentity: a caller whose client cannot open a URL
// (each call a tool result naming the page) asks for approvals of ever
// new arguments. Past the default bound, on every replica and era, the
// call is refused with -32000 saying how many are held and until when;
// another identity is not affected, and a decision frees a place.
func TestAttackApprovalsPerIdentity(t *testing.T) {
	const max = 20
	formOnly := mcptest.WithCapabilities(json.RawMessage(`{"elicitation":{}}`))
	for _, tc := range []struct {
		name string
		opts []mcptest.Option
	}{
		{"2025-06-18", []mcptest.Option{mcptest.WithProtocolVersion("2025-06-18")}},
		{"2026-07-28 form only", []mcptest.Option{mcptest.WithEra(mcptest.Stateless), formOnly}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rig := newApprovalRig(t, 2, 5*time.Second)
			ctx := context.Background()
			dial := func(token string) *mcptest.Client {
				c := dialProxy(t, rig, append(tc.opts, mcptest.WithToken(token))...)
				t.Cleanup(c.Close)
				if c.Era() != mcptest.Stateless {
					if _, err := c.Initialize(ctx); err != nil {
						t.Fatal(err)
					}
				}
				return c
			}
			alice := dial("acme-viewer")
			call := func(c *mcptest.Client, i int) (*mcptest.ToolResult, error) {
				return c.CallTool(ctx, "delete_thing", map[string]any{"id": fmt.Sprint(i)})
			}
			var first string
			for i := range max {
				res, err := call(alice, i)
				if err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
				if id := approvalIn(t, res); i == 0 {
					first = id
				}
			}
			for range 2 { // through both replicas
				_, err := call(alice, max)
				var re *mcptest.RPCError
				if !errors.As(err, &re) || re.Code != mcphandler.CodeRateLimited ||
					!strings.Contains(re.Message, fmt.Sprintf("%d pending approvals held, at most %d", max, max)) {
					t.Fatalf("one approval more: %v", err)
				}
			}
			if res, err := call(dial("acme-admin"), 0); err != nil {
				t.Fatalf("another identity: %v", err)
			} else {
				approvalIn(t, res)
			}
			if _, err := rig.stores[0].Decide(ctx, first, bobApproves, false); err != nil {
				t.Fatal(err)
			}
			if res, err := call(alice, max); err != nil {
				t.Fatalf("after a decision: %v", err)
			} else {
				approvalIn(t, res)
			}
			if n := rig.f.count("delete_thing"); n != 0 {
				t.Fatalf("ran %d times", n)
			}
		})
	}
}

// TestAttackApprovalsChurn: a 2025-11-25 client that declared URL mode
// declines to open every page it is sent, which withdraws the approval at
// once, and calls again with new arguments. A withdrawn approval still
// counts until it expires, so the caller cannot make more than the bound
// of approval records per lifetime by cancelling its own calls.
func TestAttackApprovalsChurn(t *testing.T) {
	const max = 20
	rig := newApprovalRig(t, 2, 5*time.Second)
	c := mcptest.Dial(rig.cl.proxy.URL, mcptest.WithToken("acme-viewer"), mcptest.WithCapabilities(urlCaps),
		mcptest.WithElicitationHandler(func(context.Context, mcptest.ElicitParams) (mcptest.ElicitResult, error) {
			return mcptest.ElicitResult{Action: "decline"}, nil
		}))
	defer c.Close()
	ctx := context.Background()
	if _, err := c.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range max {
		res, err := c.CallTool(ctx, "delete_thing", map[string]any{"id": fmt.Sprint(i)})
		if err != nil || !res.IsError || !strings.Contains(res.Text(), "withdrawn") {
			t.Fatalf("call %d: %+v %v", i, res, err)
		}
	}
	_, err := c.CallTool(ctx, "delete_thing", map[string]any{"id": fmt.Sprint(max)})
	var re *mcptest.RPCError
	if !errors.As(err, &re) || re.Code != mcphandler.CodeRateLimited {
		t.Fatalf("one approval more after %d withdrawn: %v", max, err)
	}
}

// TestAttackApprovalRolledBack: something that can write Redis copies an
// approval's record and index (DUMP) while it reads approved, and writes
// them back (RESTORE, without expiry) after the call ran, again and
// again. The same caller repeating the same call, through either replica,
// is asked again; the tool ran once.
func TestAttackApprovalRolledBack(t *testing.T) {
	rig := newApprovalRig(t, 2, 5*time.Second)
	ctx := context.Background()
	c := dialProxy(t, rig, mcptest.WithToken("acme-viewer"), mcptest.WithProtocolVersion("2025-06-18"))
	defer c.Close()
	if _, err := c.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	x := map[string]any{"id": "x"}
	call := func() *mcptest.ToolResult {
		t.Helper()
		res, err := c.CallTool(ctx, "delete_thing", x)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	id := approvalIn(t, call())
	if _, err := rig.stores[1].Decide(ctx, id, bobApproves, true); err != nil {
		t.Fatal(err)
	}
	rc := rig.cl.replicas[0].client
	idx, err := rc.Keys(ctx, rig.prefix+"{approval-for/*").Result()
	if err != nil || len(idx) != 1 {
		t.Fatalf("the index of the call: %v %v", idx, err)
	}
	dumps := map[string]string{}
	for _, k := range append(idx, rig.prefix+"{approval/"+id+"}:r") {
		if dumps[k], err = rc.Dump(ctx, k).Result(); err != nil {
			t.Fatal(err)
		}
	}
	if res := call(); res.IsError {
		t.Fatalf("the approved call: %+v", res)
	}
	time.Sleep(200 * time.Millisecond) // the other replica hears of the use
	for i := range 4 {
		for k, d := range dumps {
			if err := rc.RestoreReplace(ctx, k, 0, d).Err(); err != nil {
				t.Fatal(err)
			}
		}
		if res := call(); !res.IsError {
			t.Fatalf("repeat %d after the rollback ran: %+v", i, res)
		}
	}
	if n := rig.f.count("delete_thing"); n != 1 {
		t.Fatalf("ran %d times, want 1", n)
	}
	// One decision was made, on the page: one record says so, and the
	// calls told to repeat (the approval pending or gone) carry none.
	ran := 0
	for _, ev := range eventsUntilIdle(rig.f.events, 100*time.Millisecond) {
		switch a := ev.Audit; {
		case a != nil && a.By == "page" && a.Outcome == mcphandler.OutcomeConfirmed && a.ApprovalID == id:
			ran++
		case a != nil:
			t.Errorf("a %s call yielded the audit record %+v", ev.Outcome, *a)
		}
	}
	if ran != 1 {
		t.Fatalf("%d audit records of the approved run, want 1", ran)
	}
}

// TestApprovalCarriesToolHints: the approval of a call carries its tool's
// hints as the tool declares them, for the page to show; those of a tool
// of another server the host does not trust are not carried (the page
// then shows the MCP defaults), so that an upstream cannot present its
// call as harmless to the approver.
func TestApprovalCarriesToolHints(t *testing.T) {
	tools := func(f *fixture) []mcphandler.Tool {
		wipe := f.tool("wipe", "")
		wipe.Annotations = &mcphandler.ToolAnnotations{DestructiveHint: new(true), IdempotentHint: true, OpenWorldHint: new(false)}
		relayed := f.tool("relayed", "")
		relayed.Annotations = &mcphandler.ToolAnnotations{DestructiveHint: new(false), OpenWorldHint: new(false)}
		relayed.Origin = &mcphandler.ToolOrigin{Upstream: "up", Name: "relayed"}
		return []mcphandler.Tool{wipe, relayed}
	}
	var rig *approvalRig
	rig = newApprovalRig(t, 1, 5*time.Second, func(c *mcphandler.Config) {
		c.ListTools = func(context.Context) ([]mcphandler.Tool, error) { return tools(rig.f), nil }
		c.BeforeCall = func(context.Context, *mcphandler.ToolCall) (mcphandler.Decision, error) {
			return mcphandler.Approve("Run it?", approval.Policy{}), nil
		}
	})
	ctx := context.Background()
	c := dialProxy(t, rig, mcptest.WithProtocolVersion("2025-06-18"), mcptest.WithToken("acme-viewer"))
	t.Cleanup(c.Close)
	if _, err := c.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	hints := func(tool string) *approval.Annotations {
		t.Helper()
		res, err := c.CallTool(ctx, tool, map[string]any{"id": "1"})
		if err != nil {
			t.Fatal(err)
		}
		a, err := rig.stores[0].Get(ctx, approvalIn(t, res))
		if err != nil {
			t.Fatal(err)
		}
		return a.Annotations
	}
	if h := hints("wipe"); h == nil || h.Destructive == nil || !*h.Destructive || !h.Idempotent || h.OpenWorld == nil || *h.OpenWorld || h.ReadOnly {
		t.Fatalf("wipe's approval carries %+v", h)
	}
	if h := hints("relayed"); h != nil || !h.IsDestructive() || !h.IsOpenWorld() {
		t.Fatalf("an untrusted upstream's hints were carried: %+v", h)
	}
}

// TestAttackApprovalsPerTenant: the callers of one workspace together ask
// for approvals past the tenant's bound (each within their own). The call
// past it is refused with -32000 saying how many the tenant holds, on
// every replica; nothing runs; another workspace is not affected.
func TestAttackApprovalsPerTenant(t *testing.T) {
	const max = 2
	rig := newApprovalRigWith(t, 2, 5*time.Second, approvalPage, func(c *approval.Config) { c.MaxPendingPerTenant = max })
	ctx := context.Background()
	dial := func(token string) *mcptest.Client {
		c := dialProxy(t, rig, mcptest.WithProtocolVersion("2025-06-18"), mcptest.WithToken(token))
		t.Cleanup(c.Close)
		if _, err := c.Initialize(ctx); err != nil {
			t.Fatal(err)
		}
		return c
	}
	alice, bob := dial("acme-viewer"), dial("acme-admin")
	call := func(c *mcptest.Client, i int) (*mcptest.ToolResult, error) {
		return c.CallTool(ctx, "delete_thing", map[string]any{"id": fmt.Sprint(i)})
	}
	for i, c := range []*mcptest.Client{alice, bob} {
		res, err := call(c, i)
		if err != nil {
			t.Fatal(err)
		}
		approvalIn(t, res)
	}
	for _, c := range []*mcptest.Client{alice, bob} { // through both replicas
		_, err := call(c, 9)
		var re *mcptest.RPCError
		if !errors.As(err, &re) || re.Code != mcphandler.CodeRateLimited ||
			!strings.Contains(re.Message, fmt.Sprintf("%d pending approvals held by the callers of this tenant, at most %d", max, max)) {
			t.Fatalf("one approval more in the tenant: %v", err)
		}
	}
	if res, err := call(dial("globex-editor"), 0); err != nil {
		t.Fatalf("another tenant: %v", err)
	} else {
		approvalIn(t, res)
	}
	if n := rig.f.count("delete_thing"); n != 0 {
		t.Fatalf("ran %d times", n)
	}
}
