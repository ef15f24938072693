package upstream

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
)

// Session is an upstream session of the Sessions era that outlives one
// operation: what any process needs to run an operation in it
// ([CallToolIn]) and to end it ([EndSession]). It holds no credentials:
// every request of it carries the Endpoint's Header, as the operation's
// caller gives it.
type Session struct {
	// ID is the Mcp-Session-Id the upstream gave in its answer to
	// initialize: 1 to 1024 bytes of visible ASCII, or "" for an
	// upstream that issues none (each request then stands alone, and no
	// answer is the session's end).
	ID string
	// Version is the revision initialize agreed on, sent as
	// MCP-Protocol-Version with every request.
	Version string
	// Logging reports that the upstream declared the logging capability.
	Logging bool
	// LogLevel is the level last asked for with logging/setLevel ("":
	// none). CallToolIn asks again when the Endpoint's LogLevel differs,
	// and sets it.
	LogLevel string
}

// ErrSessionGone is what a *SessionGoneError is (errors.Is).
var ErrSessionGone = errors.New("upstream: the session ended")

// SessionGoneError is the end of a kept session: the upstream answered 404
// to a request carrying its id, as it must once it ended the session
// (expired, deleted, restarted). Open a new session; whether the
// operation may run in it depends on NotRun.
type SessionGoneError struct {
	// Op names the request answered 404: "POST tools/call",
	// "GET (resume)", "POST response", …
	Op string
	// NotRun reports that the 404 answered the operation's own request
	// (or a request before it, logging/setLevel), which the upstream
	// therefore did not process: the operation may run again in a new
	// session. Otherwise the request was under way (its stream broke off
	// and its resumption got 404, or the answer to one of its questions
	// did) and may have acted: it must not run again.
	NotRun bool
}

func (e *SessionGoneError) Error() string {
	s := "upstream: the session ended (" + e.Op + ": HTTP 404)"
	if !e.NotRun {
		s += " while its request was under way"
	}
	return s
}

// Is makes errors.Is(err, ErrSessionGone) true.
func (e *SessionGoneError) Is(target error) bool { return target == ErrSessionGone }

// OpenSession initializes a session to keep: initialize with the newest
// revision, told the client capabilities caps (nil: none),
// notifications/initialized, and logging/setLevel when Endpoint.LogLevel
// asks for logs and the upstream logs. ep.Era must be Sessions. A session
// whose initialization failed after the upstream gave its id is ended
// (DELETE) before OpenSession returns. It is bounded by Endpoint.Timeout
// and safe for concurrent use.
func OpenSession(ctx context.Context, ep Endpoint, caps json.RawMessage) (Session, error) {
	if ep.Era != Sessions {
		return Session{}, fmt.Errorf("upstream: OpenSession in era %v, which keeps no session", ep.Era)
	}
	e, err := ep.check()
	if err != nil {
		return Session{}, err
	}
	cc, err := parseCaps(caps)
	if err != nil {
		return Session{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	s, err := openSession(ctx, &call{ep: e, caps: cc})
	if err != nil {
		s.close(ctx)
		return Session{}, err
	}
	ks := Session{ID: s.sid, Version: s.version, Logging: s.logging}
	if s.logging {
		ks.LogLevel = e.logLevel
	}
	return ks, nil
}

// CallToolIn is [CallTool] in the kept session ks, for the same downstream
// client whose capabilities ks was opened with (caps is what questions
// may be relayed, as for CallTool). It sends logging/setLevel first when
// Endpoint.LogLevel asks for logs at another level than ks.LogLevel (and
// the upstream logs), and sets ks.LogLevel. Its request ids and progress
// token are random, so that operations sharing ks, on any process, never
// reuse one.
//
// A 404 answer is a *SessionGoneError (errors.Is ErrSessionGone), whose
// NotRun says whether the call may run again in a new session. When ctx
// ends, or the Timeout, before the result, notifications/cancelled goes
// upstream for the call (within 5 more seconds); the session is never
// ended here (see [EndSession]).
//
// It is safe for concurrent use, ks excepted: give each goroutine its own
// copy.
func CallToolIn(ctx context.Context, ep Endpoint, ks *Session, caps json.RawMessage, name string, args json.RawMessage, ask Asker) (json.RawMessage, error) {
	if ep.Era != Sessions {
		return nil, fmt.Errorf("upstream: CallToolIn in era %v, which keeps no session", ep.Era)
	}
	args, err := callArgs(name, args)
	if err != nil {
		return nil, err
	}
	e, err := ep.check()
	if err != nil {
		return nil, err
	}
	cc, err := parseCaps(caps)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	nonce := randomHex()
	c := &call{ep: e, caps: cc, ask: ask}
	if ask != nil {
		c.progress = str("upstream-call-" + nonce)
	}
	s := &session{c: c, version: ks.Version, sid: ks.ID, logging: ks.Logging, kept: ks.ID != "", idPrefix: "g" + nonce + "-"}
	defer s.release(ctx)
	if e.logLevel != "" && ks.Logging && ks.LogLevel != e.logLevel {
		_, err := s.roundTrip(ctx, "logging/setLevel", c.withMeta([]member{{"level", str(e.logLevel)}}))
		if re := (*RPCError)(nil); err != nil && !errors.As(err, &re) {
			return nil, err // an upstream that refuses the level still serves the call, without logs
		}
		ks.LogLevel = e.logLevel
	}
	var out json.RawMessage
	if err := callOp(name, args, nil, &out, nil)(ctx, s, Sessions); err != nil {
		return nil, err
	}
	return out, nil
}

// EndSession ends the kept session ks: DELETE with its id. An upstream
// that no longer knows it (404) or does not let clients end sessions
// (405) is not an error. It is bounded by ctx and by 5 seconds (or
// Endpoint.Timeout, if shorter), and safe for concurrent use.
func EndSession(ctx context.Context, ep Endpoint, ks Session) error {
	if ks.ID == "" {
		return nil
	}
	e, err := ep.check()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, min(cleanupTimeout, e.timeout))
	defer cancel()
	s := &session{c: &call{ep: e}, sid: ks.ID, version: ks.Version}
	resp, err := e.send(ctx, "DELETE", http.MethodDelete, e.url.String(), nil, s.headers)
	if err != nil {
		return err
	}
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode <= 299,
		resp.StatusCode == http.StatusNotFound, resp.StatusCode == http.StatusMethodNotAllowed:
		discard(resp)
		return nil
	}
	return e.statusError("DELETE", resp)
}

// randomHex is 16 random hexadecimal digits: what tells apart the
// requests of the operations sharing a kept session.
func randomHex() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// callArgs checks a call's arguments: a JSON object, or nothing ({}).
func callArgs(name string, args json.RawMessage) (json.RawMessage, error) {
	if len(args) == 0 || string(args) == "null" {
		return json.RawMessage("{}"), nil
	}
	if !isObject(args) {
		return nil, fmt.Errorf("upstream: the arguments of %s are not a JSON object", strconv.Quote(cutText(name)))
	}
	return args, nil
}
