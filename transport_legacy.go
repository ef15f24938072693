package mcphandler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/mcphandler/mcphandler/internal/jsonrpc"
	"github.com/mcphandler/mcphandler/session"
)

// Version20241105 is the first revision, served over the HTTP+SSE
// transport by [Handler.LegacySSE].
const Version20241105 = "2024-11-05"

// LegacySSE returns the two handlers of the 2024-11-05 HTTP+SSE transport,
// for clients that predate Streamable HTTP. Mount stream at its own path
// (e.g. "/sse") and messages at messagePath (e.g. "/messages"):
//
//	sse, msgs := h.LegacySSE("/messages")
//	mux.Handle("/sse", sse)
//	mux.Handle("/messages", msgs)
//
// A GET on stream opens a session bound to the caller and announces the
// message endpoint (messagePath?sessionId=…) in an "endpoint" event. Each
// POST to that endpoint is answered 202 at once; its response, and
// anything the server sends meanwhile (progress, logs, questions for the
// client), arrive as "message" events on the stream. The same hooks, role
// gates, confirms and session store serve both transports; since answers
// travel through the store, the POSTs may reach any replica. The session
// ends when the stream closes.
//
// See https://modelcontextprotocol.io/specification/2024-11-05/basic/transports.
func (h *Handler) LegacySSE(messagePath string) (stream, messages http.Handler) {
	return h.sessions.legacyHandlers(messagePath)
}

// legacyHandlers returns the handlers of LegacySSE.
func (ss *sessions) legacyHandlers(messagePath string) (stream, messages http.Handler) {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { ss.serveLegacyStream(w, r, messagePath) }),
		http.HandlerFunc(ss.serveLegacyMessage)
}

func (ss *sessions) serveLegacyStream(w http.ResponseWriter, r *http.Request, messagePath string) {
	id, ok := ss.legacyPrecheck(w, r, http.MethodGet)
	if !ok {
		return
	}
	ctx := r.Context()
	s, sub, changes, ok := ss.createLegacySession(w, ctx, id)
	if !ok {
		return
	}
	defer ss.closeStream(sub, changes)
	// The old transport's session is the stream: it ends with it.
	defer ss.store.Delete(context.WithoutCancel(ctx), s.ID)
	sw := startSSE(w)
	endpoint := messagePath + "?sessionId=" + url.QueryEscape(s.ID)
	if sw.event("endpoint", nil, []byte(endpoint)) != nil {
		return
	}
	subscribed := ss.h.streams.subscribedFn(ctx, s.ID)
	var order msgOrder
	ss.h.streams.runStream(ctx, &streamLoop{
		caller: ss.h.streams.checkCaller(r, id), // the stream lives while its caller stays who it was
		keepAlive: func() bool {
			// Keep the connection and the session alive while the client listens.
			ss.store.Get(ctx, s.ID)
			return sw.comment() == nil
		},
		msgs: sub.C(),
		onMsg: func(b []byte) bool {
			msg, ok := ss.h.bus.openSession(s.ID, &order, b)
			return !ok || !bytes.Equal(msg, sessionEnded) && sw.event("message", nil, msg) == nil
		},
		changes: changes.c,
		onChange: func(c *change) bool {
			msg := changeMessage(c, id, subscribed)
			return msg == nil || sw.event("message", nil, msg) == nil
		},
	})
}

// createLegacySession opens a session for id's stream: it subscribes the
// stream, then stores the session, answering 503 when the store fails.
func (ss *sessions) createLegacySession(w http.ResponseWriter, ctx context.Context, id Identity) (s *session.Session, sub session.Subscription, changes *changeWatch, ok bool) {
	s = &session.Session{ID: ss.newSessionID(id), Owner: id.key(), ProtocolVersion: Version20241105, TTL: ss.cfg.Sessions.TTL}
	if sub, changes, ok = ss.subscribeStream(w, ctx, s.ID, id); !ok {
		return nil, nil, nil, false
	}
	err := ss.store.Create(ctx, s)
	if err == nil {
		err = ss.admit(ctx, id, s)
	}
	if err != nil {
		ss.closeStream(sub, changes)
		ss.h.storeUnavailable(w, err)
		return nil, nil, nil, false
	}
	return s, sub, changes, true
}

// legacyPrecheck checks the origin, the HTTP method and the caller of a
// legacy transport request, answering the error when one fails.
func (ss *sessions) legacyPrecheck(w http.ResponseWriter, r *http.Request, method string) (Identity, bool) {
	if status, msg := ss.h.checkOrigin(r); status != 0 {
		writeHTTPError(w, status, jsonrpc.CodeInvalidRequest, msg)
		return Identity{}, false
	}
	if r.Method != method {
		w.Header().Set("Allow", method)
		writeHTTPError(w, http.StatusMethodNotAllowed, jsonrpc.CodeInvalidRequest, "Method not allowed")
		return Identity{}, false
	}
	return ss.h.authenticate(w, r)
}

// serveLegacyMessage takes one POSTed message of the HTTP+SSE transport:
// 202 at once, then the message is served and everything it produces is
// published to the session's stream.
func (ss *sessions) serveLegacyMessage(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	id, ok := ss.legacyPrecheck(w, r, http.MethodPost)
	if !ok {
		return
	}
	s, ok := ss.legacySession(w, r, id)
	if !ok {
		return
	}
	if mt := headerValue(r, hdrContentType); mt != "" && !strings.HasPrefix(strings.ToLower(mt), "application/json") {
		writeHTTPError(w, http.StatusUnsupportedMediaType, jsonrpc.CodeInvalidRequest, "Unsupported Media Type: Content-Type must be application/json")
		return
	}
	buf, status := ss.h.readBody(w, r)
	if status != 0 {
		bodyError(w, status)
		return
	}
	defer ss.h.releaseBody(buf)
	var m jsonrpc.Message
	kind, ok := ss.h.decodeMessage(w, buf.Bytes(), &m)
	if !ok {
		return
	}
	rq := &request{h: ss.h, r: r, start: start, id: id, sess: s, version: s.ProtocolVersion, era: eraLegacy}
	if kind == jsonrpc.KindResponse {
		if err := ss.deliverResponse(rq, &m); err != nil {
			ss.refuseResponse(w, err)
			return
		}
		w.WriteHeader(http.StatusAccepted)
		return
	}
	acceptNow(w)
	ss.serveLegacyRequest(rq, &m, kind)
}

// serveLegacyRequest serves a message of the HTTP+SSE transport once its
// POST was answered 202: everything it produces is published to the
// session's stream.
func (ss *sessions) serveLegacyRequest(rq *request, m *jsonrpc.Message, kind jsonrpc.Kind) {
	// The client may hang up now; that cancels nothing it asked for.
	rq.r = rq.r.WithContext(context.WithoutCancel(rq.r.Context()))
	if kind == jsonrpc.KindNotification {
		ss.notification(rq, m)
		return
	}
	ctx, sid := rq.context(), rq.sess.ID
	var w writerMark // the sink runs under its stream's lock
	rq.st = &stream{sink: func(msg []byte) error {
		_, err := ss.h.bus.publishSession(ctx, sid, &w, msg)
		return err
	}}
	if m.Method == "initialize" {
		ss.initializeLegacy(rq, m)
		return
	}
	ss.h.serveRequest(rq, m)
}

// acceptNow answers 202 at once: the response travels on the stream. The
// request is served after the 202 on this goroutine, so the client must
// not send its next message on this connection: it would wait behind the
// work.
func acceptNow(w http.ResponseWriter) {
	w.Header().Set("Content-Length", "0")
	w.Header().Set("Connection", "close")
	w.WriteHeader(http.StatusAccepted)
	http.NewResponseController(w).Flush()
}

// legacySession finds the session a POST's sessionId names, bound to its
// caller; it writes 400, 404 or 503 and returns false when there is none.
func (ss *sessions) legacySession(w http.ResponseWriter, r *http.Request, id Identity) (*session.Session, bool) {
	sid := r.URL.Query().Get("sessionId")
	if sid == "" {
		writeHTTPError(w, http.StatusBadRequest, jsonrpc.CodeInvalidRequest, "Bad Request: sessionId is required")
		return nil, false
	}
	s, err := (*session.Session)(nil), session.ErrNotFound
	if ss.sessionOf(sid, id) {
		s, err = ss.store.Get(r.Context(), sid)
	}
	if err == nil && !id.hasKey(s.Owner) {
		err = session.ErrNotFound
	}
	switch {
	case errors.Is(err, session.ErrNotFound):
		writeHTTPError(w, http.StatusNotFound, jsonrpc.CodeInvalidRequest, "Not Found: unknown or expired session")
		return nil, false
	case err != nil:
		ss.h.storeUnavailable(w, err)
		return nil, false
	}
	return s, true
}

// initializeLegacy negotiates the version and records the client's
// capabilities in the session the stream opened.
func (ss *sessions) initializeLegacy(rq *request, m *jsonrpc.Message) {
	if ss.h.intercept(rq, m, true, serveInitializeLegacy) { // Config.Interceptors (intercept.go) call back in
		return
	}
	var p initializeParams
	if len(m.Params) > 0 {
		if err := json.Unmarshal(m.Params, &p); err != nil {
			rq.fail(m.ID, invalidParams("Invalid params: "+jsonError(err)))
			return
		}
	}
	version := Version20241105
	if isSupported(p.ProtocolVersion) {
		version = p.ProtocolVersion
	}
	rq.sess.ProtocolVersion = version
	rq.sess.Capabilities = p.Capabilities.flags()
	rq.sess.ClientName = clip(p.ClientInfo.Name, ss.cfg.Limits.MaxClientInfoBytes)
	rq.sess.ClientVersion = clip(p.ClientInfo.Version, ss.cfg.Limits.MaxClientInfoBytes)
	rq.version = version
	rq.info = &reqInfo{identity: rq.id, request: rq.r, version: version, sessionID: rq.sess.ID, caps: rq.sess.Capabilities}
	rq.ctx = context.WithValue(rq.context(), ctxKey{}, rq.info)
	if err := ss.store.Update(rq.ctx, rq.sess); err != nil {
		rq.storeFailed(m, err)
		return
	}
	ss.h.caps.initializeResult(rq, m, version)
}

// serveInitializeLegacy is initializeLegacy as Config.Interceptors call
// it back (see serveInitialize).
func serveInitializeLegacy(h *Handler, rq *request, m *jsonrpc.Message) {
	h.sessions.initializeLegacy(rq, m)
}

// legacyEra is the era seam for the 2024-11-05 HTTP+SSE transport: as the
// 2025 revisions, but a POST is not the stream (its connection may close
// as soon as it got its 202), so the client is never gone by it.
type legacyEra struct{ sessionsEra }

func (legacyEra) exchange(rq *request, x *Exchange, meta json.RawMessage) {
	sessionExchange(rq, x, meta)
}
