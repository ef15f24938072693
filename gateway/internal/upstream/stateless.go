package upstream

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/mcphandler/mcphandler/internal/jsonrpc"
)

// statelessVersion is the revision of the Stateless era.
const statelessVersion = "2026-07-28"

// stateless speaks 2026-07-28 for one operation: each request stands
// alone, carrying the version, the client's capabilities and info in
// _meta and the headers the revision requires (see
// https://modelcontextprotocol.io/specification/2026-07-28/basic/transports/streamable-http).
// Closing a request's connection is its cancellation: nothing is left
// open upstream when an operation ends. It is used by one goroutine.
type stateless struct {
	c      *call
	nextID int
	param  http.Header // the Mcp-Param-* headers of tools/call (params.go)
}

// request sends one request and returns its result: its resultType must
// be "complete" (or absent), or "input_required" for tools/call, which
// the caller drives (rounds).
func (s *stateless) request(ctx context.Context, method string, params []member, name string) ([]byte, error) {
	id, in, err := s.open(ctx, method, params, name)
	if err != nil {
		return nil, err
	}
	defer in.close()
	for {
		m, err := in.next()
		if err == io.EOF || err == errIncomplete {
			return nil, fmt.Errorf("%w: the answer to %s ended without its response", ErrMalformed, method)
		}
		if err != nil {
			return nil, err
		}
		res, done, err := s.c.handle(ctx, &m, id, nil)
		if err != nil {
			return nil, err
		}
		if done {
			return res, checkResultType(res, method)
		}
	}
}

// open POSTs one request, with the _meta and headers the revision
// requires, and returns its id and the reader of its answer (checked:
// 2xx, JSON or SSE, within MaxResponseBytes), which the caller closes.
func (s *stateless) open(ctx context.Context, method string, params []member, name string) ([]byte, *inbox, error) {
	ep := s.c.ep
	var level []byte
	if ep.logLevel != "" {
		level = str(ep.logLevel)
	}
	body := s.c.withMeta(params,
		member{reservedMeta + "protocolVersion", str(statelessVersion)},
		member{reservedMeta + "clientCapabilities", s.c.caps.raw},
		member{reservedMeta + "clientInfo", ep.clientInfo},
		member{reservedMeta + "logLevel", level},
		s.c.progressMeta(method),
	)
	s.nextID++
	id := []byte(itoa(s.nextID))
	op := "POST " + method
	resp, err := ep.send(ctx, op, http.MethodPost, ep.url.String(), jsonrpc.AppendRequest(nil, id, method, body), func(h http.Header) {
		h.Set("MCP-Protocol-Version", statelessVersion)
		h.Set("Mcp-Method", method)
		if name != "" {
			h.Set("Mcp-Name", headerValue(name))
		}
		if method == "tools/call" {
			for k, vs := range s.param {
				h[k] = vs
			}
		}
	})
	if err != nil {
		return nil, nil, err
	}
	left := ep.max
	in, err := ep.openInbox(ctx, op, resp, &left)
	if err != nil {
		return nil, nil, err
	}
	return id, in, nil
}

// resultType returns a result's resultType ("" when absent, as from a
// server of an older revision).
func resultType(res []byte) string {
	t, _ := jsonrpc.String(memberValue(res, "resultType"))
	return t
}

// checkResultType refuses a resultType this package does not know, and
// input_required for anything but tools/call (the spec allows it for
// tools/call, prompts/get and resources/read only; this package sends no
// other of them).
func checkResultType(res []byte, method string) error {
	switch t := resultType(res); t {
	case "", "complete":
		return nil
	case "input_required":
		if method == "tools/call" {
			return nil
		}
	}
	return fmt.Errorf("%w: %s answered with resultType %q", ErrMalformed, method, cutText(resultType(res)))
}

// InputRequest is one of the inputRequests of a Stateless upstream's
// input_required answer, as the upstream sent it.
type InputRequest struct {
	// Key is its key in inputRequests (and in the inputResponses that
	// answer it).
	Key string
	// Method is elicitation/create, sampling/createMessage or roots/list,
	// one the client's capabilities declare.
	Method string
	// Params is its params object as sent, or nil.
	Params json.RawMessage
}

// InputRequired is a Stateless upstream's input_required answer to
// tools/call that asks the client something (see [CallToolRound]).
type InputRequired struct {
	// Requests are its inputRequests, in the order of their keys: at
	// least one, at most 64.
	Requests []InputRequest
	// State is its requestState, the JSON string exactly as sent (at most
	// 1 MiB), to echo byte for byte; nil when it sent none.
	State json.RawMessage
}

// parseInputRequired reads an input_required result (a JSON object): its
// requestState, a JSON string of at most maxRequestState bytes, and its
// inputRequests, each an object whose method the client's capabilities
// declare and whose params, if any, are an object. A result with neither
// is ErrMalformed; one with a state and no requests (load shedding) has
// no Requests. It is the one reader of what an upstream asks in a round.
func parseInputRequired(res []byte, caps clientCaps) (InputRequired, error) {
	var ir InputRequired
	m := members(res)
	if st, ok := m["requestState"]; ok {
		if _, isStr := jsonrpc.String(st); !isStr || len(st) > maxRequestState {
			return ir, fmt.Errorf("%w: a requestState that is not a string of at most %d bytes", ErrMalformed, maxRequestState)
		}
		ir.State = st
	}
	reqs, ok := m["inputRequests"]
	if ok && string(reqs) != "null" && !isObjectBytes(reqs) {
		return ir, fmt.Errorf("%w: inputRequests is not an object", ErrMalformed)
	}
	var byKey map[string]json.RawMessage
	if ok && string(reqs) != "null" {
		byKey = members(reqs)
	}
	if len(byKey) == 0 && ir.State == nil {
		return ir, fmt.Errorf("%w: input_required without inputRequests or requestState", ErrMalformed)
	}
	if len(byKey) > maxAsks {
		return ir, fmt.Errorf("%w: more than %d input requests in one call", ErrTooMany, maxAsks)
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		r := byKey[k]
		if !isObjectBytes(r) {
			return ir, fmt.Errorf("%w: an input request that is not an object", ErrMalformed)
		}
		rm := members(r)
		method, _ := jsonrpc.String(rm["method"])
		if !caps.allows(method) {
			return ir, fmt.Errorf("%w: an input request %q the client did not declare it answers", ErrMalformed, cutText(method))
		}
		params := rm["params"]
		if len(params) > 0 && string(params) != "null" && !isObjectBytes(params) {
			return ir, fmt.Errorf("%w: input request params that are not an object", ErrMalformed)
		}
		if string(params) == "null" {
			params = nil
		}
		ir.Requests = append(ir.Requests, InputRequest{Key: k, Method: method, Params: params})
	}
	return ir, nil
}

// inputResponses answers an input_required result: each of its
// inputRequests (parseInputRequired) goes to the Asker, in the order of
// their keys. It returns the inputResponses object (nil when there were
// no requests) and the requestState to echo, byte for byte (nil when there
// was none). An error of the Asker ends the call: 2026-07-28 has no error
// answer to an input request.
func (c *call) inputResponses(ctx context.Context, res []byte) (responses, state []byte, err error) {
	ir, err := parseInputRequired(res, c.caps)
	if err != nil {
		return nil, nil, err
	}
	if len(ir.Requests) == 0 {
		return nil, ir.State, nil // load shedding: retry with the state alone
	}
	if c.ask == nil {
		return nil, nil, errors.New("upstream: the upstream asks the client a question, and the call has no Asker")
	}
	if c.asks += len(ir.Requests); c.asks > maxAsks {
		return nil, nil, fmt.Errorf("%w: more than %d input requests in one call", ErrTooMany, maxAsks)
	}
	answers := make([]member, 0, len(ir.Requests))
	for _, r := range ir.Requests {
		a, err := c.askClient(ctx, r.Method, r.Params)
		if err != nil {
			if ctx.Err() != nil {
				return nil, nil, ctxErr(ctx)
			}
			return nil, nil, err
		}
		answers = append(answers, member{r.Key, a})
	}
	return object(answers...), ir.State, nil
}

// headerValue encodes a value for an Mcp-Name (or Mcp-Param-*) header as
// the revision requires: as it is when it is visible ASCII without
// surrounding spaces or tabs, else as =?base64?…?= (as is a value that
// looks like that sentinel already).
func headerValue(v string) string {
	plain := v != "" && v[0] != ' ' && v[0] != '\t' && v[len(v)-1] != ' ' && v[len(v)-1] != '\t' &&
		!(strings.HasPrefix(v, "=?base64?") && strings.HasSuffix(v, "?="))
	for i := 0; plain && i < len(v); i++ {
		plain = v[i] >= 0x20 && v[i] <= 0x7e
	}
	if plain {
		return v
	}
	return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(v)) + "?="
}
