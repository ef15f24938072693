package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mcphandler/mcphandler/internal/jsonrpc"
)

// ListTools returns the upstream's tools, every page of tools/list, in
// the order listed, as the downstream client whose capabilities are caps
// (nil: none) would see them. In the Sessions and Legacy eras it opens a
// session of its own and ends it; with ep.Era Probe it runs [Detect] first.
//
// What the upstream lists is checked: a tool whose name is not 1–128 bytes
// of A-Z a-z 0-9 _ - ., or that is not a JSON object, is skipped; a name
// listed twice skips every tool of that name (which of them a call would
// reach is unknowable). More than 10,000 tools, more than 100 pages or a
// cursor that repeats, or pages of more than 4 × Endpoint.MaxResponseBytes
// together, fail the list ([ErrTooMany], [ErrMalformed], [ErrTooLarge])
// rather than return part of it. The upstream's questions during the list are
// refused (-32601) but for ping.
//
// It is safe for concurrent use; each call has its own session.
func ListTools(ctx context.Context, ep Endpoint, caps json.RawMessage) ([]Tool, error) {
	tools, _, err := ListToolsHinted(ctx, ep, caps)
	return tools, err
}

// Hints are the cache hints of a Stateless tools/list (ttlMs and
// cacheScope), read as the 2026-07-28 revision says, over all its pages.
type Hints struct {
	// Given is set when the list came from a Stateless upstream: the only
	// era with hints. Without it, TTL and Public say nothing.
	Given bool
	// TTL is the smallest ttlMs of the pages. An absent, negative or
	// malformed ttlMs (not an integer: a fraction, an exponent, a string)
	// counts as 0, stale at once; one over MaxHintTTL counts as
	// MaxHintTTL.
	TTL time.Duration
	// Public is set when every page said cacheScope "public"; any other
	// value, or none, is "private".
	Public bool
}

// MaxHintTTL is the longest ttlMs Hints report: an upstream cannot ask
// for a list to be kept longer than a day.
const MaxHintTTL = 24 * time.Hour

// ListToolsHinted is ListTools, with the list's cache hints.
func ListToolsHinted(ctx context.Context, ep Endpoint, caps json.RawMessage) ([]Tool, Hints, error) {
	var tools []Tool
	var hints Hints
	err := operate(ctx, ep, caps, nil, func(ctx context.Context, r requester, era Era) error {
		l := toolList{max: maxListFactor * r.endpoint().max, hinted: era == Stateless}
		cursor := ""
		for page := 0; ; page++ {
			if page == maxPages {
				return fmt.Errorf("%w: more than %d pages of tools/list", ErrTooMany, maxPages)
			}
			var params []member
			if cursor != "" {
				params = []member{{"cursor", str(cursor)}}
			}
			res, err := r.request(ctx, "tools/list", params, "")
			if err != nil {
				return err
			}
			if cursor, err = l.page(res); err != nil {
				return err
			}
			if cursor == "" {
				tools, hints = l.result(), l.hints
				return nil
			}
		}
	})
	return tools, hints, err
}

// toolList gathers the pages of a tools/list.
type toolList struct {
	tools   []Tool
	seen    int                 // tools listed, valid or not
	bytes   int64               // of the pages so far
	max     int64               // of all pages: maxListFactor × MaxResponseBytes
	names   map[string]int      // how many times each name was listed
	cursors map[string]struct{} // the cursors given so far
	hinted  bool                // the pages carry cache hints (Stateless)
	hints   Hints               // of the pages so far
}

// page adds one page's tools and returns the cursor of the next page ("":
// none).
func (l *toolList) page(res []byte) (string, error) {
	if l.bytes += int64(len(res)); l.max > 0 && l.bytes > l.max {
		return "", fmt.Errorf("%w: a tools/list of more than %d bytes", ErrTooLarge, l.max)
	}
	m := members(res)
	if l.hinted {
		l.hint(m["ttlMs"], m["cacheScope"])
	}
	raw, ok := m["tools"]
	if !ok || !bytes.HasPrefix(bytes.TrimLeft(raw, " \t\r\n"), []byte("[")) {
		return "", fmt.Errorf("%w: a tools/list result without a tools array", ErrMalformed)
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return "", fmt.Errorf("%w: a tools array that does not decode", ErrMalformed)
	}
	if l.seen += len(elems); l.seen > maxTools {
		return "", fmt.Errorf("%w: more than %d tools", ErrTooMany, maxTools)
	}
	if l.names == nil {
		l.names = map[string]int{}
	}
	for _, def := range elems {
		name, ok := toolName(def)
		if !ok {
			continue
		}
		l.names[name]++
		l.tools = append(l.tools, Tool{Name: name, Def: bytes.Clone(def)})
	}
	next, ok := m["nextCursor"]
	if !ok || string(next) == "null" {
		return "", nil
	}
	cursor, isStr := jsonrpc.String(next)
	if !isStr || len(cursor) > maxCursor {
		return "", fmt.Errorf("%w: a nextCursor that is not a string of at most %d bytes", ErrMalformed, maxCursor)
	}
	if cursor == "" {
		return "", nil
	}
	if l.cursors == nil {
		l.cursors = map[string]struct{}{}
	}
	if _, again := l.cursors[cursor]; again {
		return "", fmt.Errorf("%w: tools/list gave a cursor twice", ErrMalformed)
	}
	l.cursors[cursor] = struct{}{}
	return cursor, nil
}

// hint reads one page's ttlMs and cacheScope into l.hints: the smallest
// TTL of the pages, public only when every page says so.
func (l *toolList) hint(ttl, scope json.RawMessage) {
	d := hintTTL(ttl)
	first := !l.hints.Given
	l.hints.Given = true
	if first || d < l.hints.TTL {
		l.hints.TTL = d
	}
	public := string(scope) == `"public"`
	l.hints.Public = public && (first || l.hints.Public)
}

// hintTTL reads a ttlMs: an integer of milliseconds, without sign,
// fraction or exponent; anything else is 0 (stale at once, as the
// revision says of an absent or negative value). A number past
// MaxHintTTL is MaxHintTTL, however long: the work is linear in its
// bytes, and nothing overflows.
func hintTTL(raw json.RawMessage) time.Duration {
	if len(raw) == 0 || len(raw) > 1 && raw[0] == '0' {
		return 0
	}
	var ms int64
	for _, c := range raw {
		if c < '0' || c > '9' {
			return 0
		}
		if ms <= MaxHintTTL.Milliseconds() {
			ms = ms*10 + int64(c-'0')
		}
	}
	return min(time.Duration(min(ms, MaxHintTTL.Milliseconds()+1))*time.Millisecond, MaxHintTTL)
}

// result is the tools listed, without the names listed twice.
func (l *toolList) result() []Tool {
	out := l.tools[:0]
	for _, t := range l.tools {
		if l.names[t.Name] == 1 {
			out = append(out, t)
		}
	}
	return out
}

// toolName returns the name of a tool definition, if the definition is an
// object and its name valid.
func toolName(def []byte) (string, bool) {
	if !isObjectBytes(def) {
		return "", false
	}
	name, ok := jsonrpc.String(members(def)["name"])
	return name, ok && validName(name)
}

// validName reports whether name is 1–128 bytes of A-Z a-z 0-9 _ - . (the
// tool name guidance of 2025-11-25, which the handler's own tools follow).
func validName(name string) bool {
	if len(name) == 0 || len(name) > 128 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// CallTool calls the upstream tool name with args (a JSON object; nil:
// {}) for the downstream client whose capabilities are caps (nil: none),
// and returns the CallToolResult object, the same in every era: as the
// upstream sent it, without resultType and without the _meta keys of
// prefix io.modelcontextprotocol/ (which describe the hop, not the
// result). A JSON-RPC error of the upstream is a *RPCError (on Stateless
// also wrapped in a *StatusError when it came with an HTTP error status).
// With ep.Era Probe it runs [Detect] first.
//
// During the call the upstream's questions (elicitation/create,
// sampling/createMessage, roots/list; only those caps declares, the others
// are refused with -32601 or, on Stateless, fail the call) go to ask.Ask,
// and its progress and log messages to ask.Notify (progress is asked for
// with a progressToken of CallTool's). ask may be nil: every question is
// then refused (-32601; on Stateless, a question ends the call). At most
// 64 questions per call, across at most 8 input_required rounds on
// Stateless (each round is a retry with inputResponses and the echoed
// requestState, as the revision says). A Stateless call refused for a
// missing Mcp-Param-* header (400, -32020) is retried once with the
// headers its tool's x-mcp-header annotations ask for, found in a fresh
// tools/list, as the revision says a client does.
//
// When ctx ends, or the Timeout, or the upstream breaks the protocol,
// before the result: in the Sessions and Legacy eras notifications/cancelled
// goes upstream for the call, then the session ends (DELETE, or the end of
// the legacy stream), within 5 more seconds; on Stateless, closing the
// request is the cancellation. No session is ever left open.
//
// It is safe for concurrent use; each call has its own session.
func CallTool(ctx context.Context, ep Endpoint, caps json.RawMessage, name string, args json.RawMessage, ask Asker) (json.RawMessage, error) {
	args, err := callArgs(name, args)
	if err != nil {
		return nil, err
	}
	var out json.RawMessage
	err = operate(ctx, ep, caps, ask, callOp(name, args, nil, &out, nil))
	return out, err
}

// Retry is what a Stateless tools/call that answers an [InputRequired]
// carries: its inputResponses, a JSON object keyed as the InputRequired's
// requests (nil: none), and its requestState, InputRequired.State echoed
// byte for byte (nil: none).
type Retry struct {
	Responses json.RawMessage
	State     json.RawMessage
}

// CallToolRound is [CallTool] for a caller that relays a Stateless
// upstream's input_required rounds to its own client instead of having
// them answered during the call: it sends the call, with retry's
// inputResponses and requestState when retry is set, and when the upstream
// answers input_required with input requests it returns them (ir, checked
// as CallTool checks them: methods the client declared, at most 64) with
// the requestState to echo, and asks ask nothing. An input_required answer
// with a requestState and no requests (load shedding) is retried at once
// with that state, up to 8 rounds in one call. Otherwise it returns what
// CallTool returns. ask gets the call's notifications; in the Sessions and
// Legacy eras, which have no rounds, it gets the questions too, as with
// CallTool, and a retry is an error.
func CallToolRound(ctx context.Context, ep Endpoint, caps json.RawMessage, name string, args json.RawMessage, retry *Retry, ask Asker) (result json.RawMessage, ir *InputRequired, err error) {
	if retry == nil {
		retry = &Retry{}
	}
	if len(retry.Responses) > 0 && !isObject(retry.Responses) {
		return nil, nil, errors.New("upstream: Retry.Responses is not a JSON object")
	}
	if len(retry.State) > 0 {
		if _, ok := jsonrpc.String(retry.State); !ok || len(retry.State) > maxRequestState {
			return nil, nil, fmt.Errorf("upstream: Retry.State is not a JSON string of at most %d bytes", maxRequestState)
		}
	}
	if args, err = callArgs(name, args); err != nil {
		return nil, nil, err
	}
	var out json.RawMessage
	var asked *InputRequired
	if err := operate(ctx, ep, caps, ask, callOp(name, args, retry, &out, &asked)); err != nil {
		return nil, nil, err
	}
	return out, asked, nil
}

// callOp is the operation of a tools/call of name with args (a JSON
// object), in any era: it leaves the result in out. With retry set (a
// relayed round, CallToolRound) it sends retry's answers and state, and
// a Stateless upstream's input requests stop it, left in asked.
func callOp(name string, args json.RawMessage, retry *Retry, out *json.RawMessage, asked **InputRequired) func(ctx context.Context, r requester, era Era) error {
	return func(ctx context.Context, r requester, era Era) error {
		var responses, state []byte
		if retry != nil {
			if era != Stateless && (retry.Responses != nil || retry.State != nil) {
				return fmt.Errorf("upstream: a retry of input_required rounds to an upstream in the %v era", era)
			}
			responses, state = retry.Responses, retry.State
		}
		send := func() ([]byte, error) {
			return r.request(ctx, "tools/call", []member{
				{"name", str(name)}, {"arguments", args},
				{"inputResponses", responses}, {"requestState", state},
			}, name)
		}
		for round := 0; ; round++ {
			res, err := send()
			if st, ok := r.(*stateless); ok && err != nil && st.param == nil {
				if st.param = paramHeadersAfter(ctx, r, err, name, args); st.param != nil {
					res, err = send() // once, with the Mcp-Param-* headers the tool needs
				}
			}
			if err != nil {
				return err
			}
			if era != Stateless || resultType(res) != "input_required" {
				*out = finalResult(res)
				return nil
			}
			if round == maxRounds {
				return fmt.Errorf("%w: more than %d input_required rounds", ErrTooMany, maxRounds)
			}
			c := r.(*stateless).c
			if retry != nil {
				ir, err := parseInputRequired(res, c.caps)
				if err != nil {
					return err
				}
				if len(ir.Requests) > 0 {
					*asked = &ir
					return nil
				}
				responses, state = nil, ir.State // load shedding: retry with the state alone
				continue
			}
			if responses, state, err = c.inputResponses(ctx, res); err != nil {
				return err
			}
		}
	}
}

// progressToken is the token CallTool asks progress with.
var progressToken = []byte(`"upstream-call"`)

// operate runs one operation: checks ep and caps, bounds ctx by the
// Timeout, finds the era if needed, opens what the era needs, runs op and
// closes it.
func operate(ctx context.Context, ep Endpoint, caps json.RawMessage, ask Asker,
	op func(ctx context.Context, r requester, era Era) error) error {
	e, err := ep.check()
	if err != nil {
		return err
	}
	cc, err := parseCaps(caps)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	era := ep.Era
	if era == Probe {
		if era, _, err = detect(ctx, e); err != nil {
			return err
		}
	}
	c := &call{ep: e, caps: cc, ask: ask}
	if ask != nil {
		c.progress = progressToken
	}
	switch era {
	case Sessions:
		s, err := openSession(ctx, c)
		defer s.close(ctx)
		if err != nil {
			return err
		}
		return op(ctx, s, era)
	case Legacy:
		l, err := openLegacy(ctx, c)
		defer l.close(ctx)
		if err != nil {
			return err
		}
		return op(ctx, l, era)
	case Stateless:
		return op(ctx, &stateless{c: c}, era)
	}
	return fmt.Errorf("upstream: unknown era %v", era)
}
