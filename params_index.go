package mcphandler

import (
	"encoding/json"

	"github.com/mcphandler/mcphandler/internal/jsonrpc"
)

// paramsIndex is what one walk of a 2026-07-28 request's params finds
// (indexParams, run by statelessMeta), so that the readers that each
// walked them do not walk them again: statelessMeta (_meta),
// checkStateless (the name Mcp-Name must match), decodeCall and
// requestTarget. Each field answers
// as its reader's own walk did; FuzzParamsIndex holds them to it.
type paramsIndex struct {
	src       []byte          // the params walked
	meta      json.RawMessage // the last _meta member
	arguments json.RawMessage // the last arguments member
	name, uri paramString
}

// paramString is what params hold under the name of one string member.
type paramString struct {
	last string // the last value that is a string (stringMember's answer)
	kept string // the last value that is not null: what json.Unmarshal into a string field keeps
	bad  bool   // a value is neither a string nor null: json.Unmarshal into a string field fails
}

// indexParams walks the members of params (valid JSON) into x, matching
// keys as json.Unmarshal does.
func indexParams(params []byte, x *paramsIndex) {
	x.src = params
	jsonrpc.Members(params, func(k, v []byte) bool {
		switch jsonrpc.KeyIndex(k, "_meta", "arguments", "name", "uri") {
		case 0:
			x.meta = v
		case 1:
			x.arguments = v
		case 2:
			x.name.add(v)
		case 3:
			x.uri.add(v)
		}
		return true
	})
}

func (s *paramString) add(v []byte) {
	if string(v) == "null" {
		return // as encoding/json: null leaves a string as it was
	}
	str, ok := jsonrpc.String(v)
	if !ok {
		s.bad = true
		return
	}
	s.last, s.kept = str, str
}

// of returns the index of params, the very bytes it walked, or nil: a
// message built or replayed by the handler with other params is read by
// its own walk.
func (m *requestMeta) of(params []byte) *paramsIndex {
	if m == nil || len(params) == 0 || len(params) != len(m.params.src) || &params[0] != &m.params.src[0] {
		return nil
	}
	return &m.params
}

// callParams reads the params of tools/call as decodeCallParams does.
func (x *paramsIndex) callParams(p *callParams) bool {
	if x.name.bad {
		return false
	}
	p.Name, p.Arguments, p.Meta = x.name.kept, x.arguments, x.meta
	return true
}

// target is requestTarget's walk: the name, the uri and _meta, or nothing
// when json.Unmarshal of either string would fail.
func (x *paramsIndex) target() (name, uri string, meta json.RawMessage, ok bool) {
	if x.name.bad || x.uri.bad {
		return "", "", nil, false
	}
	return x.name.kept, x.uri.kept, x.meta, true
}
