package mcptest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/textproto"
)

// applyHeaders copies each header set onto dst in order: a name replaces
// the value dst had, and a name whose only value is "" removes it.
func applyHeaders(dst http.Header, sets ...http.Header) {
	for _, set := range sets {
		for k, vs := range set {
			if len(vs) == 0 || (len(vs) == 1 && vs[0] == "") {
				dst.Del(k)
				continue
			}
			dst[textproto.CanonicalMIMEHeaderKey(k)] = append([]string(nil), vs...)
		}
	}
}

// encodeJSON is json.Marshal without HTML escaping, so that strings and raw
// members (such as a requestState) keep their bytes.
func encodeJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}

// runHandler answers a server request with the handler configured for its
// method. ping has a default handler that returns {}; any other method
// without a handler gets -32601. A handler error that is not an *RPCError
// becomes -32603 with its text.
func runHandler(ctx context.Context, handlers map[string]RequestHandler, method string, params json.RawMessage) (json.RawMessage, *RPCError) {
	h := handlers[method]
	if h == nil {
		if method != MethodPing {
			return nil, &RPCError{Code: CodeMethodNotFound, Message: "Method not found: " + method}
		}
		h = func(context.Context, json.RawMessage) (json.RawMessage, error) { return nil, nil }
	}
	res, err := h(ctx, params)
	if err != nil {
		var re *RPCError
		if !errors.As(err, &re) {
			re = &RPCError{Code: CodeInternalError, Message: err.Error()}
		}
		return nil, re
	}
	if len(bytes.TrimSpace(res)) == 0 || string(bytes.TrimSpace(res)) == "null" {
		res = json.RawMessage("{}")
	}
	return res, nil
}
