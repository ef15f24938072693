package mcptest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"
)

// sessionsWire is the [Sessions] era: Streamable HTTP with a session.
type sessionsWire struct {
	c *Client
}

// target is the endpoint, with the default headers of the method and the
// session headers (but for initialize).
func (w *sessionsWire) target(method string, _ []byte, init bool) (string, http.Header, error) {
	h := http.Header{}
	switch method {
	case http.MethodPost:
		h.Set("Content-Type", "application/json")
		h.Set("Accept", acceptBoth)
	case http.MethodGet:
		h.Set("Accept", "text/event-stream")
	}
	if !init {
		w.c.mu.Lock()
		sid, ver := w.c.sessionID, w.c.version
		w.c.mu.Unlock()
		if sid != "" {
			h.Set(HeaderSessionID, sid)
		}
		if ver != "" {
			h.Set(HeaderProtocolVersion, ver)
		}
	}
	return w.c.url, h, nil
}

func (w *sessionsWire) params(params any) (json.RawMessage, error) { return marshalParams(params) }

func (w *sessionsWire) roundTrip(ctx context.Context, id int64, method string, body []byte, init bool) (*Message, http.Header, error) {
	ps := newPending([]string{idKey(id)})
	hdr, err := w.exchange(ctx, body, ps, init)
	if err != nil {
		if ctx.Err() != nil && !init {
			w.c.sendCancel(ctx, id, err)
		}
		return nil, hdr, err
	}
	return ps.got[idKey(id)], hdr, nil
}

func (w *sessionsWire) next(context.Context, string, json.RawMessage, json.RawMessage, int) (json.RawMessage, error) {
	return nil, nil
}

func (w *sessionsWire) beforeInitialize(context.Context) error { return nil }

func (w *sessionsWire) close() {}

// sessions returns the client's wire if its era is [Sessions], or fails
// naming op.
func (c *Client) sessions(op string) (*sessionsWire, error) {
	if w, ok := c.wire.(*sessionsWire); ok {
		return w, nil
	}
	return nil, c.unsupported(op)
}

// Delete ends the session of the [Sessions] era with an HTTP DELETE
// carrying the session id. Any non-2xx status (a server may answer 405)
// comes back as *[HTTPError]. The stored session id is kept, so a test can
// check that the server now answers it with 404. Other eras have no
// session to delete ([errors.ErrUnsupported]; [Client.Do] sends a raw
// DELETE).
func (c *Client) Delete(ctx context.Context) error {
	if _, err := c.sessions("Delete"); err != nil {
		return err
	}
	resp, err := c.Do(ctx, http.MethodDelete, nil, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return newHTTPError(resp)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
	return nil
}

// BatchRequest is one member of a [Client.Batch].
type BatchRequest struct {
	Method string
	Params any
	// Notification sends the member without an id.
	Notification bool
}

// Batch sends several messages in one POST as a JSON array, which only
// 2025-03-26 allows, and returns the responses in the order of reqs (nil
// for notifications). Error responses are returned as messages with Error
// set, not as an error. Only the [Sessions] era sends batches
// ([errors.ErrUnsupported] otherwise).
func (c *Client) Batch(ctx context.Context, reqs ...BatchRequest) ([]*Message, error) {
	w, err := c.sessions("Batch")
	if err != nil {
		return nil, err
	}
	wire := make([]wireRequest, len(reqs))
	keys := make([]string, len(reqs))
	var ids []string
	for i, r := range reqs {
		p, err := marshalParams(r.Params)
		if err != nil {
			return nil, err
		}
		wire[i] = wireRequest{JSONRPC: "2.0", Method: r.Method, Params: p}
		if !r.Notification {
			keys[i] = idKey(c.nextID.Add(1))
			wire[i].ID = json.RawMessage(keys[i])
			ids = append(ids, keys[i])
		}
	}
	body, err := encodeJSON(wire)
	if err != nil {
		return nil, err
	}
	ps := newPending(ids)
	if _, err := w.exchange(ctx, body, ps, false); err != nil {
		return nil, err
	}
	out := make([]*Message, len(reqs))
	for i, k := range keys {
		if k != "" {
			out[i] = ps.got[k]
		}
	}
	return out, nil
}

// pending tracks the responses an exchange waits for.
type pending struct {
	want map[string]bool
	got  map[string]*Message
}

func newPending(ids []string) *pending {
	p := &pending{want: map[string]bool{}, got: map[string]*Message{}}
	for _, id := range ids {
		p.want[id] = true
	}
	return p
}

func (p *pending) done() bool { return len(p.got) == len(p.want) }

// exchange posts body and reads the answer until every response in ps has
// arrived. It returns the header of the POST's HTTP response.
func (w *sessionsWire) exchange(ctx context.Context, body []byte, ps *pending, init bool) (http.Header, error) {
	req, err := w.c.request(ctx, http.MethodPost, body, nil, init)
	if err != nil {
		return nil, err
	}
	resp, err := w.c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		return resp.Header, newHTTPError(resp)
	}
	if len(ps.want) == 0 {
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			return resp.Header, newHTTPError(resp)
		}
		return resp.Header, nil
	}
	if resp.StatusCode == http.StatusAccepted || resp.StatusCode == http.StatusNoContent {
		defer resp.Body.Close()
		return resp.Header, fmt.Errorf("mcptest: the server answered a request with HTTP %d and no response: %w", resp.StatusCode, newHTTPError(resp))
	}
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch strings.ToLower(ct) {
	case "application/json":
		defer resp.Body.Close()
		return resp.Header, w.readJSON(ctx, resp.Body, ps)
	case "text/event-stream":
		return resp.Header, w.readStream(ctx, resp.Body, ps)
	default:
		defer resp.Body.Close()
		return resp.Header, fmt.Errorf("mcptest: unexpected Content-Type %q for a response: %w", resp.Header.Get("Content-Type"), newHTTPError(resp))
	}
}

// readJSON handles an application/json answer: one message or an array.
func (w *sessionsWire) readJSON(ctx context.Context, body io.Reader, ps *pending) error {
	data, err := io.ReadAll(body)
	if err != nil {
		return err
	}
	m, batch := parseMessages(data)
	if m == nil && batch == nil {
		return fmt.Errorf("mcptest: response body is not a JSON-RPC message: %q", truncate(data))
	}
	msgs := batch
	if m != nil {
		msgs = []Message{*m}
	}
	for i := range msgs {
		if err := w.dispatch(ctx, &msgs[i], ps); err != nil {
			return err
		}
	}
	if !ps.done() {
		return fmt.Errorf("mcptest: JSON response lacks the response to a request: %q", truncate(data))
	}
	return nil
}

// readStream handles a text/event-stream answer, resuming it with GET and
// Last-Event-ID if it ends early, or its connection breaks, after an event
// with an id.
func (w *sessionsWire) readStream(ctx context.Context, body io.ReadCloser, ps *pending) error {
	var (
		lastID string
		retry  time.Duration
		idle   int
	)
	for {
		progressed, err := w.consumeSSE(ctx, body, ps, &lastID, &retry)
		body.Close()
		var cut streamCut
		if errors.As(err, &cut) {
			if lastID == "" || !w.c.cfg.autoResume || ctx.Err() != nil {
				return cut.err
			}
			err = nil // a broken connection is resumed like an early end
		}
		if err != nil || ps.done() {
			return err
		}
		if lastID == "" || !w.c.cfg.autoResume {
			return ErrNoResponse
		}
		if progressed {
			idle = 0
		} else if idle++; idle > maxIdleResumes {
			return fmt.Errorf("%w (gave up after %d resumptions that brought no event)", ErrNoResponse, maxIdleResumes)
		}
		if err := sleep(ctx, retry); err != nil {
			return err
		}
		resp, err := w.get(ctx, lastID)
		if err != nil {
			return fmt.Errorf("mcptest: resuming the response stream after event %q: %w", lastID, err)
		}
		body = resp.Body
	}
}

// sleep waits for d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// streamCut is a failure to read a response stream's body: the
// connection broke (or the body ended inside an event).
type streamCut struct{ err error }

func (c streamCut) Error() string { return c.err.Error() }
func (c streamCut) Unwrap() error { return c.err }

// consumeSSE reads events from body until every pending response arrived
// or the body ends. It reports whether any event was read. A failure to
// read the body is a streamCut.
func (w *sessionsWire) consumeSSE(ctx context.Context, body io.Reader, ps *pending, lastID *string, retry *time.Duration) (bool, error) {
	progressed := false
	for ev, err := range ReadSSE(body) {
		if err != nil {
			return progressed, streamCut{err}
		}
		progressed = true
		if ev.HasID {
			*lastID = ev.ID
		}
		if ev.HasRetry {
			*retry = ev.Retry
		}
		if ev.Data == "" {
			continue // priming or retry-only event
		}
		msgs := ev.Messages()
		if msgs == nil {
			return progressed, fmt.Errorf("mcptest: SSE event data is not a JSON-RPC message: %q", truncate([]byte(ev.Data)))
		}
		for i := range msgs {
			if err := w.dispatch(ctx, &msgs[i], ps); err != nil {
				return progressed, err
			}
		}
		if ps.done() {
			return progressed, nil
		}
	}
	return progressed, nil
}

// dispatch handles one message received in answer to a POST.
func (w *sessionsWire) dispatch(ctx context.Context, m *Message, ps *pending) error {
	switch {
	case m.IsResponse():
		if !hasID(m.ID) {
			if m.Error != nil {
				return m.Error
			}
			return fmt.Errorf("mcptest: response without id: %s", mustJSON(m))
		}
		key := string(bytes.TrimSpace(m.ID))
		if !ps.want[key] {
			return fmt.Errorf("mcptest: response with unexpected id %s", key)
		}
		if ps.got[key] != nil {
			return fmt.Errorf("mcptest: second response with id %s", key)
		}
		ps.got[key] = m
		return nil
	case m.IsRequest():
		w.c.noteRequest(m)
		if err := w.c.HandleRequest(ctx, m); err != nil {
			return fmt.Errorf("mcptest: answering server request %s: %w", m.Method, err)
		}
		return nil
	case m.IsNotification():
		w.c.note(m)
		return nil
	default:
		return fmt.Errorf("mcptest: invalid JSON-RPC message: %s", mustJSON(m))
	}
}

// get issues the GET that opens (lastEventID "") or resumes an SSE stream
// and checks the status and the Content-Type.
func (w *sessionsWire) get(ctx context.Context, lastEventID string) (*http.Response, error) {
	var hdr http.Header
	if lastEventID != "" {
		hdr = http.Header{HeaderLastEventID: {lastEventID}}
	}
	req, err := w.c.request(ctx, http.MethodGet, nil, hdr, false)
	if err != nil {
		return nil, err
	}
	resp, err := w.c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	if err := wantEventStream(resp, "GET"); err != nil {
		return nil, err
	}
	return resp, nil
}

// wantEventStream checks that resp opened an SSE stream; if not, it
// closes the body and says why.
func wantEventStream(resp *http.Response, what string) error {
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		return newHTTPError(resp)
	}
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if !strings.EqualFold(ct, "text/event-stream") {
		defer resp.Body.Close()
		return fmt.Errorf("mcptest: %s answered with Content-Type %q, want text/event-stream: %w", what, resp.Header.Get("Content-Type"), newHTTPError(resp))
	}
	return nil
}

// OpenStream opens the server-to-client SSE stream of the [Sessions] era
// with an HTTP GET carrying Accept: text/event-stream and the session
// headers. A non-2xx answer (a server may answer 405) comes back as
// *[HTTPError]. ctx bounds the whole life of the stream, as for any HTTP
// request; cancelling it or calling [Stream.Close] or [Client.Close] ends
// the stream. Other eras have no GET stream ([errors.ErrUnsupported]; see
// [Client.Listen] for [Stateless]).
func (c *Client) OpenStream(ctx context.Context) (*Stream, error) {
	return c.openStream(ctx, "OpenStream", "")
}

// Resume is [Client.OpenStream] with a Last-Event-ID header, asking the
// server to replay the events of a stream after lastEventID.
func (c *Client) Resume(ctx context.Context, lastEventID string) (*Stream, error) {
	return c.openStream(ctx, "Resume", lastEventID)
}

func (c *Client) openStream(ctx context.Context, op, lastEventID string) (*Stream, error) {
	w, err := c.sessions(op)
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	resp, err := w.get(sctx, lastEventID)
	if err != nil {
		cancel()
		return nil, err
	}
	s := newStream(sctx, cancel, resp, lastEventID, nil, c.untrack)
	c.track(s)
	return s, nil
}
