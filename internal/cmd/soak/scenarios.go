package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/mcphandler/mcphandler/approval"
	"github.com/mcphandler/mcphandler/mcptest"
)

// caller is one of the server's fixed demo identities (its bearer token),
// and a person of its tenant other than itself, who decides its approvals
// (the default policy: four eyes).
type caller struct {
	token    string
	approver approval.Identity
}

// callers are the identities of internal/cmd/soakserver, three tenants.
var callers = []caller{
	{"acme-viewer", approval.Identity{Tenant: "acme", Subject: "bob", Role: "admin"}},
	{"globex-editor", approval.Identity{Tenant: "globex", Subject: "dan", Role: "admin"}},
	{"initech-editor", approval.Identity{Tenant: "initech", Subject: "frank", Role: "admin"}},
	{"acme-admin", approval.Identity{Tenant: "acme", Subject: "alice", Role: "viewer"}},
	{"globex-admin", approval.Identity{Tenant: "globex", Subject: "carol", Role: "editor"}},
	{"initech-admin", approval.Identity{Tenant: "initech", Subject: "erin", Role: "editor"}},
}

// op is one operation of a kind: the n-th of its kind, started on replica
// home; what crosses replicas goes to other.
type op struct {
	n           int64
	home, other string // host:port
	who         caller
}

// even is true for half the operations of a kind, two in a row (one per
// direction): approved rather than left to expire, with rather than
// without notifications/cancelled.
func (o op) even() bool { return o.n%4 < 2 }

// expectedError is an error the soak means to cause: an approval left to
// expire, a client hanging up. Anything else is unexpected.
type expectedError struct{ why string }

func (e expectedError) Error() string { return e.why }

func expected(why string) error { return expectedError{why} }

// kind is one kind of operation, run weight times in each cycle of the
// schedule.
type kind struct {
	name   string
	weight int
	what   string
	run    func(d *driver, ctx context.Context, o op) error
}

// kinds is the mix.
var kinds = []kind{
	{"session-25", 2, "2025-11-25 session: initialize, tools/list, echo, DELETE on the other replica", (*driver).session},
	{"sse-24", 2, "2024-11-05 HTTP+SSE: stream on one replica, messages POSTed to the other", (*driver).legacy},
	{"call-26", 3, "2026-07-28 tools/call echo", (*driver).plain},
	{"confirm-25", 2, "2025-11-25 confirm asked on one replica, answered through the other", (*driver).confirm},
	{"confirm-26", 2, "2026-07-28 confirm: input_required on one replica, retried on the other", (*driver).confirmRounds},
	{"task-26", 1, "2026-07-28 task created on one replica, polled with tasks/get on the other", (*driver).task},
	{"task-25", 1, "2025-11-25 task created on one replica, tasks/result on the other", (*driver).taskSession},
	{"approval-25", 2, "2025-11-25 approval (URL elicitation), half approved in the store, half left to expire", (*driver).approval},
	{"approval-26", 1, "2026-07-28 approval round, retried on the other replica; half approved, half left to expire", (*driver).approvalRounds},
	{"stream-25", 1, "2025-11-25 GET stream opened, held, dropped", (*driver).stream},
	{"listen-26", 1, "2026-07-28 subscriptions/listen opened, held, dropped", (*driver).listen},
	{"hangup-25", 1, "2025-11-25 client hangs up mid-call (half after notifications/cancelled)", (*driver).hangup},
	{"hangup-26", 1, "2026-07-28 client hangs up mid-call", (*driver).hangupRounds},
}

// Client capabilities the operations declare.
const (
	capsForm  = `{"elicitation":{"form":{}}}`
	capsURL   = `{"elicitation":{"form":{},"url":{}}}`
	capsTasks = `{"extensions":{"io.modelcontextprotocol/tasks":{}}}`
)

func (d *driver) route(o op, toOther func(*http.Request, []byte) bool) *route {
	return &route{base: d.transport, home: o.home, other: o.other, toOther: toOther, sent: &d.sent}
}

// dial returns a 2025-11-25 client of o's home replica, routed by toOther.
func (d *driver) dial(o op, toOther func(*http.Request, []byte) bool, opts ...mcptest.Option) *mcptest.Client {
	opts = append([]mcptest.Option{mcptest.WithToken(o.who.token), mcptest.WithHTTPClient(d.route(o, toOther).client())}, opts...)
	return mcptest.Dial("http://"+o.home+"/mcp", opts...)
}

// dialModern returns a 2026-07-28 client of replica host.
func (d *driver) dialModern(o op, host string, opts ...mcptest.Option) *mcptest.Client {
	rt := &route{base: d.transport, home: host, sent: &d.sent}
	opts = append([]mcptest.Option{mcptest.WithEra(mcptest.Stateless), mcptest.WithToken(o.who.token), mcptest.WithHTTPClient(rt.client())}, opts...)
	return mcptest.Dial("http://"+host+"/mcp", opts...)
}

// open initializes c; end must then be called with the operation's
// error, which it returns, or the DELETE's when the operation succeeded.
func open(ctx context.Context, c *mcptest.Client) error {
	_, err := c.Initialize(ctx)
	if err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	return nil
}

// end deletes c's session (on whichever replica c's route sends DELETEs
// to) and closes c. The DELETE runs even when err says the operation
// failed, so that a failure does not leave its session behind.
func end(c *mcptest.Client, err error) error {
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if derr := c.Delete(ctx); derr != nil {
		var ee expectedError
		if err == nil || errors.As(err, &ee) {
			return fmt.Errorf("DELETE: %w", derr)
		}
	}
	return err
}

func wantText(res *mcptest.ToolResult, err error, want string) error {
	if err != nil {
		return err
	}
	if res.IsError || !strings.Contains(res.Text(), want) {
		return fmt.Errorf("result %s, want %q", res.Raw, want)
	}
	return nil
}

func (d *driver) session(ctx context.Context, o op) (err error) {
	c := d.dial(o, deletes)
	if err := open(ctx, c); err != nil {
		c.Close()
		return err
	}
	defer func() { err = end(c, err) }()
	tools, err := c.ListTools(ctx)
	if err != nil {
		return fmt.Errorf("tools/list: %w", err)
	}
	if len(tools) != 5 {
		return fmt.Errorf("tools/list: %d tools, want 5", len(tools))
	}
	text := fmt.Sprintf("session %d", o.n)
	res, err := c.CallTool(ctx, "echo", map[string]any{"text": text})
	return wantText(res, err, text)
}

func (d *driver) legacy(ctx context.Context, o op) error {
	rt := d.route(o, posts)
	c := mcptest.Dial("http://"+o.home+"/sse", mcptest.WithEra(mcptest.SSE), mcptest.WithToken(o.who.token), mcptest.WithHTTPClient(rt.client()))
	defer c.Close()
	if _, err := c.Initialize(ctx); err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	text := fmt.Sprintf("sse %d", o.n)
	res, err := c.CallTool(ctx, "echo", map[string]any{"text": text})
	if err := wantText(res, err, text); err != nil {
		return err
	}
	if errs := c.Errors(); len(errs) > 0 {
		return fmt.Errorf("stream: %v", errs[0])
	}
	return nil
}

func (d *driver) plain(ctx context.Context, o op) error {
	c := d.dialModern(o, o.home)
	defer c.Close()
	text := fmt.Sprintf("call %d", o.n)
	res, err := c.CallTool(ctx, "echo", map[string]any{"text": text})
	return wantText(res, err, text)
}

func (d *driver) confirm(ctx context.Context, o op) (err error) {
	c := d.dial(o, anyOf(answers, deletes), mcptest.WithElicitationHandler(
		func(context.Context, mcptest.ElicitParams) (mcptest.ElicitResult, error) {
			return mcptest.ElicitResult{Action: mcptest.ActionAccept, Content: map[string]any{"confirm": true}}, nil
		}))
	if err := open(ctx, c); err != nil {
		c.Close()
		return err
	}
	defer func() { err = end(c, err) }()
	id := fmt.Sprintf("d%d", o.n)
	res, err := c.CallTool(ctx, "delete_doc", map[string]any{"id": id})
	return wantText(res, err, "deleted "+id)
}

// round sends params on a, which must answer input_required, and returns
// it.
func round(ctx context.Context, a *mcptest.Client, params map[string]any) (*mcptest.InputRequiredResult, error) {
	m, _, err := a.CallOnce(ctx, "tools/call", params)
	if err != nil {
		return nil, err
	}
	if m.Error != nil {
		return nil, m.Error
	}
	return mcptest.ParseInputRequired(m.Result)
}

// retried sends the retry on b and returns the tool's result.
func retried(ctx context.Context, b *mcptest.Client, params map[string]any, answers map[string]any, ir *mcptest.InputRequiredResult) (*mcptest.ToolResult, error) {
	m, err := b.Retry(ctx, "tools/call", params, answers, ir.RequestState)
	if err != nil {
		return nil, err
	}
	if m.Error != nil {
		return nil, m.Error
	}
	if rt := mcptest.ResultType(m.Result); rt != "" && rt != "complete" {
		return nil, fmt.Errorf("retry answered %s", m.Result)
	}
	var res mcptest.ToolResult
	if err := json.Unmarshal(m.Result, &res); err != nil {
		return nil, err
	}
	res.Raw = m.Result
	return &res, nil
}

func (d *driver) confirmRounds(ctx context.Context, o op) error {
	caps := mcptest.WithCapabilities(json.RawMessage(capsForm))
	a, b := d.dialModern(o, o.home, caps), d.dialModern(o, o.other, caps)
	defer a.Close()
	defer b.Close()
	id := fmt.Sprintf("r%d", o.n)
	params := map[string]any{"name": "delete_doc", "arguments": map[string]any{"id": id}}
	ir, err := round(ctx, a, params)
	if err != nil {
		return fmt.Errorf("round 1: %w", err)
	}
	answers := map[string]any{}
	for key := range ir.InputRequests {
		answers[key] = map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}
	}
	res, err := retried(ctx, b, params, answers, ir)
	return wantText(res, err, "deleted "+id)
}

// taskStatus is what tasks/get and a CreateTaskResult say of a task.
type taskStatus struct {
	TaskID string `json:"taskId"`
	Status string `json:"status"`
}

func (d *driver) task(ctx context.Context, o op) error {
	caps := mcptest.WithCapabilities(json.RawMessage(capsTasks))
	a, b := d.dialModern(o, o.home, caps), d.dialModern(o, o.other, caps)
	defer a.Close()
	defer b.Close()
	// CallOnce: Call takes a CreateTaskResult for a round it cannot answer.
	m, _, err := a.CallOnce(ctx, "tools/call", map[string]any{"name": "build_report", "arguments": map[string]any{"ms": 200}})
	if err == nil && m.Error != nil {
		err = m.Error
	}
	if err != nil {
		return fmt.Errorf("tools/call: %w", err)
	}
	raw := m.Result
	var created taskStatus
	if json.Unmarshal(raw, &created) != nil || mcptest.ResultType(raw) != "task" || created.TaskID == "" {
		return fmt.Errorf("tools/call answered %s, want a task", raw)
	}
	for {
		raw, err := b.Call(ctx, "tasks/get", map[string]any{"taskId": created.TaskID})
		if err != nil {
			return fmt.Errorf("tasks/get: %w", err)
		}
		var st taskStatus
		json.Unmarshal(raw, &st)
		switch st.Status {
		case "completed":
			if !strings.Contains(string(raw), "report of") {
				return fmt.Errorf("tasks/get of a completed task: %s", raw)
			}
			return nil
		case "working":
		default:
			return fmt.Errorf("tasks/get: %s", raw)
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

func (d *driver) taskSession(ctx context.Context, o op) (err error) {
	c := d.dial(o, anyOf(taskRequests, deletes))
	if err := open(ctx, c); err != nil {
		c.Close()
		return err
	}
	defer func() { err = end(c, err) }()
	raw, err := c.Call(ctx, "tools/call", map[string]any{"name": "build_report", "arguments": map[string]any{"ms": 200}, "task": map[string]any{"ttl": 20000}})
	if err != nil {
		return fmt.Errorf("tools/call: %w", err)
	}
	var created struct{ Task taskStatus }
	if json.Unmarshal(raw, &created) != nil || created.Task.TaskID == "" {
		return fmt.Errorf("tools/call answered %s, want a task", raw)
	}
	raw, err = c.Call(ctx, "tasks/result", map[string]any{"taskId": created.Task.TaskID})
	if err != nil {
		return fmt.Errorf("tasks/result: %w", err)
	}
	if !strings.Contains(string(raw), "report of") {
		return fmt.Errorf("tasks/result: %s", raw)
	}
	return nil
}

// decider decides one approval in the store, as the page would, a moment
// after the client was sent its link; wait returns the decision's error.
type decider struct {
	wg  sync.WaitGroup
	err error
}

func (dc *decider) decide(d *driver, id string, who approval.Identity) {
	dc.wg.Go(func() {
		time.Sleep(50 * time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := d.approvals.Decide(ctx, id, who, true); err != nil {
			dc.err = fmt.Errorf("deciding approval %s: %w", id, err)
		}
	})
}

func (dc *decider) wait() error {
	dc.wg.Wait()
	return dc.err
}

// approvalOutcome judges the result of a call that asked an approval,
// approved or left to expire.
func approvalOutcome(res *mcptest.ToolResult, err error, approve bool, ref string) error {
	if err != nil {
		return err
	}
	if approve {
		return wantText(res, nil, "transferred "+ref)
	}
	if res.IsError && strings.Contains(res.Text(), "expired") {
		return expected("approval left to expire")
	}
	return fmt.Errorf("an approval left to expire answered %s", res.Raw)
}

func (d *driver) approval(ctx context.Context, o op) (err error) {
	var dc decider
	c := d.dial(o, anyOf(answers, deletes), mcptest.WithCapabilities(json.RawMessage(capsURL)), mcptest.WithElicitationHandler(
		func(_ context.Context, p mcptest.ElicitParams) (mcptest.ElicitResult, error) {
			if p.Mode != "url" || p.URL == "" {
				return mcptest.ElicitResult{Action: "decline"}, nil
			}
			if o.even() {
				dc.decide(d, path.Base(p.URL), o.who.approver)
			}
			return mcptest.ElicitResult{Action: mcptest.ActionAccept}, nil
		}))
	if err := open(ctx, c); err != nil {
		c.Close()
		return err
	}
	defer func() { err = end(c, err) }()
	ref := fmt.Sprintf("t%d", o.n)
	res, err := c.CallTool(ctx, "transfer", map[string]any{"ref": ref})
	if derr := dc.wait(); derr != nil {
		return derr
	}
	return approvalOutcome(res, err, o.even(), ref)
}

func (d *driver) approvalRounds(ctx context.Context, o op) error {
	caps := mcptest.WithCapabilities(json.RawMessage(capsURL))
	a, b := d.dialModern(o, o.home, caps), d.dialModern(o, o.other, caps)
	defer a.Close()
	defer b.Close()
	ref := fmt.Sprintf("u%d", o.n)
	params := map[string]any{"name": "transfer", "arguments": map[string]any{"ref": ref}}
	ir, err := round(ctx, a, params)
	if err != nil {
		return fmt.Errorf("round 1: %w", err)
	}
	var dc decider
	answers := map[string]any{}
	for key, req := range ir.InputRequests {
		var p mcptest.ElicitParams
		if json.Unmarshal(req.Params, &p) != nil || p.Mode != "url" || p.URL == "" {
			return fmt.Errorf("input request %s, want a URL elicitation", req.Params)
		}
		if o.even() {
			dc.decide(d, path.Base(p.URL), o.who.approver)
		}
		answers[key] = map[string]any{"action": "accept"}
	}
	res, err := retried(ctx, b, params, answers, ir)
	if derr := dc.wait(); derr != nil {
		return derr
	}
	return approvalOutcome(res, err, o.even(), ref)
}

// hold is how long a stream stays open: 0.5 to 2 s.
func hold(o op) time.Duration { return time.Duration(500+o.n%4*500) * time.Millisecond }

func (d *driver) stream(ctx context.Context, o op) (err error) {
	c := d.dial(o, deletes)
	if err := open(ctx, c); err != nil {
		c.Close()
		return err
	}
	defer func() { err = end(c, err) }()
	s, err := c.OpenStream(ctx)
	if err != nil {
		return fmt.Errorf("GET stream: %w", err)
	}
	defer s.Close()
	wait, cancel := context.WithTimeout(ctx, hold(o))
	defer cancel()
	for {
		if _, err := s.Next(wait); err != nil {
			if wait.Err() != nil && ctx.Err() == nil {
				return nil // held long enough; dropped by s.Close
			}
			return fmt.Errorf("GET stream ended: %w", err)
		}
	}
}

func (d *driver) listen(ctx context.Context, o op) error {
	c := d.dialModern(o, o.home)
	defer c.Close()
	s, err := c.Listen(ctx, map[string]any{"toolsListChanged": true})
	if err != nil {
		return fmt.Errorf("subscriptions/listen: %w", err)
	}
	defer s.Close()
	first, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ev, err := s.Next(first)
	if err != nil || !strings.Contains(ev.Data, "notifications/subscriptions/acknowledged") {
		return fmt.Errorf("subscriptions/listen's first event: %q, %v", ev.Data, err)
	}
	return sleep(ctx, hold(o))
}

// hangUp is how long a client waits for a slow call before it hangs up.
const hangUp = 300 * time.Millisecond

func (d *driver) hangup(ctx context.Context, o op) (err error) {
	c := d.dial(o, deletes, mcptest.WithCancelNotifications(o.even()))
	if err := open(ctx, c); err != nil {
		c.Close()
		return err
	}
	defer func() { err = end(c, err) }()
	return hangingUp(ctx, c)
}

func (d *driver) hangupRounds(ctx context.Context, o op) error {
	c := d.dialModern(o, o.home)
	defer c.Close()
	return hangingUp(ctx, c)
}

// hangingUp calls slow and hangs up before its result.
func hangingUp(ctx context.Context, c *mcptest.Client) error {
	call, cancel := context.WithTimeout(ctx, hangUp)
	defer cancel()
	res, err := c.CallTool(call, "slow", map[string]any{"ms": 3000})
	if err == nil {
		return fmt.Errorf("a call the client hung up on answered %s", res.Raw)
	}
	if call.Err() != nil && ctx.Err() == nil {
		return expected("client hung up")
	}
	return err
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
