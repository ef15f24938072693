package mcphandler

import (
	"encoding/json"
	"errors"

	"github.com/mcphandler/mcphandler/internal/jsonrpc"
	"github.com/mcphandler/mcphandler/internal/mcpheaders"
	"github.com/mcphandler/mcphandler/internal/task"
)

// Tasks, the extension io.modelcontextprotocol/tasks of 2026-07-28
// (SEP-2663), served from the durable core in internal/task:
//
//   - A tool declares [Tool.TaskSupport]. Its Handler calls
//     [ToolCall.RunAsTask] with the work that may outlive the request;
//     everything before that call (BeforeCall, its confirm or approval,
//     input_required rounds) is resolved synchronously, as the extension
//     asks, and the task is created on the final round.
//   - A call becomes a task only when its request declared the extension
//     in _meta's clientCapabilities.extensions; otherwise RunAsTask runs
//     the work inline, and a TaskRequired tool is refused with -32021
//     naming the extension in data.requiredCapabilities, before anything
//     runs.
//   - tasks/get, tasks/update and tasks/cancel are served by any replica
//     sharing the Store, for the caller's own tasks only: another
//     identity's task id answers byte for byte like an unknown one.
//
// See https://modelcontextprotocol.io/seps/2663-tasks-extension.

// tasksDeclared reports whether rq declared the tasks extension: only a
// 2026-07-28 request can, in its own _meta.
func (rq *request) tasksDeclared() bool {
	if rq.era != eraStateless || rq.meta == nil {
		return false
	}
	var c struct {
		Extensions map[string]json.RawMessage `json:"extensions"`
	}
	if json.Unmarshal(rq.meta.ClientCapabilities, &c) != nil {
		return false
	}
	v, ok := c.Extensions[task.ExtensionID]
	return ok && len(v) > 0 && v[0] == '{'
}

// errTasksNotDeclared is the -32021 of a request that needs the tasks
// extension and did not declare it.
func errTasksNotDeclared(why string) *jsonrpc.Error {
	return rpcErrorData(CodeMissingClientCapability, "Missing required client capability: "+why,
		json.RawMessage(`{"requiredCapabilities":{"extensions":{"`+task.ExtensionID+`":{}}}}`))
}

// sendCreateTask answers with the 2026-07-28 CreateTaskResult of task, a
// JSON-encoded Task.
func (rq *request) sendCreateTask(id json.RawMessage, task []byte) {
	out := append([]byte(`{"jsonrpc":"2.0","id":`), id...)
	out = append(out, `,"result":{"resultType":"task","_meta":{"`+metaServerInfo+`":`...)
	out = append(out, rq.h.caps.serverInfoJSON(rq)...)
	out = append(out, "},"...)
	out = append(out, task[1:]...)
	rq.st.finish(append(out, '}'))
}

// taskRequestStateless checks a tasks method: the extension declared (else
// -32021), its taskId, and the Mcp-Name header, which when present must
// name that taskId (else -32020). It answers and returns false when the
// request cannot go on.
func (rq *request) taskRequestStateless(m *jsonrpc.Message) (string, bool) {
	if !rq.tasksDeclared() {
		rq.fail(m.ID, errTasksNotDeclared(m.Method+" needs the "+task.ExtensionID+" extension"))
		return "", false
	}
	id, err := task.ParseTaskID(m.Params)
	if err != nil {
		rq.fail(m.ID, invalidParams("Invalid params: "+trimTaskErr(err)))
		return "", false
	}
	if len(rq.r.Header.Values(mcpheaders.HeaderName)) > 0 {
		if he := mcpheaders.CheckStandardHeaders(rq.r.Header, m.Method, id, true); he != nil {
			rq.fail(m.ID, headerMismatch(he.Message))
			return "", false
		}
	}
	return id, true
}

// getStateless serves tasks/get: the caller's task, as a DetailedTask.
func (t *tasks) getStateless(rq *request, m *jsonrpc.Message) {
	id, ok := rq.taskRequestStateless(m)
	if !ok {
		return
	}
	d, err := t.m.Get(rq.ctx, ownerOf(rq.id), id)
	if err != nil {
		rq.taskFailed(m, err)
		return
	}
	b, err := json.Marshal(d)
	if err != nil {
		rq.fail(m.ID, errInternal())
		return
	}
	rq.reply(m.ID, b)
}

// updateStateless serves tasks/update: the answers to pending input
// requests of the caller's task; answers under keys not pending are
// ignored. It acks with an empty result.
func (t *tasks) updateStateless(rq *request, m *jsonrpc.Message) {
	if _, ok := rq.taskRequestStateless(m); !ok {
		return
	}
	id, responses, err := task.ParseUpdate(m.Params)
	if err != nil {
		rq.fail(m.ID, invalidParams("Invalid params: "+trimTaskErr(err)))
		return
	}
	if err := t.m.Update(rq.ctx, ownerOf(rq.id), id, responses); err != nil {
		rq.taskFailed(m, err)
		return
	}
	rq.reply(m.ID, emptyResult)
}

// cancelStateless serves tasks/cancel: the caller's task is cancelled, and
// its work, on whichever replica runs it, is asked to stop. Cancelling a
// task that already ended is acked too.
func (t *tasks) cancelStateless(rq *request, m *jsonrpc.Message) {
	id, ok := rq.taskRequestStateless(m)
	if !ok {
		return
	}
	if _, err := t.m.Cancel(rq.ctx, ownerOf(rq.id), id); err != nil && !errors.Is(err, task.ErrTerminal) {
		rq.taskFailed(m, err)
		return
	}
	rq.reply(m.ID, emptyResult)
}
