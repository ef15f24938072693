package mcphandler

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcphandler/mcphandler/internal/jsonrpc"
	"github.com/mcphandler/mcphandler/internal/task"
	"github.com/mcphandler/mcphandler/session"
)

// Tasks: the work of a tools/call that outlives its request, in the two
// revisions that have them, over the durable core of internal/task: the
// extension of 2026-07-28 (tasks_stateless.go, and notifications/tasks on
// listen streams in tasks_listen.go) and the tasks of 2025-11-25
// (tasks_sessions.go). What both share is here: a tool's TaskSupport,
// RunAsTask, the tasks that run, and the answer of a call that became one.

// TaskSupport says whether the calls of a tool may run as tasks.
type TaskSupport string

// The task supports of a tool.
const (
	// TaskNone: calls never become tasks (RunAsTask runs inline).
	TaskNone TaskSupport = ""
	// TaskOptional: a call becomes a task when the client declared the
	// extension, and runs synchronously otherwise.
	TaskOptional TaskSupport = "optional"
	// TaskRequired: a call runs only as a task; a client that did not
	// declare the extension gets -32021.
	TaskRequired TaskSupport = "required"
)

// tasks owns the tasks of both revisions that have them: the extension
// of 2026-07-28 (tasks/get, tasks/update and tasks/cancel in
// tasks_stateless.go, the notifications/tasks of listen streams in
// tasks_listen.go) and the tasks of 2025-11-25 (params.task,
// tasks_sessions.go). It holds the task Manager,
// whose records live in Config.Store signed with the Handler's keys, and
// the goroutines running this replica's tasks, which close stops and
// waits for. It depends on the Handler's Config (ListTools,
// MaxSubscriptions) and its logger, both fixed at New; it is safe for
// concurrent use.
//
// What only one revision has is named for the era that serves it (see
// era.go): a suffix Stateless for 2026-07-28 (getStateless), Sessions
// for 2025-11-25 (getSessions).
type tasks struct {
	cfg    *Config
	logger *slog.Logger
	m      *task.Manager
	wg     sync.WaitGroup

	mu     sync.Mutex // guards closed, and wg.Add against close's Wait
	closed bool
}

// newTasks makes the tasks of a Handler with cfg, whose records are
// signed with secrets.
func newTasks(cfg *Config, secrets [][]byte) *tasks {
	m, err := task.New(task.Config{
		Store: cfg.Store, Keys: secrets, TTL: cfg.Tasks.TTL, ResultRetention: cfg.Tasks.ResultRetention,
		MaxTasks: cfg.Tasks.MaxPerIdentity, MaxResultBytes: cfg.Tasks.MaxResultBytes, Logger: cfg.Logger,
	})
	if err != nil {
		panic("mcphandler: tasks: " + err.Error())
	}
	return &tasks{cfg: cfg, logger: cfg.Logger, m: m}
}

// close fails the tasks still running here and waits for their work.
func (t *tasks) close() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	t.m.Close()
	t.wg.Wait()
}

// start counts one more task goroutine, unless the tasks closed.
func (t *tasks) start() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.wg.Add(1)
	return true
}

// taskSlot is the task state of one tools/call that may become a task.
type taskSlot struct {
	owner    task.Owner
	created  *task.DetailedTask // set by RunAsTask once the task is stored
	err      error              // Create's error
	sessions bool               // a 2025-11-25 task (params.task), of the sessions era
	ttl      time.Duration      // the ttl the client asked for (2025-11-25)
}

// taskAsk routes the questions of a task's work into its inputRequests.
type taskAsk struct {
	run *task.Run
	n   atomic.Int64 // questions asked without a key, for keys
}

func ownerOf(id Identity) task.Owner { return task.Owner{Tenant: id.Tenant, Subject: id.Subject} }

// RunAsTask runs work, the part of the call that may outlive the request.
// When the call may become a task (the tool's TaskSupport is not TaskNone,
// and the 2026-07-28 request declared the tasks extension or the
// 2025-11-25 request carried params.task), it stores a new task of the
// caller, answers the tools/call with CreateTaskResult ({"task": Task} on
// 2025-11-25) once the task is in the store, and runs work in a goroutine of the
// Handler under the task's context: cancelled when the client cancels the
// task on any replica, at the task's TTL, or at [Handler.Close]. work's
// result completes the task (an error is an isError result, as for a
// synchronous call); a panic fails it. Questions work asks through its
// call's Exchange (Elicit, CreateMessage, ListRoots) put the task in
// input_required with inputRequests, answered by tasks/update (on
// 2025-11-25, sent to the client on the stream of its tasks/result, see
// tasks_sessions.go); progress and log messages are dropped. Otherwise RunAsTask runs work inline and returns what it
// returns.
//
// A call that BeforeCall sent through a confirm or an approval becomes a
// task the same way, once confirmed: on 2026-07-28 the confirm's record
// then holds the Task, so a retry of the answered round gets the same
// CreateTaskResult and runs nothing; a task that could not be stored
// leaves the confirm's decision standing for a retry of that round. On
// 2025-11-25 the confirm's record holds the request's params.task (its
// ttl and owner, signed with the rest of the record), so a replica that
// takes the confirm over from an asker that died creates the same one
// task and answers {"task": Task} on the call's stream.
//
// Tasks belong to the caller's tenant and subject: callers without an
// identity (the zero Identity) share theirs.
//
// Call it at most once, from the Handler, after any questions of the
// request's own rounds were answered (with questions pending it returns
// ErrInputRequired). When the task cannot be stored (the identity holds
// Config.Tasks.MaxPerIdentity tasks, the store fails) the call is answered
// with that error.
func (c *ToolCall) RunAsTask(ctx context.Context, work ToolHandler) (*ToolResult, error) {
	s := c.task
	if s == nil {
		return work(ctx, c)
	}
	if c.Exchange.inRounds() && len(c.Exchange.mr.pending) > 0 {
		return nil, ErrInputRequired
	}
	if s.created != nil || s.err != nil {
		return nil, errors.New("mcphandler: RunAsTask called twice in one call")
	}
	h := c.Exchange.h
	run, d, err := h.tasks.m.Create(ctx, s.owner, c.Tool.Name, s.ttl)
	if err != nil {
		s.err = err
		return nil, err
	}
	s.created = &d
	tc := *c
	tc.task, tc.up = nil, nil
	tc.Exchange = &Exchange{h: h, caps: c.caps, version: c.version, gone: run.Context().Done(), tk: &taskAsk{run: run}}
	if !h.tasks.start() {
		// Closed between Create and now: the task ends here, not running.
		run.Fail(context.WithoutCancel(ctx), rpcError(CodeInternalError, "the server shut down before the task started"))
		return nil, nil
	}
	go h.tasks.run(run, &tc, work)
	return nil, nil
}

// run runs a task's work to its end.
func (t *tasks) run(run *task.Run, call *ToolCall, work ToolHandler) {
	defer t.wg.Done()
	err := run.Do(func(ctx context.Context) (json.RawMessage, error) {
		res, err := work(ctx, call)
		if err != nil {
			class, detail := classify(err)
			if class == ClassInternal && ctx.Err() == nil {
				t.logger.Warn("mcphandler: task's tool failed", "tool", call.Tool.Name, "task", run.ID(), "err", err)
			}
			res = toolErrorResult(class, detail)
		}
		if res == nil {
			res = &ToolResult{}
		}
		return res.appendJSON(nil)
	})
	if err != nil && !errors.Is(err, task.ErrTerminal) {
		t.logger.Warn("mcphandler: ending a task", "task", run.ID(), "err", err)
	}
}

// askTask puts a question of a task's work into the task's inputRequests
// under key (or the next key of kind) and waits for the client's answer,
// given by tasks/update on any replica.
func (x *Exchange) askTask(ctx context.Context, key, kind, method string, params []byte) (json.RawMessage, error) {
	if key == "" {
		key = kind + "-" + strconv.FormatInt(x.tk.n.Add(1), 10)
	}
	req, err := json.Marshal(inputRequest{Method: method, Params: params})
	if err != nil {
		return nil, err
	}
	if err := x.tk.run.RequestInput(ctx, map[string]json.RawMessage{key: req}, "waiting for input from the client"); err != nil {
		return nil, err
	}
	got, err := x.tk.run.AwaitInput(ctx, key)
	if err != nil {
		return nil, err
	}
	return got[key], nil
}

// checkTask refuses, before anything runs, a call of a TaskRequired tool
// from a request that did not declare the extension, and returns the
// call's task slot (nil when it cannot become a task).
func (rq *request) checkTask(m *jsonrpc.Message, call *ToolCall, ev *CallEvent) (*taskSlot, bool) {
	ts := call.Tool.TaskSupport
	if ts == TaskNone {
		return nil, true
	}
	if rq.era != eraStateless {
		return rq.checkTaskSessions(m, call, ev)
	}
	if !rq.tasksDeclared() {
		if ts == TaskRequired {
			ev.Outcome = OutcomeError
			rq.fail(m.ID, errTasksNotDeclared("the tool "+strconv.Quote(call.Tool.Name)+" runs only as a task"))
			return nil, false
		}
		return nil, true
	}
	return &taskSlot{owner: ownerOf(rq.id)}, true
}

// answerTask answers a call whose Handler called RunAsTask as a task: its
// CreateTaskResult, or the error that kept the task from being stored. It
// reports whether it answered.
func (rq *request) answerTask(m *jsonrpc.Message, s *taskSlot) bool {
	switch {
	case s == nil:
		return false
	case s.err != nil:
		rq.taskFailed(m, s.err)
		return true
	case s.created == nil:
		return false
	case s.sessions:
		rq.replyJSON(m.ID, task.CreateTaskResult2025{Task: s.created.Task2025()})
		return true
	}
	b, err := json.Marshal(s.created.Task)
	if err != nil {
		rq.fail(m.ID, errInternal())
		return true
	}
	rq.sendCreateTask(m.ID, b)
	return true
}

// taskFailed answers a tasks method (or a call) whose task operation
// failed: 503 when the store is unavailable; otherwise the code of
// task.Code. An unknown task, and another identity's, are one message.
func (rq *request) taskFailed(m *jsonrpc.Message, err error) {
	code := task.Code(err)
	switch {
	case errors.Is(err, session.ErrUnavailable):
		rq.storeFailed(m, err)
	case errors.Is(err, task.ErrNotFound):
		rq.fail(m.ID, invalidParams("Invalid params: task not found"))
	case code == jsonrpc.CodeInternalError:
		rq.h.logger().Error("mcphandler: tasks", "method", m.Method, "err", err)
		rq.fail(m.ID, errInternal())
	default:
		rq.fail(m.ID, rpcError(Code(code), err.Error()))
	}
}

// trimTaskErr is the message of a task.ErrInvalidParams error, without
// the package's prefix.
func trimTaskErr(err error) string {
	msg := err.Error()
	const prefix = "task: invalid params: "
	if len(msg) > len(prefix) && msg[:len(prefix)] == prefix {
		return msg[len(prefix):]
	}
	return msg
}
