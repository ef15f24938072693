package upstream

import (
	"context"
	"encoding/base64"
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
		return nil, err
	}
	left := ep.max
	in, err := ep.openInbox(ctx, op, resp, &left)
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

// resultType returns a result's resultType ("" when absent, as from a
// server of an older revision).
func resultType(res []byte) string {
	t, _ := jsonrpc.String(members(res)["resultType"])
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

// inputResponses answers an input_required result: each of its
// inputRequests (elicitation/create, sampling/createMessage, roots/list,
// each of a capability the client declared) goes to the Asker, in the
// order of their keys. It returns the inputResponses object (nil when
// there were no requests) and the requestState to echo, byte for byte (nil
// when there was none). An error of the Asker ends the call: 2026-07-28
// has no error answer to an input request.
func (c *call) inputResponses(ctx context.Context, res []byte) (responses, state []byte, err error) {
	m := members(res)
	if st, ok := m["requestState"]; ok {
		if _, isStr := jsonrpc.String(st); !isStr || len(st) > maxRequestState {
			return nil, nil, fmt.Errorf("%w: a requestState that is not a string of at most %d bytes", ErrMalformed, maxRequestState)
		}
		state = st
	}
	reqs, ok := m["inputRequests"]
	if !ok || string(reqs) == "null" {
		if state == nil {
			return nil, nil, fmt.Errorf("%w: input_required without inputRequests or requestState", ErrMalformed)
		}
		return nil, state, nil // load shedding: retry with the state alone
	}
	if !isObjectBytes(reqs) {
		return nil, nil, fmt.Errorf("%w: inputRequests is not an object", ErrMalformed)
	}
	if c.ask == nil {
		return nil, nil, errors.New("upstream: the upstream asks the client a question, and the call has no Asker")
	}
	byKey := members(reqs)
	if len(byKey) == 0 && state == nil {
		return nil, nil, fmt.Errorf("%w: input_required without inputRequests or requestState", ErrMalformed)
	}
	if c.asks += len(byKey); c.asks > maxAsks {
		return nil, nil, fmt.Errorf("%w: more than %d input requests in one call", ErrTooMany, maxAsks)
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	answers := make([]member, 0, len(keys))
	for _, k := range keys {
		r := byKey[k]
		if !isObjectBytes(r) {
			return nil, nil, fmt.Errorf("%w: an input request that is not an object", ErrMalformed)
		}
		rm := members(r)
		method, _ := jsonrpc.String(rm["method"])
		if !c.caps.allows(method) {
			return nil, nil, fmt.Errorf("%w: an input request %q the client did not declare it answers", ErrMalformed, cutText(method))
		}
		params := rm["params"]
		if len(params) > 0 && string(params) != "null" && !isObjectBytes(params) {
			return nil, nil, fmt.Errorf("%w: input request params that are not an object", ErrMalformed)
		}
		if string(params) == "null" {
			params = nil
		}
		a, err := c.askClient(ctx, method, params)
		if err != nil {
			if ctx.Err() != nil {
				return nil, nil, ctxErr(ctx)
			}
			return nil, nil, err
		}
		answers = append(answers, member{k, a})
	}
	return object(answers...), state, nil
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
