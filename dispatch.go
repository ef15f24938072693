package mcphandler

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/mcphandler/mcphandler/internal/jsonrpc"
	"github.com/mcphandler/mcphandler/session"
)

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
	rq.info.caps = rq.clientCaps()
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

// notification handles a client notification. Unknown ones are ignored,
// as JSON-RPC requires. Only the transports with sessions take them
// (2026-07-28 defines none over HTTP): notifications/cancelled stops a
// request of the session on whichever replica runs it, and
// notifications/initialized marks the session initialized.
func (ss *sessions) notification(rq *request, m *jsonrpc.Message) {
	switch m.Method {
	case "notifications/cancelled":
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		if rq.sess == nil || json.Unmarshal(m.Params, &p) != nil || len(p.RequestID) == 0 {
			return
		}
		ss.h.bus.cancel(rq.context(), runKey(rq.sess.ID, p.RequestID))
	case "notifications/initialized":
		if rq.sess != nil && !rq.sess.Initialized {
			rq.sess.Initialized = true
			switch err := ss.store.Update(rq.context(), rq.sess); {
			case errors.Is(err, session.ErrNotFound):
				// Ended meanwhile (a DELETE, or a 2024-11-05 stream
				// closed right after its last answer): nothing to mark.
				ss.h.logger().Debug("mcphandler: notifications/initialized for a session that ended")
			case err != nil:
				ss.h.logger().Error("mcphandler: session store", "err", err)
			}
		}
	}
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

// exchange returns the Exchange of a request, with the progress token of
// its params' _meta.
func (rq *request) exchange(m *jsonrpc.Message) *Exchange {
	var p struct {
		Meta json.RawMessage `json:"_meta"`
	}
	if len(m.Params) > 0 {
		json.Unmarshal(m.Params, &p)
	}
	return rq.newExchange(p.Meta)
}
