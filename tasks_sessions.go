package mcphandler

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/mcphandler/mcphandler/internal/jsonrpc"
	"github.com/mcphandler/mcphandler/internal/task"
	"github.com/mcphandler/mcphandler/session"
)

// The experimental tasks of 2025-11-25, on the same durable core:
//
//   - initialize advertises capabilities.tasks (list, cancel,
//     requests.tools.call) to sessions of 2025-11-25, and tools/list gives
//     each tool with task support its execution.taskSupport.
//   - A tools/call with params.task ({"ttl": ms}) of a tool with task
//     support becomes a task when its Handler calls RunAsTask, answered
//     {"task": Task}; without params.task a TaskRequired tool is -32601.
//     params.task on a tool without support is ignored (served normally).
//     A call that BeforeCall sends through a confirm or an approval
//     becomes that task once confirmed, on whichever replica runs it: the
//     confirm's record carries the task request (see confirmTask).
//   - tasks/get, tasks/cancel, tasks/list and tasks/result act on the
//     caller's (tenant, subject) tasks only, whatever the session.
//   - The work of a 2025 task asks the client (Elicit and the others) as
//     on 2026-07-28: the task turns input_required with keyed requests.
//     Its request has no stream left to ask on, so, as the revision asks,
//     the client calls tasks/result on seeing input_required: that
//     request's stream carries each pending request to the client, with
//     _meta["io.modelcontextprotocol/related-task"], and the client's
//     answer (posted to any replica) is handed to the task, once per key.
//   - notifications/tasks/status is not sent (it is optional): clients poll.
//
// See https://modelcontextprotocol.io/specification/2025-11-25/basic/utilities/tasks.

// appendExecution adds execution.taskSupport to the tools/list entry of
// t just appended to dst, for 2025-11-25.
func appendExecution(rq *request, t *Tool, dst []byte) []byte {
	if rq.version != Version20251125 || t.TaskSupport == TaskNone {
		return dst
	}
	dst = append(dst[:len(dst)-1], `,"execution":{"taskSupport":`...)
	dst = jsonrpc.AppendString(dst, string(t.TaskSupport))
	return append(dst, "}}"...)
}

// taskParamSessions reads params.task of a 2025-11-25 tools/call: whether
// it is there, and its ttl (zero when absent; ms, bounded by
// Config.Tasks.TTL).
func taskParamSessions(params json.RawMessage) (bool, time.Duration, *jsonrpc.Error) {
	var p struct {
		Task *struct {
			TTL *float64 `json:"ttl"`
		} `json:"task"`
	}
	if json.Unmarshal(params, &p) != nil || p.Task == nil {
		return false, 0, nil
	}
	if p.Task.TTL == nil {
		return true, 0, nil
	}
	if *p.Task.TTL < 0 || *p.Task.TTL > float64(1<<53) {
		return false, 0, invalidParams("Invalid params: task.ttl must be a non-negative number of milliseconds")
	}
	return true, time.Duration(*p.Task.TTL) * time.Millisecond, nil
}

// checkTaskSessions is checkTask for a 2025-11-25 call.
func (rq *request) checkTaskSessions(m *jsonrpc.Message, call *ToolCall, ev *CallEvent) (*taskSlot, bool) {
	asked, ttl, e := taskParamSessions(m.Params)
	asked = asked && rq.version == Version20251125
	if e == nil && !asked && call.Tool.TaskSupport == TaskRequired {
		e = rpcError(CodeMethodNotFound, "Method not found: the tool "+strconv.Quote(call.Tool.Name)+" must be called as a task (params.task)")
	}
	if e != nil {
		ev.Outcome = OutcomeError
		rq.fail(m.ID, e)
		return nil, false
	}
	if !asked {
		return nil, true
	}
	return &taskSlot{owner: ownerOf(rq.id), sessions: true, ttl: ttl}, true
}

// taskRequestSessions checks the params of a 2025-11-25 tasks method (the
// dispatch table serves them to that revision only): they carry a taskId.
func (rq *request) taskRequestSessions(m *jsonrpc.Message) (string, bool) {
	id, err := task.ParseTaskID(m.Params)
	if err != nil {
		rq.fail(m.ID, invalidParams("Invalid params: "+trimTaskErr(err)))
		return "", false
	}
	return id, true
}

// replyJSON answers with v, a JSON object.
func (rq *request) replyJSON(id json.RawMessage, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		rq.fail(id, errInternal())
		return
	}
	rq.reply(id, b)
}

// getSessions serves tasks/get: the caller's task, as a Task2025.
func (t *tasks) getSessions(rq *request, m *jsonrpc.Message) {
	id, ok := rq.taskRequestSessions(m)
	if !ok {
		return
	}
	d, err := t.m.Get(rq.ctx, ownerOf(rq.id), id)
	if err != nil {
		rq.taskFailed(m, err)
		return
	}
	rq.replyJSON(m.ID, d.Task2025())
}

// cancelSessions answers the cancelled task; a task that already ended is
// -32602, as 2025-11-25 asks.
func (t *tasks) cancelSessions(rq *request, m *jsonrpc.Message) {
	id, ok := rq.taskRequestSessions(m)
	if !ok {
		return
	}
	d, err := t.m.Cancel(rq.ctx, ownerOf(rq.id), id)
	if errors.Is(err, task.ErrTerminal) {
		rq.fail(m.ID, invalidParams("Invalid params: the task already ended ("+string(d.Status)+")"))
		return
	}
	if err != nil {
		rq.taskFailed(m, err)
		return
	}
	rq.replyJSON(m.ID, d.Task2025())
}

// listSessions lists the caller's tasks, newest first, task.MaxListPage a
// page; the cursor is the last task id of the page before.
func (t *tasks) listSessions(rq *request, m *jsonrpc.Message) {
	var p struct {
		Cursor string `json:"cursor"`
	}
	if len(m.Params) > 0 && json.Unmarshal(m.Params, &p) != nil || len(p.Cursor) > task.MaxTaskIDLen {
		rq.fail(m.ID, invalidParams("Invalid params: cursor must be a string given by tasks/list"))
		return
	}
	ds, next, err := t.m.List(rq.ctx, ownerOf(rq.id), p.Cursor)
	if err != nil {
		rq.taskFailed(m, err)
		return
	}
	out := task.ListResult2025{Tasks: make([]task.Task2025, 0, len(ds)), NextCursor: next}
	for _, d := range ds {
		out.Tasks = append(out.Tasks, d.Task2025())
	}
	rq.replyJSON(m.ID, out)
}

// resultSessions waits for the caller's task to end and answers what the
// call would have: its result, with _meta[related-task]; the error of a
// failed task; -32603 for a cancelled one.
func (t *tasks) resultSessions(rq *request, m *jsonrpc.Message) {
	id, ok := rq.taskRequestSessions(m)
	if !ok {
		return
	}
	d, err := t.awaitResultSessions(rq, id)
	var ce *ClientError
	switch {
	case err != nil && rq.st.callerLost():
		// The request ended with its caller's failed re-check.
	case errors.As(err, &ce):
		rq.fail(m.ID, rpcError(CodeInternalError, "the client's answer to the task's request was an error: "+clipEcho(ce.Message)))
	case errors.Is(err, ErrCannotAsk):
		rq.fail(m.ID, rpcError(CodeInternalError, "the task needs input this session cannot be asked for: its client must accept text/event-stream and declare the capability"))
	case err != nil && rq.ctx.Err() != nil:
		rq.fail(m.ID, rpcError(CodeInternalError, "the wait for the task's result was cancelled"))
	case err != nil:
		rq.taskFailed(m, err)
	case d.Status == task.Failed && d.Error != nil:
		rq.fail(m.ID, d.Error)
	case d.Status != task.Completed:
		rq.fail(m.ID, rpcError(CodeInternalError, "the task ended "+string(d.Status)+" without a result"))
	default:
		rq.reply(m.ID, withRelatedTask(d.Result, id))
	}
}

// awaitResultSessions waits for the caller's task id to end. Meanwhile,
// each request the task's work asks the client is sent on rq's stream (in
// key order, each key once per tasks/result) and the answer handed to the
// task; an answer the task no longer waits for (another tasks/result gave
// it first) is dropped by the task. A client that answers with an error,
// or a stream that cannot ask, ends the wait with that error: the task
// stays input_required, and the next tasks/result asks again. A caller
// whose credentials fail a re-check ends the wait (see callerWatch); the
// task runs on, its owner's, for a tasks/result with valid ones.
func (t *tasks) awaitResultSessions(rq *request, id string) (task.DetailedTask, error) {
	ctx, release := rq.st.watchContext(rq.ctx)
	defer release()
	owner, x := ownerOf(rq.id), rq.newExchange(nil)
	asked := map[string]bool{}
	pending := func(d task.DetailedTask) bool {
		for k := range d.InputRequests {
			if !asked[k] {
				return d.Status == task.InputRequired
			}
		}
		return false
	}
	for {
		d, err := t.m.WaitUntil(ctx, owner, id, pending)
		if err != nil || d.Status.Terminal() {
			return d, err
		}
		if err := t.relayInputs(ctx, x, owner, id, d, asked); err != nil {
			return d, err
		}
	}
}

// relayCap is the capability a session needs to be sent in.
func relayCap(in inputRequest) session.Capabilities {
	switch in.Method {
	case "sampling/createMessage":
		return session.CapSampling
	case "roots/list":
		return session.CapRoots
	}
	var p struct {
		Mode string `json:"mode"`
	}
	if json.Unmarshal(in.Params, &p); p.Mode == "url" {
		return session.CapElicitationURL
	}
	return session.CapElicitationForm
}

// withRelatedTask returns result (a JSON object) with
// _meta["io.modelcontextprotocol/related-task"] = {"taskId": id}.
func withRelatedTask(result json.RawMessage, id string) []byte {
	var r map[string]json.RawMessage
	if json.Unmarshal(result, &r) != nil || r == nil {
		r = map[string]json.RawMessage{}
	}
	var meta map[string]json.RawMessage
	json.Unmarshal(r["_meta"], &meta)
	if meta == nil {
		meta = map[string]json.RawMessage{}
	}
	meta[task.MetaRelatedTask], _ = json.Marshal(map[string]string{"taskId": id})
	r["_meta"], _ = json.Marshal(meta)
	b, _ := json.Marshal(r)
	return b
}

// relayInputs asks the client the input requests of task id that d holds
// and asked does not, marking them asked, and stores each answer in the
// task.
func (t *tasks) relayInputs(ctx context.Context, x *Exchange, owner task.Owner, id string, d task.DetailedTask, asked map[string]bool) error {
	for _, k := range slices.Sorted(maps.Keys(d.InputRequests)) {
		if asked[k] {
			continue
		}
		asked[k] = true
		var in inputRequest
		if err := json.Unmarshal(d.InputRequests[k], &in); err != nil {
			return err
		}
		if !x.ClientCapabilities().Has(relayCap(in)) {
			return ErrCannotAsk
		}
		got, err := x.request(ctx, newRequestID(), in.Method, withRelatedTask(in.Params, id))
		if err != nil {
			return err
		}
		// A task that ended meanwhile is read by the next wait.
		if err := t.m.Update(ctx, owner, id, map[string]json.RawMessage{k: got}); err != nil && !errors.Is(err, task.ErrTerminal) {
			return err
		}
	}
	return nil
}
