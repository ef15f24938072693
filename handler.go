package mcphandler

import (
	"bytes"

	"context"
	crand "crypto/rand"
	"encoding/json"
	"errors"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcphandler/mcphandler/internal/canon"
	"github.com/mcphandler/mcphandler/internal/jsonrpc"
	"github.com/mcphandler/mcphandler/internal/ownerindex"
	"github.com/mcphandler/mcphandler/internal/seal"
	"github.com/mcphandler/mcphandler/session"
)

// Handler serves MCP on one endpoint. Create it with [New]; it is safe for
// concurrent use. With a store shared by replicas, call [Handler.Close]
// when done with it.
type Handler struct {
	cfg       Config
	catalog   *catalog // what a caller sees (catalog.go)
	origins   map[string]bool
	anyOrig   bool
	caps      *capabilities // what the server declares of itself (capabilities.go)
	keys      *seal.Keys
	macs      *macs      // authenticate what replicas exchange through the store
	confirms  *confirms  // Confirm decisions: their records, leases and bounds (confirms.go)
	approvals *approvals // Approve decisions, in every era (approvals.go)

	bus     *replicaBus // what replicas tell each other, and the requests running here (replica_bus.go)
	streams *streams    // what every long-lived stream shares (streams.go)
	tasks   *tasks      // tasks of both revisions (tasks.go)

	sessions *sessions // the transports with sessions: 2025 Streamable HTTP, 2024-11-05 HTTP+SSE (sessions.go)

	// streamLogs bounds the event logs of each session (stream_bound.go).
	streamLogs *ownerindex.Index

	bufPool sync.Pool // *bytes.Buffer for request bodies
}

// New returns a Handler for cfg. See [Config] for the defaults. It panics
// if Config.StateKeys holds a key shorter than 32 bytes, or is empty while
// Config.Store is shared by replicas (anything but a [*session.Memory]).
// It logs a warning (Config.Logger, Warn level) when Config.Authenticate
// is nil.
func New(cfg Config) *Handler {
	cfg.applyDefaults()
	if cfg.Authenticate == nil {
		cfg.Logger.Warn("mcphandler: Config.Authenticate is nil, so every request is served as one anonymous caller, whoever sends it: " +
			"set Authenticate (package auth offers OIDC, token introspection and API keys), or set it to mcphandler.InsecureAnonymous to mean it")
	}
	checkApprovals(&cfg)
	h := &Handler{
		cfg:     cfg,
		origins: make(map[string]bool, len(cfg.AllowedOrigins)),
	}
	h.catalog = newCatalog(&h.cfg, h.loggerFor)
	for _, o := range cfg.AllowedOrigins {
		if o == "*" {
			h.anyOrig = true
		}
		h.origins[strings.ToLower(strings.TrimSuffix(o, "/"))] = true
	}
	h.caps = newCapabilities(&h.cfg, h.catalog)
	secrets := cfg.StateKeys
	if len(secrets) == 0 {
		if sharedStore(cfg.Store) {
			panic("mcphandler: Config.StateKeys is empty, but Config.Store is shared by replicas: every replica must be given the same StateKeys, which seal request states and authenticate the records and messages replicas exchange through the store")
		}
		k := make([]byte, 32)
		crand.Read(k)
		secrets = [][]byte{k}
	}
	var err error
	if h.keys, err = seal.NewKeys(secrets...); err != nil {
		panic("mcphandler: Config.StateKeys: " + err.Error())
	}
	if h.macs, err = newMACs(secrets); err != nil {
		panic("mcphandler: Config.StateKeys: " + err.Error())
	}
	h.bus = newReplicaBus(&h.cfg, h.macs)
	if h.confirms, err = newConfirms(&h.cfg, h.macs, h.bus, secrets); err != nil {
		panic("mcphandler: Config.StateKeys: " + err.Error())
	}
	h.approvals = newApprovals(&h.cfg, h.confirms)
	if h.streamLogs, err = newStreamLogs(&h.cfg, secrets); err != nil {
		panic("mcphandler: Config.StateKeys: " + err.Error())
	}
	h.streams = newStreams(&h.cfg, h.bus, h.streamLogs)
	h.tasks = newTasks(&h.cfg, secrets)
	h.sessions = newSessions(h)
	connectConfirms(h)
	return h
}

func (h *Handler) logger() *slog.Logger { return h.cfg.Logger }

// ServeHTTP implements [http.Handler] for the Streamable HTTP transport,
// serving every revision that uses it on the one endpoint:
//
//   - 2025-03-26, 2025-06-18, 2025-11-25 (with sessions): POST carries
//     client messages (initialize opens the session named in
//     Mcp-Session-Id), GET opens the session's server-to-client stream or
//     resumes a POST stream (Last-Event-ID), DELETE ends the session. With
//     Config.Stateless there are no sessions, and GET and DELETE are 405.
//   - 2026-07-28 (stateless): every POST carries its version and client
//     capabilities in _meta and the MCP-Protocol-Version, Mcp-Method and
//     Mcp-Name headers; questions to the client travel in input_required
//     rounds; GET and DELETE are 405.
//
// A POST is routed by the version its _meta or MCP-Protocol-Version header
// names. The 2024-11-05 HTTP+SSE transport has its own two endpoints: see
// [Handler.LegacySSE]. ServeHTTP is safe for concurrent use.
//
// See https://modelcontextprotocol.io/specification/2025-11-25/basic/transports
// and https://modelcontextprotocol.io/specification/2026-07-28/basic/transports/streamable-http.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if status, msg := h.checkOrigin(r); status != 0 {
		writeHTTPError(w, status, jsonrpc.CodeInvalidRequest, msg)
		return
	}
	if origin := headerValue(r, hdrOrigin); origin != "" {
		// An allowed browser origin may read the answer and the headers a
		// client needs (CORS).
		hdr := w.Header()
		hdr.Set("Access-Control-Allow-Origin", origin)
		hdr.Add("Vary", "Origin")
		hdr.Set("Access-Control-Expose-Headers", "Mcp-Session-Id, Mcp-Protocol-Version, WWW-Authenticate, Retry-After")
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			hdr.Set("Access-Control-Allow-Methods", "GET, POST, DELETE")
			if req := r.Header.Get("Access-Control-Request-Headers"); req != "" {
				hdr.Set("Access-Control-Allow-Headers", req)
			}
			hdr.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
	}
	switch r.Method {
	case http.MethodPost:
		h.servePOST(w, r)
	case http.MethodGet:
		h.sessions.serveGETRequest(w, r) // detach.go
	case http.MethodDelete:
		h.interceptHTTP(w, r, KindSessionEnd, h.sessions.serveDELETE) // Config.Interceptors (intercept.go)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		writeHTTPError(w, http.StatusMethodNotAllowed, jsonrpc.CodeInvalidRequest, "Method not allowed")
	}
}

// checkOrigin guards against DNS rebinding: a request received on a
// loopback address must name a loopback host, and a browser Origin must be
// allowed (by default: the request's own host).
func (h *Handler) checkOrigin(r *http.Request) (int, string) {
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && isLoopbackAddr(la) {
		if !isLoopbackHost(r.Host) {
			return http.StatusForbidden, "Forbidden: Host is not a loopback name"
		}
	}
	origin := headerValue(r, hdrOrigin)
	if origin == "" || h.anyOrig {
		return 0, ""
	}
	if h.origins[strings.ToLower(origin)] {
		return 0, ""
	}
	if len(h.origins) == 0 {
		if u, err := url.Parse(origin); err == nil && u.Host != "" && strings.EqualFold(u.Host, r.Host) {
			return 0, ""
		}
	}
	return http.StatusForbidden, "Forbidden: Origin not allowed"
}

func isLoopbackAddr(a net.Addr) bool {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.IsLoopback()
	}
	return false
}

func isLoopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// authenticate runs Config.Authenticate and writes the 401/403 when it fails.
func (h *Handler) authenticate(w http.ResponseWriter, r *http.Request) (Identity, bool) {
	if h.cfg.Authenticate == nil {
		return Identity{}, true
	}
	id, err := h.cfg.Authenticate(r)
	if err == nil {
		return id, true
	}
	f := h.streams.authFailure(r, err) // reauth.go
	f.setHeader(w.Header())
	writeHTTPError(w, f.status, f.code, f.msg)
	return Identity{}, false
}

// storeUnavailable answers 503 for a request that needs the session store
// while it cannot be reached, and logs why.
func (h *Handler) storeUnavailable(w http.ResponseWriter, err error) {
	h.logger().Error("mcphandler: session store", "err", err)
	writeHTTPError(w, http.StatusServiceUnavailable, CodeStoreUnavailable, "Service Unavailable: the session store is unavailable")
}

// writeHTTPError answers with an HTTP error status and a JSON-RPC error
// without id, as the transport allows.
func writeHTTPError(w http.ResponseWriter, status int, code Code, msg string) {
	writeRPCError(w, status, nil, rpcError(code, msg))
}

func writeRPCError(w http.ResponseWriter, status int, id json.RawMessage, e *jsonrpc.Error) {
	b := jsonrpc.AppendError(make([]byte, 0, 96), id, e)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

// Canonical names of the request headers read on every POST: Header.Get
// canonicalises a name it is given, which for "MCP-Protocol-Version"
// allocates, while a name already canonical is used as it is.
const (
	hdrProtocolVersion = "Mcp-Protocol-Version"
	hdrSessionID       = "Mcp-Session-Id"
	hdrContentType     = "Content-Type"
	hdrOrigin          = "Origin"
	hdrAccept          = "Accept"
)

// headerValue is r.Header.Get(name) for a name already in canonical form
// (one of the hdr constants; TestHeaderNamesCanonical checks them): the
// first value, or "" when there is none. It skips Header.Get's scan of the
// name, which costs more than the map lookup it precedes.
func headerValue(r *http.Request, name string) string {
	if v := r.Header[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// acceptsAll reports whether the request's Accept list admits each of
// types (at most 8 lower case type/subtype names), as acceptsType does one
// by one, in a single pass over the list: each part is trimmed (and lowered
// when not ASCII) once, not once per type. The value clients send, the
// types themselves joined by ", ", is admitted without parsing it (about
// 1,400 instructions a request).
func acceptsAll(r *http.Request, types ...string) bool {
	if len(types) > 8 {
		panic("mcphandler: acceptsAll takes at most 8 types")
	}
	if v := r.Header[hdrAccept]; len(v) == 1 && isTypeList(v[0], types) {
		return true
	}
	accept := strings.Join(r.Header[hdrAccept], ",")
	missing := uint8(1)<<len(types) - 1
	for rest, more := accept, true; more && missing != 0; {
		var part string
		part, rest, more = strings.Cut(rest, ",")
		mt := acceptedMediaType(part)
		for i, t := range types {
			if missing&(1<<i) != 0 && admits(mt, t) {
				missing &^= 1 << i
			}
		}
	}
	return missing == 0
}

// isTypeList reports whether s is exactly types joined by ", ".
func isTypeList(s string, types []string) bool {
	for i, t := range types {
		if i > 0 {
			if len(s) < 2 || s[:2] != ", " {
				return false
			}
			s = s[2:]
		}
		if !strings.HasPrefix(s, t) {
			return false
		}
		s = s[len(t):]
	}
	return s == ""
}

// acceptsType reports whether the Accept list accept admits typ (a lower
// case type/subtype): by name, by its major type's wildcard, or by */*,
// compared after strings.ToLower. It copies only a part that is not ASCII
// (a few other runes lower to ASCII letters: İ to i, the Kelvin sign to k).
func acceptsType(accept, typ string) bool {
	for rest, more := accept, true; more; {
		var part string
		part, rest, more = strings.Cut(rest, ",")
		if admits(acceptedMediaType(part), typ) {
			return true
		}
	}
	return false
}

// acceptedMediaType is the media range of one part of an Accept list,
// without its parameters and spaces, lowered by strings.ToLower when it is
// not ASCII (an ASCII one is compared by lowerIs, without a copy).
func acceptedMediaType(part string) string {
	mt, _, _ := strings.Cut(part, ";")
	mt = strings.TrimSpace(mt)
	if !isASCII(mt) {
		mt = strings.ToLower(mt)
	}
	return mt
}

// admits reports whether the media range mt (from acceptedMediaType)
// admits typ, a lower case type/subtype.
func admits(mt, typ string) bool {
	if lowerIs(mt, typ) || mt == "*/*" {
		return true
	}
	major, _, _ := strings.Cut(typ, "/")
	return len(mt) == len(major)+2 && lowerIs(mt[:len(major)], major) && mt[len(major):] == "/*"
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// lowerIs reports whether s equals lower, a lower case ASCII string, once
// its ASCII capitals are lowered.
func lowerIs(s, lower string) bool {
	if len(s) != len(lower) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// readBody reads a POST body within MaxBodyBytes and ReadBodyTimeout into
// a pooled buffer the caller must release. It returns 413 for a body too
// large, 408 for one too slow (the connection is then closed, so that the
// server does not wait for the rest) and 400 for one that broke off.
//
// The time bound is a read deadline on the connection (or HTTP/2 stream),
// lifted once the body is read — net/http does it too on HTTP/1.x — since
// the response that follows may be a long SSE stream, and net/http cancels
// a request whose connection fails to read.
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request) (*bytes.Buffer, int) {
	if r.ContentLength > h.cfg.Limits.MaxBodyBytes {
		return nil, http.StatusRequestEntityTooLarge
	}
	buf, _ := h.bufPool.Get().(*bytes.Buffer)
	if buf == nil {
		buf = new(bytes.Buffer)
	}
	buf.Reset()
	if r.ContentLength > 0 {
		buf.Grow(int(r.ContentLength))
	}
	setDeadline := readDeadline(w)
	bounded := setDeadline != nil && setDeadline(time.Now().Add(h.cfg.Limits.ReadBodyTimeout)) == nil
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, h.cfg.Limits.MaxBodyBytes))
	if bounded && err == nil {
		setDeadline(time.Time{})
	}
	if err != nil {
		h.releaseBody(buf)
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			return nil, http.StatusRequestEntityTooLarge
		case errors.Is(err, os.ErrDeadlineExceeded):
			w.Header().Set("Connection", "close")
			return nil, http.StatusRequestTimeout
		}
		return nil, http.StatusBadRequest
	}
	return buf, 0
}

// readDeadline returns the function that sets w's read deadline, or nil if
// w has none: net/http's writers have it as a method (no allocation on the
// hot path); one that wraps another goes through http.ResponseController.
func readDeadline(w http.ResponseWriter) func(time.Time) error {
	switch d := w.(type) {
	case interface{ SetReadDeadline(time.Time) error }:
		return d.SetReadDeadline
	case interface{ Unwrap() http.ResponseWriter }:
		return http.NewResponseController(w).SetReadDeadline
	}
	return nil
}

// bodyError answers a POST whose body readBody refused with status.
func bodyError(w http.ResponseWriter, status int) {
	msg := "Bad Request: could not read the body"
	switch status {
	case http.StatusRequestEntityTooLarge:
		msg = "Request Entity Too Large"
	case http.StatusRequestTimeout:
		msg = "Request Timeout: the body was not received in time"
	}
	writeHTTPError(w, status, jsonrpc.CodeInvalidRequest, msg)
}

func (h *Handler) releaseBody(buf *bytes.Buffer) {
	if buf.Cap() <= 64<<10 {
		h.bufPool.Put(buf)
	}
}

// request is the state of one POSTed message being served.
type request struct {
	h *Handler
	r *http.Request
	// base is the context of the operation (see context); ctx is base
	// carrying reqInfo, for the hooks.
	base    context.Context
	ctx     context.Context
	start   time.Time
	id      Identity
	info    *reqInfo
	sess    *session.Session // nil for initialize and in stateless mode
	version string
	st      *stream
	method  string          // the JSON-RPC method being served
	msgID   json.RawMessage // and its id

	era era // what differs between protocol eras (see era.go)

	// 2026-07-28 requests: no session; capabilities and log level come
	// from the request's own _meta.
	meta  *requestMeta
	caps  session.Capabilities
	retry bool // the request carried inputResponses or requestState

	ic *interception // set while Config.Interceptors run (intercept.go)
}

// clientCaps is what the client of rq declared it can do: its session's
// capabilities, or a 2026-07-28 request's own.
func (rq *request) clientCaps() session.Capabilities {
	if rq.sess != nil {
		return rq.sess.Capabilities
	}
	return rq.caps
}

// context is the context the operation runs with: the one the last of
// Config.Interceptors passed on, else the HTTP request's. (rq.r keeps the
// HTTP request's own: a copy of it per intercepted request would cost
// more than the rest of the interception.)
func (rq *request) context() context.Context {
	if rq.base != nil {
		return rq.base
	}
	return rq.r.Context()
}

// servePOST serves one POSTed message or batch: the checks every era
// shares, then the era's path (serveStateless for 2026-07-28, serveSession
// for the 2025 revisions).
func (h *Handler) servePOST(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	id, ok := h.authenticate(w, r)
	if !ok || !checkPOSTHeaders(w, r) {
		return
	}
	hv := strings.TrimSpace(headerValue(r, hdrProtocolVersion))
	buf, status := h.readBody(w, r)
	if status != 0 {
		bodyError(w, status)
		return
	}
	defer h.releaseBody(buf)
	body := buf.Bytes()
	rq := &request{h: h, r: r, start: start, id: id, version: hv, era: eraSessions}
	if jsonrpc.IsBatch(body) {
		h.sessions.serveBatch(w, rq, body)
		return
	}
	var m jsonrpc.Message
	kind, ok := h.decodeMessage(w, body, &m)
	if !ok {
		return
	}
	if isStateless, rawMeta, meta := classifyEra(hv, &m); isStateless {
		h.serveStateless(w, rq, &m, kind, rawMeta, meta)
		return
	}
	h.sessions.serveSession(w, rq, &m, kind)
}

// checkPOSTHeaders answers 415 or 406 to a POST whose Content-Type or
// Accept the transport refuses.
func checkPOSTHeaders(w http.ResponseWriter, r *http.Request) bool {
	if ct := headerValue(r, hdrContentType); ct != "application/json" && !isJSONMediaType(ct) {
		writeHTTPError(w, http.StatusUnsupportedMediaType, jsonrpc.CodeInvalidRequest, "Unsupported Media Type: Content-Type must be application/json")
		return false
	}
	if !acceptsAll(r, "application/json", "text/event-stream") {
		writeHTTPError(w, http.StatusNotAcceptable, jsonrpc.CodeInvalidRequest, "Not Acceptable: Accept must list application/json and text/event-stream")
		return false
	}
	return true
}

// isJSONMediaType reports whether a Content-Type is application/json, with
// any parameters, in any case.
func isJSONMediaType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/json"
}

// decodeMessage decodes and validates one JSON-RPC message, answering 400
// when it is not one (-32700, -32600), when its id is longer than
// Config.Limits.MaxIDBytes (-32600), or when it has no single meaning (see
// strictMessage).
//
// The body is read once and its envelope's members decoded (see
// decodeChecked) when canon's check passes, the usual case; strictMessage
// then has nothing left to find. When it fails, every check runs as
// written, in the same order, so the answer to a bad body does not change.
func (h *Handler) decodeMessage(w http.ResponseWriter, body []byte, m *jsonrpc.Message) (jsonrpc.Kind, bool) {
	strict, err := decodeChecked(body, m)
	if err != nil {
		if errors.Is(err, jsonrpc.ErrNotObject) {
			writeHTTPError(w, http.StatusBadRequest, jsonrpc.CodeInvalidRequest, "Invalid Request: the body must be a JSON-RPC message object")
		} else {
			writeHTTPError(w, http.StatusBadRequest, jsonrpc.CodeParseError, "Parse error")
		}
		return 0, false
	}
	kind, verr := m.Validate()
	if verr == nil {
		verr = h.checkID(m)
	}
	if verr == nil && !strict {
		verr = strictMessage(body, m)
	}
	if verr != nil {
		writeRPCError(w, http.StatusBadRequest, readableID(m.ID), verr)
		return 0, false
	}
	return kind, true
}

// decodeChecked decodes body into m (as jsonrpc.Decode) after canon's
// check of it, and reports whether the check passed: then body is valid
// JSON with one meaning, within messageLimits, and strictMessage would
// find nothing. The check also locates the envelope's members, so such a
// body is not walked again to decode it.
func decodeChecked(body []byte, m *jsonrpc.Message) (strict bool, err error) {
	var mem [canon.MaxMembers][4]int32
	n, cerr := canon.CheckMembers(body, messageLimits, mem[:])
	switch {
	case cerr != nil:
		return false, jsonrpc.Decode(body, m)
	case n > 0 && n <= len(mem):
		return true, jsonrpc.DecodeMembers(body, mem[:n], m)
	}
	return true, jsonrpc.DecodeValid(body, m)
}

// messageLimits bounds what strictMessage accepts: arguments may nest
// canon.DefaultMaxDepth levels inside the envelope, params and arguments
// objects.
var messageLimits = canon.Limits{MaxDepth: canon.DefaultMaxDepth + 3}

// strictMessage refuses a message (body, already decoded into m) that
// parsers could read in more than one way: an object with a repeated key
// at any depth (encoding/json keeps the last one, other parsers the first,
// and a confirm could show one value and run another), or nesting deeper
// than messageLimits. A repeated key of the envelope is -32600, one inside
// params -32602; so is nesting too deep. It reads the body once, in
// linear time, without allocating.
func strictMessage(body []byte, m *jsonrpc.Message) *jsonrpc.Error {
	err := canon.Check(body, messageLimits)
	if err == nil {
		return nil
	}
	var dup *canon.DuplicateKeyError
	switch {
	case errors.As(err, &dup) && (len(m.Params) == 0 || canon.Check(m.Params, messageLimits) == nil):
		return rpcError(CodeInvalidRequest, "Invalid Request: repeated member "+quoteEcho(dup.Key))
	case dup != nil:
		return invalidParams("Invalid params: repeated key " + quoteEcho(dup.Key) + ": every key may appear once per object")
	default:
		return invalidParams("Invalid params: nested deeper than " + strconv.Itoa(canon.DefaultMaxDepth) + " levels")
	}
}

// checkID refuses a message whose id is longer than Config.Limits.MaxIDBytes: ids
// are echoed in responses and kept while a request runs. The error is
// sent without the id.
func (h *Handler) checkID(m *jsonrpc.Message) *jsonrpc.Error {
	if len(m.ID) <= h.cfg.Limits.MaxIDBytes {
		return nil
	}
	m.ID = nil
	return rpcError(CodeInvalidRequest, "Invalid Request: an id has at most "+strconv.Itoa(h.cfg.Limits.MaxIDBytes)+" bytes")
}

// readableID returns id if it is a valid JSON-RPC id, so that an error
// response can echo it, else nil (sent as null).
func readableID(id json.RawMessage) json.RawMessage {
	if len(id) == 0 || !jsonrpc.ValidID(id) {
		return nil
	}
	return id
}
