package upstream

import (
	"bytes"
	"context"
	"errors"
	"net/http"

	"github.com/mcphandler/mcphandler/internal/jsonrpc"
	"github.com/mcphandler/mcphandler/internal/mcpheaders"
)

// paramHeadersAfter returns the Mcp-Param-* headers a 2026-07-28 call of
// the tool name with args needs, when err says the upstream refused the
// call for a header (400 with -32020) and the tool, as the upstream lists
// it now, annotates arguments with x-mcp-header: the revision says a
// client that gets -32020 re-fetches tools/list and retries. A refusal
// for a header runs nothing upstream, so the call can be sent again. It
// returns nil when there is nothing to retry with.
func paramHeadersAfter(ctx context.Context, r requester, err error, name string, args []byte) http.Header {
	var se *StatusError
	if !errors.As(err, &se) || se.StatusCode != http.StatusBadRequest || se.RPC == nil || se.RPC.Code != mcpheaders.CodeHeaderMismatch {
		return nil
	}
	def := findTool(ctx, r, name)
	if def == nil {
		return nil
	}
	schema := members(def)["inputSchema"]
	if !bytes.Contains(schema, []byte("x-mcp-header")) {
		return nil
	}
	paths, perr := mcpheaders.ParamHeaders(schema)
	if perr != nil || len(paths) == 0 {
		return nil // an invalid definition, which a client must not call with
	}
	return paramHeaders(paths, args)
}

// findTool lists the upstream's tools (within the bounds of ListTools)
// and returns the definition of name, or nil.
func findTool(ctx context.Context, r requester, name string) []byte {
	l := toolList{max: maxListFactor * r.endpoint().max}
	cursor := ""
	for page := 0; page < maxPages; page++ {
		var params []member
		if cursor != "" {
			params = []member{{"cursor", str(cursor)}}
		}
		res, err := r.request(ctx, "tools/list", params, "")
		if err != nil {
			return nil
		}
		if cursor, err = l.page(res); err != nil {
			return nil
		}
		if cursor == "" {
			break
		}
	}
	for _, t := range l.result() {
		if t.Name == name {
			return t.Def
		}
	}
	return nil
}

// paramHeaders mirrors the arguments at the annotated paths (annotation
// → chain of property names) into Mcp-Param-* headers, as the revision
// says: a string as it is, or Base64-encoded when it is not plain visible
// ASCII (headerValue); a boolean as true or false; a number as written.
// An absent or null argument gets no header; an object or array cannot be
// mirrored and gets none either (the upstream refuses the call then).
func paramHeaders(paths map[string][]string, args []byte) http.Header {
	h := http.Header{}
	for x, path := range paths {
		v, ok := lookup(args, path)
		if !ok {
			continue
		}
		var val string
		switch {
		case v[0] == '"':
			s, _ := jsonrpc.String(v)
			val = headerValue(s)
		case string(v) == "true" || string(v) == "false":
			val = string(v)
		case v[0] == '-' || v[0] >= '0' && v[0] <= '9':
			val = string(v)
		default:
			continue // null, an object, an array
		}
		h.Set(mcpheaders.ParamHeaderPrefix+x, val)
	}
	return h
}

// lookup returns the raw value at path in the JSON object obj (checked
// JSON), matching keys exactly.
func lookup(obj []byte, path []string) ([]byte, bool) {
	cur := obj
	for _, key := range path {
		if !isObjectBytes(cur) {
			return nil, false
		}
		next, ok := members(cur)[key]
		if !ok {
			return nil, false
		}
		cur = bytes.TrimSpace(next)
	}
	return cur, len(cur) > 0
}
