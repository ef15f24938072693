package mcphandler

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/mcphandler/mcphandler/internal/jsonrpc"
	"github.com/mcphandler/mcphandler/internal/mcpheaders"
	"github.com/mcphandler/mcphandler/session"
)

// Version20260728 is the stateless revision: no initialize, no sessions;
// every request carries its version and client capabilities in _meta.
//
// See https://modelcontextprotocol.io/specification/2026-07-28/basic/versioning.
const Version20260728 = "2026-07-28"

// Error codes of the 2026-07-28 revision.
const (
	CodeHeaderMismatch             Code = -32020 // a header is missing or disagrees with the body
	CodeMissingClientCapability    Code = -32021 // the request needs a capability it did not declare
	CodeUnsupportedProtocolVersion Code = -32022 // the version is not served
)

// Reserved _meta keys of 2026-07-28 requests and results.
const (
	metaProtocolVersion = "io.modelcontextprotocol/protocolVersion"
	metaClientCaps      = "io.modelcontextprotocol/clientCapabilities"
	metaLogLevel        = "io.modelcontextprotocol/logLevel"
	metaServerInfo      = "io.modelcontextprotocol/serverInfo"
	metaSubscriptionID  = "io.modelcontextprotocol/subscriptionId"
)

// discoverVersions are the versions server/discover and -32022 name:
// 2026-07-28 first, then the 2025 revisions a client may fall back to.
var discoverVersions = []string{Version20260728, Version20251125, Version20250618, Version20250326}

// isSessionsOrLegacyVersion reports whether v is a revision of the eras
// with sessions: 2024-11-05 or a 2025 one.
func isSessionsOrLegacyVersion(v string) bool { return v == "2024-11-05" || isSupported(v) }

// isStatelessVersion reports whether a version string selects the stateless
// path: any version that is not one of the eras with sessions and sorts at
// or after 2026-07-28, as the SDKs compare.
func isStatelessVersion(v string) bool {
	return v != "" && !isSessionsOrLegacyVersion(v) && v >= Version20260728
}

// requestMeta is the _meta of a 2026-07-28 request.
type requestMeta struct {
	ProtocolVersion    *string         `json:"io.modelcontextprotocol/protocolVersion"`
	ClientCapabilities json.RawMessage `json:"io.modelcontextprotocol/clientCapabilities"`
	LogLevel           *LogLevel       `json:"io.modelcontextprotocol/logLevel"`
	ProgressToken      json.RawMessage `json:"progressToken"`

	params paramsIndex // the request's params, walked once (params_index.go)
}

// statelessMeta extracts the version claim of a request, reading _meta only
// when the body mentions the key at all (2025 requests never do).
func statelessMeta(params json.RawMessage) (raw json.RawMessage, meta *requestMeta, ok bool) {
	if !containsKey(params, metaProtocolVersion) {
		return nil, nil, false
	}
	m := &requestMeta{}
	indexParams(params, &m.params)
	if raw = m.params.meta; len(raw) == 0 || raw[0] != '{' {
		return nil, nil, false
	}
	if !m.decode(raw) || m.ProtocolVersion == nil {
		return nil, nil, false
	}
	return raw, m, true
}

// decode reads the members of _meta into m as json.Unmarshal would (see
// jsonrpc.Members), and reports whether it would succeed.
func (m *requestMeta) decode(raw []byte) bool {
	ok := true
	str := func(v []byte) (*string, bool) {
		if string(v) == "null" {
			return nil, true
		}
		s, ok := jsonrpc.String(v)
		return &s, ok
	}
	jsonrpc.Members(raw, func(k, v []byte) bool {
		switch jsonrpc.KeyIndex(k, metaProtocolVersion, metaClientCaps, metaLogLevel, "progressToken") {
		case 0:
			m.ProtocolVersion, ok = str(v)
		case 1:
			m.ClientCapabilities = v
		case 2:
			var l *string
			l, ok = str(v)
			m.LogLevel = (*LogLevel)(l)
		case 3:
			m.ProgressToken = v
		}
		return ok
	})
	return ok
}

// classifyEra decides whether a POSTed message is a 2026-07-28 request: its
// _meta claims a version that is not a 2025 one, or its header names one.
func classifyEra(hv string, m *jsonrpc.Message) (bool, json.RawMessage, *requestMeta) {
	raw, meta, ok := statelessMeta(m.Params)
	if ok && !isSessionsOrLegacyVersion(*meta.ProtocolVersion) {
		return true, raw, meta
	}
	if isStatelessVersion(hv) {
		if ok {
			return true, raw, meta
		}
		return true, nil, nil
	}
	return false, nil, nil
}

// statelessStatus is the HTTP status of a JSON-RPC error on the stateless path.
func statelessStatus(code Code) int {
	switch code {
	case CodeMethodNotFound:
		return http.StatusNotFound
	case CodeInvalidParams, CodeInvalidRequest, CodeParseError, CodeHeaderMismatch,
		CodeMissingClientCapability, CodeUnsupportedProtocolVersion:
		return http.StatusBadRequest
	case CodeStoreUnavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusOK
}

// serveStateless serves one 2026-07-28 message: the checks of the spec in
// its order, then the same methods as the 2025 path, statelessly.
//
// See https://modelcontextprotocol.io/specification/2026-07-28/basic/transports/streamable-http.
func (h *Handler) serveStateless(w http.ResponseWriter, rq *request, m *jsonrpc.Message, kind jsonrpc.Kind, rawMeta json.RawMessage, meta *requestMeta) {
	if kind == jsonrpc.KindResponse {
		writeRPCError(w, http.StatusBadRequest, m.ID, rpcError(CodeInvalidRequest, "Invalid Request: responses are not accepted in protocol version "+Version20260728))
		return
	}
	if kind == jsonrpc.KindNotification {
		w.WriteHeader(http.StatusAccepted) // 2026-07-28 defines no client notifications over HTTP
		return
	}
	if status, e := checkStateless(rq.r.Header, m, meta); e != nil {
		writeRPCError(w, status, m.ID, e)
		return
	}
	rq.era = eraStateless
	rq.version = Version20260728
	rq.meta = meta
	rq.caps = parseCaps(meta.ClientCapabilities)
	rq.st = newStream(w, false, 0)
	rq.info = &reqInfo{identity: rq.id, request: rq.r, version: rq.version, meta: rawMeta, caps: rq.caps}
	h.serveRequest(rq, m)
}

// checkStateless makes the checks of a 2026-07-28 request, in the spec's
// order: the version header and _meta, the standard headers, removed
// methods, the log level. It returns the HTTP status and error of the
// first that fails, or a nil error.
func checkStateless(hdr http.Header, m *jsonrpc.Message, meta *requestMeta) (int, *jsonrpc.Error) {
	hv := strings.TrimSpace(hdr.Get(hdrProtocolVersion))
	switch {
	case hv == "":
		return http.StatusBadRequest, headerMismatch("Header mismatch: MCP-Protocol-Version header is required")
	case meta == nil:
		return http.StatusBadRequest, invalidParams("Invalid params: _meta with " + metaProtocolVersion + " and " + metaClientCaps + " is required")
	case len(meta.ClientCapabilities) == 0 || meta.ClientCapabilities[0] != '{':
		return http.StatusBadRequest, invalidParams("Invalid params: _meta." + metaClientCaps + " is required")
	case hv != *meta.ProtocolVersion:
		return http.StatusBadRequest, headerMismatch("Header mismatch: MCP-Protocol-Version header '" + clipEcho(hv) + "' does not match body '" + clipEcho(*meta.ProtocolVersion) + "'")
	case *meta.ProtocolVersion != Version20260728:
		data, _ := json.Marshal(map[string]any{"supported": discoverVersions, "requested": clipEcho(*meta.ProtocolVersion)})
		return http.StatusBadRequest, rpcErrorData(CodeUnsupportedProtocolVersion, "Unsupported protocol version", data)
	}
	name, hasName := "", false
	if namedMethods[m.Method] {
		name, hasName = meta.params.name.last, true
		if m.Method == "resources/read" {
			name = meta.params.uri.last
		}
	}
	if he := mcpheaders.CheckStandardHeaders(hdr, m.Method, name, hasName); he != nil {
		return http.StatusBadRequest, headerMismatch(he.Message)
	}
	if removedMethods[m.Method] {
		return http.StatusNotFound, methodNotFound(m.Method)
	}
	if meta.LogLevel != nil {
		if _, ok := logLevels[*meta.LogLevel]; !ok {
			return http.StatusBadRequest, invalidParams("Invalid params: unknown log level " + quoteEcho(string(*meta.LogLevel)))
		}
	}
	return 0, nil
}

// clientCaps is the shape of ClientCapabilities the handler reads, in
// initialize (2025) and in each request's _meta (2026-07-28).
type clientCaps struct {
	Elicitation *struct {
		Form *struct{} `json:"form"`
		URL  *struct{} `json:"url"`
	} `json:"elicitation"`
	Sampling *struct {
		Tools *struct{} `json:"tools"`
	} `json:"sampling"`
	Roots *struct {
		ListChanged bool `json:"listChanged"`
	} `json:"roots"`
	Extensions map[string]json.RawMessage `json:"extensions"`
}

func (pc *clientCaps) flags() session.Capabilities {
	var c session.Capabilities
	if e := pc.Elicitation; e != nil {
		if e.Form != nil || e.URL == nil {
			c |= session.CapElicitationForm
		}
		if e.URL != nil {
			c |= session.CapElicitationURL
		}
	}
	if s := pc.Sampling; s != nil {
		c |= session.CapSampling
		if s.Tools != nil {
			c |= session.CapSamplingTools
		}
	}
	if r := pc.Roots; r != nil {
		c |= session.CapRoots
		if r.ListChanged {
			c |= session.CapRootsListChanged
		}
	}
	if declaresApps(pc.Extensions) {
		c |= session.CapUIApps
	}
	return c
}

func parseCaps(raw json.RawMessage) session.Capabilities {
	if string(raw) == "{}" {
		return 0 // the usual case: nothing to read
	}
	var pc clientCaps
	json.Unmarshal(raw, &pc)
	return pc.flags()
}

// decorateStateless inserts the 2026-07-28 result members (resultType, cache hints,
// serverInfo, then the _meta members of AddListMeta) at the start of a result object. Results of a request that
// carried inputResponses or requestState are never cacheable.
func (rq *request) decorateStateless(dst []byte, method string) []byte {
	dst = append(dst, `"resultType":"complete",`...)
	if cacheable[method] && !rq.retry {
		dst = append(dst, `"ttlMs":`...)
		dst = strconv.AppendInt(dst, rq.listTTL(rq.h.cfg.CacheTTL).Milliseconds(), 10)
		// Lists and contents are resolved per caller: never "public".
		dst = append(dst, `,"cacheScope":"private",`...)
	}
	dst = append(dst, `"_meta":{"`+metaServerInfo+`":`...)
	dst = append(dst, rq.h.caps.serverInfoJSON(rq)...)
	if m := rq.listMeta(); m != nil { // AddListMeta's members
		dst = append(dst, ',')
		dst = append(dst, m...)
	}
	return append(dst, "},"...)
}

// statelessEra is the era seam for 2026-07-28: no session; capabilities,
// log level and progress token come from each request's _meta; results
// are decorated; questions and confirms travel in input_required rounds.
type statelessEra struct{}

func (statelessEra) methods() map[string]method { return statelessMethods }

func (statelessEra) decorate(rq *request, dst []byte) []byte {
	return rq.decorateStateless(dst, rq.method)
}

func (statelessEra) errorStatus(rq *request, code Code) { rq.st.status = statelessStatus(code) }

func (statelessEra) codeResourceNotFound() Code { return CodeInvalidParams }

// progressToken: _meta was read to classify the request.
func (statelessEra) progressToken(rq *request, _ *jsonrpc.Message) json.RawMessage {
	return rq.meta.ProgressToken
}

func (statelessEra) exchange(rq *request, x *Exchange, _ json.RawMessage) {
	x.gone = rq.context().Done()
	x.caps = rq.caps
	if rq.meta.LogLevel != nil {
		x.logLevel = *rq.meta.LogLevel
	}
	x.progressToken = rq.meta.ProgressToken
}

func (statelessEra) checkCall(rq *request, t *Tool, args []byte) *jsonrpc.Error {
	if t.input == nil {
		return nil
	}
	if he := mcpheaders.CheckParamHeaders(rq.r.Header, t.input.headers, args); he != nil {
		return headerMismatch(he.Message)
	}
	return nil
}

// rounds opens the request's multi round-trip state (stateless_rounds.go).
func (statelessEra) rounds(rq *request, x *Exchange, m *jsonrpc.Message, name string, args []byte) bool {
	return rq.openRounds(x, m, name, args)
}
