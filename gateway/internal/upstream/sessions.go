package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"

	"github.com/mcphandler/mcphandler/internal/jsonrpc"
)

// sessionVersions are the Streamable HTTP revisions spoken, newest first:
// initialize offers the first, and the upstream may answer any.
var sessionVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26"}

// session is one upstream session of the Sessions era, opened for one
// operation and ended by close (see
// https://modelcontextprotocol.io/specification/2025-11-25/basic/transports#streamable-http).
// It is used by one goroutine.
type session struct {
	c        *call
	version  string // negotiated; "" until initialize succeeded
	sid      string // Mcp-Session-Id; "" for an upstream without sessions
	nextID   int
	inflight []byte // the id of a request sent and not yet answered
	logging  bool   // the upstream declared logging
	// toolsChanged: the upstream declared tools.listChanged (WatchTools).
	toolsChanged bool
	// kept: a session that outlives this operation (CallToolIn): a 404 is
	// its end (*SessionGoneError), and the operation does not DELETE it.
	kept bool
	// idPrefix makes the request ids of a kept session unique among the
	// operations that share it, on any process: "" for a session of one
	// operation, whose ids are 1, 2, …
	idPrefix string
	gone     bool // the upstream answered 404: the session ended
}

// openSession initializes a session: initialize with the newest revision,
// notifications/initialized, and logging/setLevel when Endpoint.LogLevel
// asks for logs and the upstream logs. The session is returned even on
// error: close it.
func openSession(ctx context.Context, c *call) (*session, error) {
	s := &session{c: c}
	res, err := s.roundTrip(ctx, "initialize", c.withMeta([]member{
		{"protocolVersion", str(sessionVersions[0])},
		{"capabilities", c.caps.raw},
		{"clientInfo", c.ep.clientInfo},
	}))
	if err != nil {
		return s, err
	}
	m := members(res)
	v, _ := jsonrpc.String(m["protocolVersion"])
	if !slices.Contains(sessionVersions, v) {
		return s, fmt.Errorf("%w: initialize agreed on version %q", ErrUnsupported, cutText(v))
	}
	s.version = v
	if caps := m["capabilities"]; isObjectBytes(caps) {
		_, s.logging = members(caps)["logging"]
		s.toolsChanged = toolsListChanged(caps)
	}
	if err := s.notify(ctx, "notifications/initialized", nil); err != nil {
		return s, err
	}
	if c.ep.logLevel != "" && s.logging {
		_, err := s.roundTrip(ctx, "logging/setLevel", c.withMeta([]member{{"level", str(c.ep.logLevel)}}))
		if re := (*RPCError)(nil); err != nil && !errors.As(err, &re) {
			return s, err // an upstream that refuses the level still serves the call, without logs
		}
	}
	return s, nil
}

// headers sets the session's headers on a request after initialize.
func (s *session) headers(h http.Header) {
	if s.sid != "" {
		h.Set("Mcp-Session-Id", s.sid)
	}
	if s.version != "" {
		h.Set("MCP-Protocol-Version", s.version)
	}
}

// request sends one request of the operation (tools/call carries the
// call's progress token) and returns its result.
func (s *session) request(ctx context.Context, method string, params []member, _ string) ([]byte, error) {
	return s.roundTrip(ctx, method, s.c.withMeta(params, s.c.progressMeta(method)))
}

// roundTrip POSTs the request and reads its answer, JSON or an SSE stream
// on which the upstream's questions and notifications come first; a stream
// that ends before the response is resumed with GET and Last-Event-ID
// (after its retry delay), at most maxResumes times. initialize's answer
// gives the session id.
func (s *session) roundTrip(ctx context.Context, method string, params []byte) ([]byte, error) {
	s.nextID++
	id := []byte(itoa(s.nextID))
	if s.idPrefix != "" {
		id = str(s.idPrefix + itoa(s.nextID))
	}
	op := "POST " + method
	if method != "initialize" { // which must never be cancelled
		// In flight from before it is sent: the upstream may run it before
		// its answer's header comes, or never send one.
		s.inflight = id
	}
	resp, err := s.c.ep.send(ctx, op, http.MethodPost, s.c.ep.url.String(), jsonrpc.AppendRequest(nil, id, method, params), s.headers)
	if err != nil {
		return nil, err
	}
	if err := s.ended(op, resp, true); err != nil {
		s.inflight = nil // refused whole: it never ran
		return nil, err
	}
	if method == "initialize" {
		if err := s.takeSessionID(resp); err != nil {
			discard(resp)
			return nil, err
		}
	}
	left := s.c.ep.max
	for resumes := 0; ; resumes++ {
		in, err := s.c.ep.openInbox(ctx, op, resp, &left)
		if err != nil {
			return nil, err
		}
		res, done, broke, err := s.read(ctx, in, id)
		if done || err != nil {
			in.close()
			if done {
				s.inflight = nil // answered, with a result or an error
			}
			return res, err
		}
		last, wait, ok := in.resumable()
		in.close()
		if !ok || s.sid == "" {
			if broke != nil {
				return nil, fmt.Errorf("upstream: the answer to %s broke off: %w", method, broke)
			}
			return nil, fmt.Errorf("%w: the answer to %s ended without its response", ErrMalformed, method)
		}
		if resumes == maxResumes {
			return nil, fmt.Errorf("%w: the answer to %s broke off more than %d times", ErrTooMany, method, maxResumes)
		}
		if err := sleep(ctx, wait); err != nil {
			return nil, err
		}
		resp, err = s.c.ep.send(ctx, "GET (resume)", http.MethodGet, s.c.ep.url.String(), nil, func(h http.Header) {
			h.Set("Accept", typeSSE)
			h.Set("Last-Event-ID", last)
			s.headers(h)
		})
		if err != nil {
			return nil, err
		}
		op = "GET (resume)"
		if err := s.ended(op, resp, false); err != nil {
			return nil, err // the request may have run before its stream broke off
		}
	}
}

// read handles the messages of one answer until the response to id: done
// with its result or *RPCError, or not done when the answer ended before it
// (broke says why when its connection broke, rather than ended: the
// upstream may close it without ending the stream, as 2025-11-25 allows,
// and the stream is resumed as after its end).
func (s *session) read(ctx context.Context, in *inbox, id []byte) (res []byte, done bool, broke, err error) {
	for {
		m, err := in.next()
		switch {
		case err == io.EOF || err == errIncomplete:
			return nil, false, nil, nil
		case err != nil && (ctx.Err() != nil || errors.Is(err, ErrTooLarge) || errors.Is(err, ErrMalformed)):
			return nil, false, nil, err
		case err != nil:
			return nil, false, err, nil
		}
		res, done, err := s.c.handle(ctx, &m, id, s.reply)
		if done || err != nil {
			return res, done, nil, err
		}
	}
}

// takeSessionID keeps the Mcp-Session-Id of initialize's answer, which
// must be 1 to 1024 visible ASCII characters.
func (s *session) takeSessionID(resp *http.Response) error {
	v := resp.Header.Get("Mcp-Session-Id")
	if v == "" {
		return nil
	}
	if len(v) > maxSessionID {
		return fmt.Errorf("%w: a session id of more than %d bytes", ErrMalformed, maxSessionID)
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x21 || v[i] > 0x7e {
			return fmt.Errorf("%w: a session id with a byte outside visible ASCII", ErrMalformed)
		}
	}
	s.sid = v
	return nil
}

// ended reports the end of a kept session: an answer 404 to a request
// that carried its id, as the upstream must give once it ended the
// session (it expired, was deleted, or the upstream restarted). notRun
// says the request was the operation's own, refused whole. It closes
// resp when it returns an error.
func (s *session) ended(op string, resp *http.Response, notRun bool) error {
	if !s.kept || resp.StatusCode != http.StatusNotFound {
		return nil
	}
	discard(resp)
	s.gone = true
	return &SessionGoneError{Op: op, NotRun: notRun}
}

// reply POSTs a response to one of the upstream's questions.
func (s *session) reply(ctx context.Context, msg []byte) error {
	resp, err := s.c.ep.send(ctx, "POST response", http.MethodPost, s.c.ep.url.String(), msg, s.headers)
	if err != nil {
		return err
	}
	if err := s.ended("POST response", resp, false); err != nil {
		return err // the request asked a question: it runs
	}
	return s.c.ep.accepted("POST response", resp)
}

// notify POSTs a notification.
func (s *session) notify(ctx context.Context, method string, params []byte) error {
	op := "POST " + method
	resp, err := s.c.ep.send(ctx, op, http.MethodPost, s.c.ep.url.String(), jsonrpc.AppendRequest(nil, nil, method, params), s.headers)
	if err != nil {
		return err
	}
	return s.c.ep.accepted(op, resp)
}

// close ends the session, even after ctx ended (within cleanupTimeout):
// notifications/cancelled for a request still unanswered, then DELETE with
// the session id. Their failures are ignored: the upstream expires what it
// keeps.
func (s *session) close(ctx context.Context) {
	cctx, cancel := s.c.ep.cleanup(ctx)
	defer cancel()
	s.cancelInflight(cctx)
	if s.sid == "" {
		return
	}
	resp, err := s.c.ep.send(cctx, "DELETE", http.MethodDelete, s.c.ep.url.String(), nil, s.headers)
	if err == nil {
		discard(resp)
	}
}

// release ends what an operation in a kept session leaves, even after ctx
// ended (within cleanupTimeout): notifications/cancelled for a request
// still unanswered. The session stays open.
func (s *session) release(ctx context.Context) {
	if s.inflight == nil || s.gone {
		return
	}
	cctx, cancel := s.c.ep.cleanup(ctx)
	defer cancel()
	s.cancelInflight(cctx)
}

// cancelInflight sends notifications/cancelled for the request still
// unanswered, if any; its failure is ignored.
func (s *session) cancelInflight(ctx context.Context) {
	if s.inflight != nil && s.version != "" {
		_ = s.notify(ctx, "notifications/cancelled", object(
			member{"requestId", s.inflight},
			member{"reason", str("the gateway's call ended")},
		))
	}
}
