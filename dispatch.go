package mcphandler

import (
	"context"
	"encoding/json"
	"maps"
	"strconv"

	"github.com/mcphandler/mcphandler/internal/jsonrpc"
)

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
	"logging/setLevel": {serve: (*Handler).setLevel},
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

// withMethods returns table with more entries.
func withMethods(table map[string]method, more map[string]method) map[string]method {
	t := maps.Clone(table)
	maps.Copy(t, more)
	return t
}

// serveRequest answers one JSON-RPC request of an established session (or
// a stateless POST), through the dispatch table of the request's era.
//
// The method is looked up first: a method the handler does not serve to
// this request is answered -32601 whatever else is wrong with it (an
// oversized progressToken, its params), and interceptors see it as Other.
func (h *Handler) serveRequest(rq *request, m *jsonrpc.Message) {
	md, ok := rq.lookup(m.Method)
	if h.intercept(rq, m, ok, (*Handler).serveRequest) { // Config.Interceptors (intercept.go) call back in
		return
	}
	rq.method, rq.msgID = m.Method, m.ID
	// The stream re-checks the caller of what waits on it (reauth.go).
	rq.st.caller = rq
	defer rq.unwatch()
	if !ok {
		rq.fail(m.ID, methodNotFound(m.Method))
		return
	}
	if e := rq.checkProgressToken(m); e != nil {
		rq.fail(m.ID, e)
		return
	}
	if rq.info == nil {
		rq.info = &reqInfo{identity: rq.id, request: rq.r, version: rq.version}
	}
	if rq.sess != nil {
		rq.info.sessionID = rq.sess.ID
	}
	rq.ctx = context.WithValue(rq.context(), ctxKey{}, rq.info)
	if md.cancellable && rq.sess != nil {
		key, cancel, ok := h.bus.track(rq, m.ID)
		if !ok {
			rq.fail(m.ID, h.bus.tooManyRunning())
			return
		}
		defer h.bus.untrack(rq.sess.ID, key, cancel)
	}
	md.serve(h, rq, m)
}

// lookup returns the entry of method in rq's dispatch table, and whether
// the handler serves it to rq: the table has it, the hooks it needs are
// set, and rq's revision has it.
func (rq *request) lookup(method string) (method, bool) {
	md, ok := rq.era.methods()[method]
	return md, ok && (md.needs == nil || md.needs(rq.h)) && (md.revision == "" || md.revision == rq.version)
}

// track makes rq's work cancellable by notifications/cancelled, on any
// replica, and detaches it from the client's connection. untrack, with
// what it returns, ends the tracking. It reports false, and tracks
// nothing, when rq's session already runs Config.Limits.MaxRunningPerSession
// requests on this replica: a detached request is bounded by no
// connection, so the session's count bounds them.
func (rb *replicaBus) track(rq *request, id []byte) (string, context.CancelFunc, bool) {
	sid := rq.sess.ID
	ctx, cancel := context.WithCancel(context.WithoutCancel(rq.ctx))
	key := runKey(sid, id)
	rb.listenCancels(ctx)
	rb.runMu.Lock()
	if rb.runningIn[sid] >= rb.cfg.Limits.MaxRunningPerSession {
		rb.runMu.Unlock()
		cancel()
		return "", nil, false
	}
	rb.runningIn[sid]++
	rb.running[key] = running{cancel, rq.st}
	rb.runMu.Unlock()
	rq.ctx = ctx
	return key, cancel, true
}

func (rb *replicaBus) untrack(sid, key string, cancel context.CancelFunc) {
	rb.runMu.Lock()
	delete(rb.running, key)
	if rb.runningIn[sid]--; rb.runningIn[sid] <= 0 {
		delete(rb.runningIn, sid)
	}
	rb.runMu.Unlock()
	cancel()
}

// tooManyRunning refuses a request of a session that runs
// Config.Limits.MaxRunningPerSession requests on this replica.
func (rb *replicaBus) tooManyRunning() *jsonrpc.Error {
	return rpcError(CodeRateLimited, "Too many requests running: "+strconv.Itoa(rb.cfg.Limits.MaxRunningPerSession)+
		" requests of this session are running, at most "+strconv.Itoa(rb.cfg.Limits.MaxRunningPerSession)+
		" at once (a client that hangs up does not end its request: cancel it with notifications/cancelled)")
}

// checkProgressToken refuses a request whose progressToken is longer than
// Config.Limits.MaxIDBytes: the token is copied into every progress event.
func (rq *request) checkProgressToken(m *jsonrpc.Message) *jsonrpc.Error {
	if len(rq.progressToken(m)) > rq.h.cfg.Limits.MaxIDBytes {
		return invalidParams("Invalid params: a progressToken has at most " + strconv.Itoa(rq.h.cfg.Limits.MaxIDBytes) + " bytes")
	}
	return nil
}

// newExchange returns the Exchange of the request whose params carried
// meta as _meta.
func (rq *request) newExchange(meta json.RawMessage) *Exchange {
	x := &Exchange{h: rq.h, st: rq.st, sess: rq.sess, version: rq.version}
	rq.setupExchange(x, meta)
	return x
}
