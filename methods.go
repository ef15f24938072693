package mcphandler

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/mcphandler/mcphandler/internal/jsonrpc"
	"github.com/mcphandler/mcphandler/session"
)

// hookFailed answers a request whose hook failed: an *Error is sent as is,
// anything else as an internal error that reveals nothing.
func (h *Handler) hookFailed(rq *request, m *jsonrpc.Message, hook string, err error) {
	var e *Error
	if !errors.As(err, &e) {
		h.logger().Error("mcphandler: "+hook, "method", m.Method, "err", err)
	}
	rq.fail(m.ID, wireError(err))
}

// storeFailed answers a request whose session store call failed.
func (h *Handler) storeFailed(rq *request, m *jsonrpc.Message, err error) {
	h.logger().Error("mcphandler: session store", "err", err)
	rq.st.status = http.StatusServiceUnavailable
	rq.fail(m.ID, errStoreUnavailable())
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

var emptyResult = []byte("{}")

// randText returns 130 random bits as 26 characters of base32, for ids
// that must be unguessable.
func randText() string { return rand.Text() }

// openResult appends the start of a result response up to and including
// the result object's opening brace (and, on 2026-07-28, its resultType,
// cache hints and serverInfo). closeResult ends it.
func (rq *request) openResult(dst []byte, id json.RawMessage) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = append(dst, id...)
	dst = append(dst, `,"result":{`...)
	return rq.decorate(dst)
}

func closeResult(dst []byte) []byte {
	if dst[len(dst)-1] == ',' {
		dst = dst[:len(dst)-1]
	}
	return append(dst, "}}"...)
}

// reply sends result, a JSON object, as the request's final message. A
// result that is not one (never from the handler itself) is an internal
// error rather than a malformed response.
func (rq *request) reply(id json.RawMessage, result []byte) {
	if len(result) < 2 || result[0] != '{' || result[len(result)-1] != '}' {
		rq.h.logger().Error("mcphandler: a result to send is not a JSON object")
		rq.fail(id, errInternal())
		return
	}
	b := rq.openResult(make([]byte, 0, len(result)+len(id)+160), id)
	b = append(b, result[1:len(result)-1]...)
	rq.st.finish(closeResult(b))
}

// fail sends an error as the request's final message.
func (rq *request) fail(id json.RawMessage, e *jsonrpc.Error) {
	rq.ic.failed(e) // for Config.Interceptors (intercept.go)
	rq.errorStatus(Code(e.Code))
	rq.st.finish(jsonrpc.AppendError(nil, id, e))
}

type initializeParams struct {
	ProtocolVersion string     `json:"protocolVersion"`
	Capabilities    clientCaps `json:"capabilities"`
	ClientInfo      struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	} `json:"clientInfo"`
}

// admit enforces Config.Limits.MaxSessionsPerIdentity once the session s of id
// is created: the store ends id's oldest sessions beyond the limit, and
// their streams are told to end. The zero identity is not limited. If the
// store fails, s is deleted again and the error returned.
func (h *Handler) admit(ctx context.Context, id Identity, s *session.Session) error {
	if id.Tenant == "" && id.Subject == "" {
		return nil
	}
	ended, err := h.cfg.Store.Admit(ctx, s, h.cfg.Limits.MaxSessionsPerIdentity)
	for _, sid := range ended {
		h.bus.publishSession(ctx, sid, nil, sessionEnded)
	}
	if err != nil {
		h.cfg.Store.Delete(context.WithoutCancel(ctx), s.ID)
	}
	return err
}

// clip returns s cut to at most n bytes, at a UTF-8 boundary. A cut
// string is a copy: a prefix that pointed into s would keep all of s
// alive in whatever holds it (a session record in memory, a span
// processor's queue, a cache).
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return strings.Clone(s[:n])
}

func runKey(sid string, id json.RawMessage) string { return sid + "/" + string(id) }

// running is an in-flight request that notifications/cancelled can stop.
type running struct {
	cancel context.CancelFunc
	st     *stream
}

// notification handles a client notification. Unknown ones are ignored,
// as JSON-RPC requires.
func (h *Handler) notification(rq *request, m *jsonrpc.Message) {
	switch m.Method {
	case "notifications/cancelled":
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		if rq.sess == nil || json.Unmarshal(m.Params, &p) != nil || len(p.RequestID) == 0 {
			return
		}
		h.bus.cancel(rq.context(), runKey(rq.sess.ID, p.RequestID))
	case "notifications/initialized":
		if rq.sess != nil && !rq.sess.Initialized {
			rq.sess.Initialized = true
			if err := h.cfg.Store.Update(rq.context(), rq.sess); err != nil {
				h.logger().Error("mcphandler: session store", "err", err)
			}
		}
	}
}

// setLevel sets the session's minimum log level.
func (h *Handler) setLevel(rq *request, m *jsonrpc.Message) {
	var p struct {
		Level LogLevel `json:"level"`
	}
	if err := json.Unmarshal(m.Params, &p); err != nil || p.Level == "" {
		rq.fail(m.ID, invalidParams("Invalid params: level is required"))
		return
	}
	if _, ok := logLevels[p.Level]; !ok {
		rq.fail(m.ID, invalidParams("Invalid params: unknown log level "+quoteEcho(string(p.Level))))
		return
	}
	if rq.sess != nil {
		rq.sess.LogLevel = string(p.Level)
		if err := h.cfg.Store.Update(rq.ctx, rq.sess); err != nil {
			h.storeFailed(rq, m, err)
			return
		}
	}
	rq.reply(m.ID, emptyResult)
}

// jsonError describes a params decoding error without echoing input.
func jsonError(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return te.Field + " must be " + te.Type.String()
	}
	return "malformed params"
}
