package mcphandler

import (
	"bytes"
	"cmp"
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
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcphandler/mcphandler/internal/canon"
	"github.com/mcphandler/mcphandler/internal/jsonrpc"
	"github.com/mcphandler/mcphandler/internal/seal"
	"github.com/mcphandler/mcphandler/session"
)

// Protocol revisions served over Streamable HTTP, newest first.
const (
	Version20251125 = "2025-11-25"
	Version20250618 = "2025-06-18"
	Version20250326 = "2025-03-26"
)

var supportedVersions = []string{Version20251125, Version20250618, Version20250326}

func isSupported(v string) bool { return slices.Contains(supportedVersions, v) }

// Handler serves MCP on one endpoint. Create it with [New]; it is safe for
// concurrent use. With a store shared by replicas, call [Handler.Close]
// when done with it.
type Handler struct {
	cfg        Config
	roleRank   map[string]int
	origins    map[string]bool
	anyOrig    bool
	caps       []byte // the initialize result's capabilities object
	staticInfo []byte // serverInfo when Config.ServerInfo is nil
	keys       *seal.Keys
	macs       *macs        // authenticate what replicas exchange through the store
	ct         confirmTimes // the confirm machinery's periods

	runMu   sync.Mutex         // guards running
	running map[string]running // in-flight requests by session and id
	cancels canceller          // cancellations from other replicas

	bufPool sync.Pool // *bytes.Buffer for request bodies
}

// New returns a Handler for cfg. See [Config] for the defaults. It panics
// if Config.StateKeys holds a key shorter than 32 bytes, or is empty while
// Config.Store is shared by replicas (anything but a [*session.Memory]).
func New(cfg Config) *Handler {
	cfg.applyDefaults()
	h := &Handler{
		cfg:      cfg,
		roleRank: make(map[string]int, len(cfg.Roles)),
		origins:  make(map[string]bool, len(cfg.AllowedOrigins)),
		running:  make(map[string]running),
		ct:       defaultConfirmTimes,
	}
	for i, r := range cfg.Roles {
		h.roleRank[r] = i
	}
	for _, o := range cfg.AllowedOrigins {
		if o == "*" {
			h.anyOrig = true
		}
		h.origins[strings.ToLower(strings.TrimSuffix(o, "/"))] = true
	}
	h.caps = h.capabilities()
	h.staticInfo, _ = json.Marshal(ServerInfo{Name: cfg.Name, Version: cmp.Or(cfg.Version, "0.0.0")})
	secrets := cfg.StateKeys
	if len(secrets) == 0 {
		if h.sharedStore() {
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
	return h
}

// capabilities reflects the hooks that are set. List changes are announced
// through the Notify methods, so every list declares listChanged.
func (h *Handler) capabilities() []byte {
	type listChanged struct {
		ListChanged bool `json:"listChanged"`
	}
	caps := map[string]any{"logging": struct{}{}}
	if h.cfg.ListTools != nil {
		caps["tools"] = listChanged{true}
	}
	if h.hasResources() {
		caps["resources"] = struct {
			Subscribe   bool `json:"subscribe"`
			ListChanged bool `json:"listChanged"`
		}{h.cfg.ReadResource != nil, true}
	}
	if h.cfg.ListPrompts != nil {
		caps["prompts"] = listChanged{true}
	}
	if h.cfg.Complete != nil {
		caps["completions"] = struct{}{}
	}
	b, _ := json.Marshal(caps)
	return b
}

func (h *Handler) logger() *slog.Logger { return h.cfg.Logger }

// ServeHTTP implements [http.Handler] for the Streamable HTTP transport:
// POST carries client messages, GET opens the session's server-to-client
// stream, DELETE ends the session.
//
// See https://modelcontextprotocol.io/specification/2025-11-25/basic/transports.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if status, msg := h.checkOrigin(r); status != 0 {
		writeHTTPError(w, status, jsonrpc.CodeInvalidRequest, msg)
		return
	}
	if origin := r.Header.Get("Origin"); origin != "" {
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
		h.interceptHTTP(w, r, KindStream, h.serveGET) // Config.Interceptors (intercept.go)
	case http.MethodDelete:
		h.interceptHTTP(w, r, KindSessionEnd, h.serveDELETE) // Config.Interceptors (intercept.go)
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
	origin := r.Header.Get("Origin")
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
	if errors.Is(err, ErrAuthUnavailable) {
		w.Header().Set("Retry-After", "5")
		writeHTTPError(w, http.StatusServiceUnavailable, CodeStoreUnavailable, "Service Unavailable: credentials cannot be checked now")
		return Identity{}, false
	}
	status := http.StatusUnauthorized
	if errors.Is(err, ErrForbidden) {
		status = http.StatusForbidden
	}
	challenge := `Bearer realm="mcp"`
	if h.cfg.Challenge != nil {
		challenge = h.cfg.Challenge(r, err)
	}
	if challenge != "" {
		w.Header().Set("WWW-Authenticate", challenge)
	}
	msg := "Unauthorized"
	if status == http.StatusForbidden {
		msg = "Forbidden"
	}
	writeHTTPError(w, status, jsonrpc.CodeInvalidRequest, msg)
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
func writeHTTPError(w http.ResponseWriter, status, code int, msg string) {
	writeRPCError(w, status, nil, &jsonrpc.Error{Code: code, Message: msg})
}

func writeRPCError(w http.ResponseWriter, status int, id json.RawMessage, e *jsonrpc.Error) {
	b := jsonrpc.AppendError(make([]byte, 0, 96), id, e)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

func acceptsAll(r *http.Request, types ...string) bool {
	accept := strings.Join(r.Header.Values("Accept"), ",")
	for _, t := range types {
		if !acceptsType(accept, t) {
			return false
		}
	}
	return true
}

func acceptsType(accept, typ string) bool {
	major, _, _ := strings.Cut(typ, "/")
	for part := range strings.SplitSeq(accept, ",") {
		mt, _, _ := strings.Cut(part, ";")
		mt = strings.ToLower(strings.TrimSpace(mt))
		if mt == typ || mt == "*/*" || mt == major+"/*" {
			return true
		}
	}
	return false
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
	if r.ContentLength > h.cfg.MaxBodyBytes {
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
	bounded := setDeadline != nil && setDeadline(time.Now().Add(h.cfg.ReadBodyTimeout)) == nil
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, h.cfg.MaxBodyBytes))
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
	h       *Handler
	r       *http.Request
	ctx     context.Context
	start   time.Time
	id      Identity
	info    *reqInfo
	sess    *session.Session // nil for initialize and in stateless mode
	version string
	st      *stream
	method  string // the JSON-RPC method being served

	// 2026-07-28 requests: no session; capabilities and log level come
	// from the request's own _meta.
	modern bool
	meta   *requestMeta
	caps   session.Capabilities
	retry  bool // the request carried inputResponses or requestState

	ic *interception // set while Config.Interceptors run (intercept.go)
}

func (h *Handler) servePOST(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	id, ok := h.authenticate(w, r)
	if !ok {
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		writeHTTPError(w, http.StatusUnsupportedMediaType, jsonrpc.CodeInvalidRequest, "Unsupported Media Type: Content-Type must be application/json")
		return
	}
	if !acceptsAll(r, "application/json", "text/event-stream") {
		writeHTTPError(w, http.StatusNotAcceptable, jsonrpc.CodeInvalidRequest, "Not Acceptable: Accept must list application/json and text/event-stream")
		return
	}
	hv := strings.TrimSpace(r.Header.Get("MCP-Protocol-Version"))
	buf, status := h.readBody(w, r)
	if status != 0 {
		bodyError(w, status)
		return
	}
	defer h.releaseBody(buf)
	body := buf.Bytes()
	rq := &request{h: h, r: r, start: start, id: id, version: hv}
	if jsonrpc.IsBatch(body) {
		if isModernVersion(hv) {
			writeHTTPError(w, http.StatusBadRequest, jsonrpc.CodeInvalidRequest, "Invalid Request: batches are not accepted in protocol version "+Version20260728)
			return
		}
		if hv != "" && !isSupported(hv) {
			writeHTTPError(w, http.StatusBadRequest, jsonrpc.CodeInvalidRequest, "Bad Request: unsupported MCP-Protocol-Version "+hv)
			return
		}
		h.serveBatch(w, rq, body)
		return
	}
	var m jsonrpc.Message
	kind, ok := h.decodeMessage(w, body, &m)
	if !ok {
		return
	}
	if isModern, rawMeta, meta := classifyEra(hv, &m); isModern {
		h.serveModern(w, rq, &m, kind, rawMeta, meta)
		return
	}
	if hv != "" && !isSupported(hv) {
		writeHTTPError(w, http.StatusBadRequest, jsonrpc.CodeInvalidRequest, "Bad Request: unsupported MCP-Protocol-Version "+hv)
		return
	}
	if kind == jsonrpc.KindRequest && m.Method == "initialize" {
		rq.st = newStream(w, false, 0)
		h.initialize(rq, &m)
		return
	}
	if !h.resolveSession(w, rq) {
		return
	}
	switch kind {
	case jsonrpc.KindNotification:
		h.notification(rq, &m)
		w.WriteHeader(http.StatusAccepted)
	case jsonrpc.KindResponse:
		if err := h.deliverResponse(rq, &m); err != nil {
			h.refuseResponse(w, err)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	default:
		rq.st = newStream(w, h.primes(rq), h.cfg.SSERetry)
		rq.st.chunk = r.ProtoAtLeast(1, 1)
		if rq.sess != nil {
			rq.st.log = h.eventLog(rq.sess.ID)
		}
		h.serveRequest(rq, &m)
	}
}

// primes reports whether SSE responses to rq start with a priming event:
// for sessions that negotiated 2025-11-25 (whatever version header a
// request carries), and for stateless requests that claim it.
func (h *Handler) primes(rq *request) bool {
	if rq.sess != nil {
		return rq.sess.ProtocolVersion >= Version20251125
	}
	return rq.version >= Version20251125
}

// decodeMessage decodes and validates one JSON-RPC message, answering 400
// when it is not one (-32700, -32600), when its id is longer than
// Config.MaxIDBytes (-32600), or when it has no single meaning (see
// strictMessage).
func (h *Handler) decodeMessage(w http.ResponseWriter, body []byte, m *jsonrpc.Message) (jsonrpc.Kind, bool) {
	if err := jsonrpc.Decode(body, m); err != nil {
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
	if verr == nil {
		verr = strictMessage(body, m)
	}
	if verr != nil {
		writeRPCError(w, http.StatusBadRequest, readableID(m.ID), verr)
		return 0, false
	}
	return kind, true
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
		return &jsonrpc.Error{Code: CodeInvalidRequest, Message: "Invalid Request: repeated member " + strconv.Quote(dup.Key)}
	case dup != nil:
		return invalidParams("Invalid params: repeated key " + strconv.Quote(dup.Key) + ": every key may appear once per object")
	default:
		return invalidParams("Invalid params: nested deeper than " + strconv.Itoa(canon.DefaultMaxDepth) + " levels")
	}
}

// checkID refuses a message whose id is longer than Config.MaxIDBytes: ids
// are echoed in responses and kept while a request runs. The error is
// sent without the id.
func (h *Handler) checkID(m *jsonrpc.Message) *jsonrpc.Error {
	if len(m.ID) <= h.cfg.MaxIDBytes {
		return nil
	}
	m.ID = nil
	return &jsonrpc.Error{Code: CodeInvalidRequest, Message: "Invalid Request: an id has at most " + strconv.Itoa(h.cfg.MaxIDBytes) + " bytes"}
}

// readableID returns id if it is a valid JSON-RPC id, so that an error
// response can echo it, else nil (sent as null).
func readableID(id json.RawMessage) json.RawMessage {
	if len(id) == 0 || !jsonrpc.ValidID(id) {
		return nil
	}
	return id
}

// resolveSession finds the request's session (or, in stateless mode, only
// settles the protocol version) and sets rq.version to the session's. It
// writes 400 (a version header that contradicts the session), 404 or 503
// and returns false when the request cannot go on.
func (h *Handler) resolveSession(w http.ResponseWriter, rq *request) bool {
	if h.cfg.Stateless {
		if rq.version == "" {
			rq.version = Version20250326
		}
		return true
	}
	sid := rq.r.Header.Get("Mcp-Session-Id")
	if sid == "" {
		writeHTTPError(w, http.StatusBadRequest, jsonrpc.CodeInvalidRequest, "Bad Request: Mcp-Session-Id header is required")
		return false
	}
	s, err := h.cfg.Store.Get(rq.r.Context(), sid)
	if err == nil && s.Owner != rq.id.key() {
		err = session.ErrNotFound
	}
	switch {
	case errors.Is(err, session.ErrNotFound):
		writeHTTPError(w, http.StatusNotFound, jsonrpc.CodeInvalidRequest, "Not Found: unknown or expired session")
		return false
	case err != nil:
		h.storeUnavailable(w, err)
		return false
	}
	// The version negotiated at initialize decides everything a revision
	// changes (batches, priming events, elicitation formats). Clients must
	// repeat it in MCP-Protocol-Version; a header naming another revision
	// is refused rather than obeyed or ignored.
	if rq.version != "" && rq.version != s.ProtocolVersion {
		writeHTTPError(w, http.StatusBadRequest, jsonrpc.CodeInvalidRequest,
			"Bad Request: MCP-Protocol-Version "+rq.version+" is not the session's negotiated version "+s.ProtocolVersion)
		return false
	}
	rq.sess = s
	rq.version = s.ProtocolVersion
	return true
}

// serveBatch answers a JSON-RPC batch, which only 2025-03-26 allows. Each
// member is served in turn and the responses are sent as one JSON array;
// members cannot ask the client anything.
func (h *Handler) serveBatch(w http.ResponseWriter, rq *request, body []byte) {
	elems, err := jsonrpc.DecodeBatch(body)
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		writeHTTPError(w, http.StatusBadRequest, jsonrpc.CodeParseError, "Parse error")
		return
	}
	if rq.r.Header.Get("Mcp-Session-Id") == "" && !h.cfg.Stateless {
		writeHTTPError(w, http.StatusBadRequest, jsonrpc.CodeInvalidRequest, "Invalid Request: batches are not supported")
		return
	}
	if !h.resolveSession(w, rq) {
		return
	}
	if rq.version != Version20250326 {
		writeHTTPError(w, http.StatusBadRequest, jsonrpc.CodeInvalidRequest, "Invalid Request: batches are only allowed in protocol version 2025-03-26")
		return
	}
	if err != nil || len(elems) == 0 {
		writeHTTPError(w, http.StatusBadRequest, jsonrpc.CodeInvalidRequest, "Invalid Request: empty or malformed batch")
		return
	}
	out := []byte{'['}
	n := 0
	for _, e := range elems {
		var m jsonrpc.Message
		var resp []byte
		if err := jsonrpc.Decode(e, &m); err != nil {
			resp = jsonrpc.AppendError(nil, nil, &jsonrpc.Error{Code: CodeInvalidRequest, Message: "Invalid Request"})
		} else if kind, verr := m.Validate(); verr != nil {
			resp = jsonrpc.AppendError(nil, readableID(m.ID), verr)
		} else if verr := h.checkID(&m); verr != nil {
			resp = jsonrpc.AppendError(nil, nil, verr)
		} else if verr := strictMessage(e, &m); verr != nil {
			resp = jsonrpc.AppendError(nil, readableID(m.ID), verr)
		} else {
			switch kind {
			case jsonrpc.KindNotification:
				h.notification(rq, &m)
			case jsonrpc.KindResponse:
				h.deliverResponse(rq, &m)
			default:
				if m.Method == "initialize" {
					resp = jsonrpc.AppendError(nil, m.ID, &jsonrpc.Error{Code: CodeInvalidRequest, Message: "Invalid Request: initialize cannot be batched"})
					break
				}
				rec := &batchWriter{header: http.Header{}}
				sub := *rq
				sub.st = newStream(rec, false, 0)
				sub.st.noSSE = true
				h.serveRequest(&sub, &m)
				resp = rec.body.Bytes()
			}
		}
		if len(resp) > 0 {
			if n > 0 {
				out = append(out, ',')
			}
			out = append(out, resp...)
			n++
		}
	}
	if n == 0 {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	out = append(out, ']')
	w.Header().Set("Content-Type", "application/json")
	w.Write(out)
}

// batchWriter collects one batch member's response.
type batchWriter struct {
	header http.Header
	body   bytes.Buffer
}

func (b *batchWriter) Header() http.Header         { return b.header }
func (b *batchWriter) Write(p []byte) (int, error) { return b.body.Write(p) }
func (b *batchWriter) WriteHeader(int)             {}

// errNotWaiting reports a response nobody waits for.
var errNotWaiting = errors.New("mcphandler: no request is waiting for this response")

// deliverResponse hands a client's response to the server request waiting
// for it, on whichever replica it waits. It returns errNotWaiting for a
// response nobody waits for (unknown, answered, or timed-out id), and the
// store's error when the store cannot be reached. An answer to a confirm
// is accepted once only, from the identity and session it was asked of
// (see answerConfirm).
func (h *Handler) deliverResponse(rq *request, m *jsonrpc.Message) error {
	if rq.sess == nil {
		return errNotWaiting
	}
	var id string
	if err := json.Unmarshal(m.ID, &id); err != nil || !strings.HasPrefix(id, "mcph") {
		return errNotWaiting
	}
	if isConfirmID(id) {
		return h.interceptAnswer(rq, id, m, h.answerConfirm) // Config.Interceptors (intercept.go)
	}
	resp := jsonrpc.AppendResult(nil, m.ID, m.Result)
	if m.Error != nil {
		resp = jsonrpc.AppendError(nil, m.ID, m.Error)
	}
	b, _ := json.Marshal(reply{Role: rq.id.Role, Msg: resp})
	n, err := h.publish(rq.r.Context(), h.macs.reply, replyChannel(rq.sess.ID, id), b)
	if err != nil {
		return err
	}
	if n == 0 {
		return errNotWaiting
	}
	return nil
}

// refuseResponse answers a client's response that was not delivered: 400
// when nobody waits for it, 503 when the store cannot tell.
func (h *Handler) refuseResponse(w http.ResponseWriter, err error) {
	if errors.Is(err, errNotWaiting) {
		writeHTTPError(w, http.StatusBadRequest, jsonrpc.CodeInvalidRequest, "Bad Request: no request is waiting for this response")
		return
	}
	h.storeUnavailable(w, err)
}

// serveGET opens the session's server-to-client SSE stream. One stream per
// session is served at a time on a replica; a second one gets 409.
func (h *Handler) serveGET(w http.ResponseWriter, r *http.Request) {
	if h.cfg.Stateless || isModernVersion(strings.TrimSpace(r.Header.Get("MCP-Protocol-Version"))) {
		w.Header().Set("Allow", "POST")
		writeHTTPError(w, http.StatusMethodNotAllowed, jsonrpc.CodeInvalidRequest, "Method not allowed: the server is stateless")
		return
	}
	id, ok := h.authenticate(w, r)
	if !ok {
		return
	}
	if !acceptsAll(r, "text/event-stream") {
		writeHTTPError(w, http.StatusNotAcceptable, jsonrpc.CodeInvalidRequest, "Not Acceptable: Accept must list text/event-stream")
		return
	}
	hv := strings.TrimSpace(r.Header.Get("MCP-Protocol-Version"))
	if hv != "" && !isSupported(hv) {
		writeHTTPError(w, http.StatusBadRequest, jsonrpc.CodeInvalidRequest, "Bad Request: unsupported MCP-Protocol-Version "+hv)
		return
	}
	rq := &request{h: h, r: r, id: id, version: hv}
	if !h.resolveSession(w, rq) {
		return
	}
	// The stream lives while its caller stays who it was (see callerContext).
	ctx, cancel := h.callerContext(r, id)
	defer cancel()
	r = r.WithContext(ctx)
	rq.r = r
	sid := rq.sess.ID
	if last := r.Header.Get("Last-Event-ID"); last != "" && h.resume(w, rq, last) {
		return
	}
	// One standalone stream per session, across replicas: each message
	// must go on exactly one stream. The claim lives in the store and is
	// renewed with every keep-alive; a dead holder's lapses after two.
	claim, claimTTL := []byte(randText()), 2*h.cfg.KeepAlive
	ok, err := h.cfg.Store.PutIfAbsent(r.Context(), getStreamKey(sid), claim, claimTTL)
	switch {
	case err != nil:
		h.storeUnavailable(w, err)
		return
	case !ok:
		writeHTTPError(w, http.StatusConflict, jsonrpc.CodeInvalidRequest, "Conflict: only one GET stream per session is allowed")
		return
	}
	defer h.cfg.Store.CompareAndSwap(context.WithoutCancel(r.Context()), getStreamKey(sid), claim, nil, time.Millisecond)
	sub, err := h.cfg.Store.Subscribe(r.Context(), sessionChannel(sid))
	if err != nil {
		h.storeUnavailable(w, err)
		return
	}
	defer sub.Close()
	changes, err := h.cfg.Store.Subscribe(r.Context(), notifyChannel)
	if err != nil {
		h.storeUnavailable(w, err)
		return
	}
	defer changes.Close()
	subscribed := func(uri string) bool {
		s, err := h.cfg.Store.Get(r.Context(), sid)
		return err == nil && indexOf(s.Subscriptions, uri) >= 0
	}
	st := newStream(w, h.primes(rq), h.cfg.SSERetry)
	st.id = "g" + randText()
	st.mu.Lock()
	err = st.startSSELocked()
	st.mu.Unlock()
	if err != nil {
		return
	}
	tick := time.NewTicker(h.cfg.KeepAlive)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
			if st.comment() != nil {
				return
			}
			if ok, err := h.cfg.Store.CompareAndSwap(r.Context(), getStreamKey(sid), claim, claim, claimTTL); err == nil && !ok {
				return // the claim lapsed and another stream took over
			}
		case b, ok := <-sub.C():
			if !ok {
				return
			}
			if msg, ok := h.openSession(sid, b); ok && (bytes.Equal(msg, sessionEnded) || st.send(msg) != nil) {
				return
			}
		case c, ok := <-changes.C():
			if !ok {
				return
			}
			if msg := h.changeMessage(c, id, subscribed); msg != nil && st.send(msg) != nil {
				return
			}
		}
	}
}

// getStreamKey names the claim of a session's standalone GET stream.
func getStreamKey(sid string) string { return "getstream/" + sid }

// sessionChannel carries messages for a session's GET stream.
func sessionChannel(sid string) string { return "session/" + sid }

// sessionEnded, published on a session's channel, closes its GET streams.
var sessionEnded = []byte("\x00ended")

// serveDELETE ends the session: later requests with its id get 404 on every
// replica, and its open GET streams end.
func (h *Handler) serveDELETE(w http.ResponseWriter, r *http.Request) {
	if h.cfg.Stateless || isModernVersion(strings.TrimSpace(r.Header.Get("MCP-Protocol-Version"))) {
		w.Header().Set("Allow", "POST")
		writeHTTPError(w, http.StatusMethodNotAllowed, jsonrpc.CodeInvalidRequest, "Method not allowed: the server is stateless")
		return
	}
	id, ok := h.authenticate(w, r)
	if !ok {
		return
	}
	rq := &request{h: h, r: r, id: id, version: strings.TrimSpace(r.Header.Get("MCP-Protocol-Version"))}
	if !h.resolveSession(w, rq) {
		return
	}
	if err := h.cfg.Store.Delete(r.Context(), rq.sess.ID); err != nil {
		h.storeUnavailable(w, err)
		return
	}
	h.publishSession(r.Context(), rq.sess.ID, sessionEnded)
	w.WriteHeader(http.StatusNoContent)
}
