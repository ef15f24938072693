package mcphandler

import (
	"maps"

	"github.com/mcphandler/mcphandler/internal/jsonrpc"
	"github.com/mcphandler/mcphandler/internal/task"
)

// This file is the method tables: which JSON-RPC methods each era serves,
// with what, needing which hooks, and the per-method facts the 2026-07-28
// checks and results read. An era's table is what era.methods returns
// (serveRequest in dispatch.go looks a method up in it); the handlers
// live with their owners (catalog, tasks, sessions, streams, …).

// method is one entry of a dispatch table: the handler of a JSON-RPC
// method and the hook it needs.
type method struct {
	serve func(h *Handler, rq *request, m *jsonrpc.Message)
	// needs reports whether the hooks the method needs are set; if not,
	// the method is not found. Nil: always served.
	needs func(h *Handler) bool
	// revision, if set, is the only protocol revision that has the method
	// (the tasks methods of 2025-11-25 in the sessions table): in another
	// one it is not found.
	revision string
	// cancellable methods run, in a session, under a context that a
	// client disconnect does not cancel: the work goes on until it ends or
	// the client sends notifications/cancelled.
	cancellable bool
}

func hasTools(h *Handler) bool   { return h.cfg.ListTools != nil }
func hasPrompts(h *Handler) bool { return h.cfg.ListPrompts != nil }
func hasComplete(h *Handler) bool {
	return h.cfg.Complete != nil
}
func hasResources(h *Handler) bool { return h.catalog.hasResources() }
func hasSkills(h *Handler) bool    { return h.catalog.hasSkills() }

// sharedMethods is the dispatch table of every era: the methods of the
// 2025 revisions (and 2024-11-05). An era's table adds to it (see
// era.methods).
var sharedMethods = map[string]method{
	"ping":             {serve: func(_ *Handler, rq *request, m *jsonrpc.Message) { rq.reply(m.ID, emptyResult) }},
	"logging/setLevel": {serve: func(h *Handler, rq *request, m *jsonrpc.Message) { h.sessions.setLevel(rq, m) }},
	"tools/list": {needs: hasTools,
		serve: func(h *Handler, rq *request, m *jsonrpc.Message) { h.catalog.listTools(rq, m) }},
	"tools/call": {serve: serveToolsCall, needs: hasTools, cancellable: true},
	"skills/list": {needs: hasSkills,
		serve: func(h *Handler, rq *request, m *jsonrpc.Message) { h.catalog.listSkills(rq, m) }},
	"skills/get": {needs: hasSkills,
		serve: func(h *Handler, rq *request, m *jsonrpc.Message) { h.catalog.getSkill(rq, m) }},
	"resources/directory/read": {needs: hasSkills,
		serve: func(h *Handler, rq *request, m *jsonrpc.Message) { h.catalog.readDirectory(rq, m) }},
	"resources/list": {needs: hasResources,
		serve: func(h *Handler, rq *request, m *jsonrpc.Message) { h.catalog.listResources(rq, m) }},
	"resources/templates/list": {needs: hasResources,
		serve: func(h *Handler, rq *request, m *jsonrpc.Message) { h.catalog.listTemplates(rq, m) }},
	"resources/read": {needs: hasResources, cancellable: true,
		serve: func(h *Handler, rq *request, m *jsonrpc.Message) { h.catalog.readResource(rq, m) }},
	"resources/subscribe": {needs: hasResources,
		serve: func(h *Handler, rq *request, m *jsonrpc.Message) { h.catalog.subscribe(rq, m, true) }},
	"resources/unsubscribe": {needs: hasResources,
		serve: func(h *Handler, rq *request, m *jsonrpc.Message) { h.catalog.subscribe(rq, m, false) }},
	"prompts/list": {needs: hasPrompts,
		serve: func(h *Handler, rq *request, m *jsonrpc.Message) { h.catalog.listPrompts(rq, m) }},
	"prompts/get": {needs: hasPrompts, cancellable: true,
		serve: func(h *Handler, rq *request, m *jsonrpc.Message) { h.catalog.getPrompt(rq, m) }},
	"completion/complete": {needs: hasComplete, cancellable: true,
		serve: func(h *Handler, rq *request, m *jsonrpc.Message) { h.catalog.complete(rq, m) }},
}

// sessionsMethods is the dispatch table of the 2025 revisions.
var sessionsMethods = withMethods(sharedMethods, taskMethodsSessions)

// taskMethodsSessions are the tasks methods of 2025-11-25.
var taskMethodsSessions = map[string]method{
	task.MethodGet:    {serve: func(h *Handler, rq *request, m *jsonrpc.Message) { h.tasks.getSessions(rq, m) }, needs: hasTools, revision: Version20251125},
	task.MethodCancel: {serve: func(h *Handler, rq *request, m *jsonrpc.Message) { h.tasks.cancelSessions(rq, m) }, needs: hasTools, revision: Version20251125},
	task.MethodList:   {serve: func(h *Handler, rq *request, m *jsonrpc.Message) { h.tasks.listSessions(rq, m) }, needs: hasTools, revision: Version20251125},
	task.MethodResult: {serve: func(h *Handler, rq *request, m *jsonrpc.Message) { h.tasks.resultSessions(rq, m) }, needs: hasTools, revision: Version20251125, cancellable: true},
}

// statelessMethods adds the methods of 2026-07-28 to the shared table
// (its removed methods are refused before dispatch, see serveStateless).
var statelessMethods = withMethods(withMethods(sharedMethods, map[string]method{
	"server/discover":      {serve: func(h *Handler, rq *request, m *jsonrpc.Message) { h.caps.discover(rq, m) }},
	"subscriptions/listen": {serve: func(h *Handler, rq *request, m *jsonrpc.Message) { h.streams.listen(rq, m) }},
}), taskMethodsStateless)

// taskMethodsStateless are the tasks methods of 2026-07-28.
var taskMethodsStateless = map[string]method{
	task.MethodGet:    {serve: func(h *Handler, rq *request, m *jsonrpc.Message) { h.tasks.getStateless(rq, m) }, needs: hasTools},
	task.MethodUpdate: {serve: func(h *Handler, rq *request, m *jsonrpc.Message) { h.tasks.updateStateless(rq, m) }, needs: hasTools},
	task.MethodCancel: {serve: func(h *Handler, rq *request, m *jsonrpc.Message) { h.tasks.cancelStateless(rq, m) }, needs: hasTools},
}

// removedMethods existed in the 2025 revisions and are gone in 2026-07-28.
var removedMethods = map[string]bool{
	"initialize": true, "ping": true, "logging/setLevel": true,
	"resources/subscribe": true, "resources/unsubscribe": true,
}

// namedMethods carry Mcp-Name: the tool or prompt name, or the resource
// URI, they address.
var namedMethods = map[string]bool{"tools/call": true, "prompts/get": true, "resources/read": true}

// cacheable methods carry ttlMs and cacheScope in 2026-07-28 results.
var cacheable = map[string]bool{
	"server/discover": true, "tools/list": true, "prompts/list": true,
	"resources/list": true, "resources/templates/list": true, "resources/read": true,
	"skills/list": true, "skills/get": true, "resources/directory/read": true,
}

// withMethods returns table with more entries.
func withMethods(table map[string]method, more map[string]method) map[string]method {
	t := maps.Clone(table)
	maps.Copy(t, more)
	return t
}
