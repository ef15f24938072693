package mcphandler

import (
	"encoding/json"

	"github.com/mcphandler/mcphandler/internal/jsonrpc"
)

// era is what differs between the protocol eras a request can arrive in;
// everything else (method dispatch, gates, tool lookup, the call pipeline,
// Exchange) is shared and knows no era. Each era implements it once:
//
//	sessionsEra   transport_sessions.go   2025 Streamable HTTP (2025-03-26 … 2025-11-25)
//	statelessEra  transport_stateless.go  2026-07-28, no sessions
//	legacyEra     transport_legacy.go     2024-11-05 HTTP+SSE
//
// A new revision that changes any of these gets its own implementation
// and file; one that does not reuses its predecessor's.
type era interface {
	// methods is the era's dispatch table (see dispatch.go).
	methods() map[string]method
	// decorate appends the era's members at the start of a result object
	// (after its opening brace).
	decorate(rq *request, dst []byte) []byte
	// errorStatus sets the HTTP status of a JSON error answer with code.
	errorStatus(rq *request, code Code)
	// progressToken is the request's progress token, to bound it.
	progressToken(rq *request, m *jsonrpc.Message) json.RawMessage
	// exchange sets what the era decides of a request's Exchange: the
	// client's capabilities and log level, the progress token (meta is the
	// params' _meta), when the client is gone, and how it is asked.
	exchange(rq *request, x *Exchange, meta json.RawMessage)
	// checkCall checks a tools/call of t beyond what every era checks (the
	// 2026-07-28 Mcp-Param headers); nil lets it go on.
	checkCall(rq *request, t *Tool, args []byte) *jsonrpc.Error
	// codeResourceNotFound is the code of an unknown resource.
	codeResourceNotFound() Code
	// rounds opens the multi round-trip state of a request that may ask
	// the client (tools/call, prompts/get, resources/read). It answers
	// the request and returns false when the state does not open.
	rounds(rq *request, x *Exchange, m *jsonrpc.Message, name string, args []byte) bool
}

// The shared path calls the era through these methods, which switch on
// its concrete type: an interface call would move the request (and a
// tools/call's event) to the heap on every request, since the compiler
// cannot see that no era keeps them. Each case is the same call.

func (rq *request) decorate(dst []byte) []byte {
	switch e := rq.era.(type) {
	case sessionsEra:
		return e.decorate(rq, dst)
	case legacyEra:
		return e.decorate(rq, dst)
	case statelessEra:
		return e.decorate(rq, dst)
	}
	panic(errNoEra)
}

func (rq *request) errorStatus(code Code) {
	switch e := rq.era.(type) {
	case sessionsEra:
		e.errorStatus(rq, code)
	case legacyEra:
		e.errorStatus(rq, code)
	case statelessEra:
		e.errorStatus(rq, code)
	default:
		panic(errNoEra)
	}
}

func (rq *request) progressToken(m *jsonrpc.Message) json.RawMessage {
	switch e := rq.era.(type) {
	case sessionsEra:
		return e.progressToken(rq, m)
	case legacyEra:
		return e.progressToken(rq, m)
	case statelessEra:
		return e.progressToken(rq, m)
	}
	panic(errNoEra)
}

func (rq *request) setupExchange(x *Exchange, meta json.RawMessage) {
	switch e := rq.era.(type) {
	case sessionsEra:
		e.exchange(rq, x, meta)
	case legacyEra:
		e.exchange(rq, x, meta)
	case statelessEra:
		e.exchange(rq, x, meta)
	default:
		panic(errNoEra)
	}
}

func (rq *request) checkCall(t *Tool, args []byte) *jsonrpc.Error {
	switch e := rq.era.(type) {
	case sessionsEra:
		return e.checkCall(rq, t, args)
	case legacyEra:
		return e.checkCall(rq, t, args)
	case statelessEra:
		return e.checkCall(rq, t, args)
	}
	panic(errNoEra)
}

// prepareRounds opens rq's round state, if its era has rounds.
func (rq *request) prepareRounds(x *Exchange, m *jsonrpc.Message, name string, args []byte) bool {
	switch e := rq.era.(type) {
	case sessionsEra:
		return e.rounds(rq, x, m, name, args)
	case legacyEra:
		return e.rounds(rq, x, m, name, args)
	case statelessEra:
		return e.rounds(rq, x, m, name, args)
	}
	panic(errNoEra)
}

// errNoEra reports a request built without its era: a bug.
var errNoEra = "mcphandler: a request without an era"

// The eras, as values: they hold no state.
var (
	eraSessions  era = sessionsEra{}
	eraStateless era = statelessEra{}
	eraLegacy    era = legacyEra{}
)
