package upstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"
)

// Media types of MCP over HTTP.
const (
	typeJSON = "application/json"
	typeSSE  = "text/event-stream"
)

// send makes one HTTP request to target with the endpoint's Header, then
// what its Headers hook adds (but the protocol's headers), then the
// headers set adds (which win), and returns the response. The
// client's errors are wrapped with op; the ctx's error is returned as
// the ctx's error.
func (e *endpoint) send(ctx context.Context, op, method, target string, body []byte, set func(http.Header)) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return nil, fmt.Errorf("upstream: %s: %w", op, err)
	}
	for k, vs := range e.header {
		if k = http.CanonicalHeaderKey(k); !protocolHeader(k) {
			req.Header[k] = append(req.Header[k], vs...)
		}
	}
	if e.headers != nil {
		e.headers(ctx, req.Header)
		for k := range req.Header {
			if protocolHeader(http.CanonicalHeaderKey(k)) {
				delete(req.Header, k)
			}
		}
	}
	if body != nil {
		req.Header.Set("Content-Type", typeJSON)
		req.Header.Set("Accept", typeJSON+", "+typeSSE)
	}
	if set != nil {
		set(req.Header)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctxErr(ctx)
		}
		return nil, fmt.Errorf("upstream: %s: %w", op, err)
	}
	return resp, nil
}

// protocolHeader reports whether the canonical header name k is one the
// protocol sets, which Endpoint.Header never provides.
func protocolHeader(k string) bool {
	switch k {
	case "Content-Type", "Accept", "Mcp-Protocol-Version", "Mcp-Session-Id", "Mcp-Method", "Mcp-Name", "Last-Event-Id":
		return true
	}
	return strings.HasPrefix(k, "Mcp-Param-")
}

// ctxErr is why ctx ended: its cause if it has one, else its error.
func ctxErr(ctx context.Context) error {
	if c := context.Cause(ctx); c != nil {
		return c
	}
	return ctx.Err()
}

// readErr is the error of a read that failed: the ctx's when it ended
// (the transport then reports its own words for it).
func readErr(ctx context.Context, err error) error {
	if ctx.Err() != nil && !errors.Is(err, ErrTooLarge) {
		return ctxErr(ctx)
	}
	return err
}

// discard reads what is left of a body, at most 64 KiB of it, so that its
// connection can be reused, and closes it.
func discard(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
}

// statusError is the error of an answer with a status other than 2xx:
// the JSON-RPC error its body carries, if it is one, else the body's start
// (both cut). It closes the body.
func (e *endpoint) statusError(op string, resp *http.Response) error {
	defer discard(resp)
	se := &StatusError{Op: op, StatusCode: resp.StatusCode}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, min(e.max, 64<<10)))
	if mediaType(resp) == typeJSON {
		if ms, err := decodeMessages(b); err == nil && len(ms) == 1 && ms[0].Error != nil {
			se.RPC = rpcError(ms[0].Error)
			return se
		}
	}
	se.Body = cutText(string(bytes.TrimSpace(b)))
	return se
}

// mediaType is the response's Content-Type without parameters, or "".
func mediaType(resp *http.Response) string {
	t, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil {
		return ""
	}
	return t
}

// inbox reads the messages of one answer: a JSON body (one message or a
// batch) or an SSE stream of them, within the endpoint's MaxResponseBytes.
type inbox struct {
	ctx   context.Context
	body  io.ReadCloser
	sse   *sseReader // nil for a JSON body
	queue []message  // decoded, not yet returned
}

// openInbox checks an answer to a request (2xx, and a JSON or SSE
// Content-Type) and returns its reader. left is the byte budget, shared by
// the reconnections of one request. The response is closed on error;
// otherwise the inbox closes it.
func (e *endpoint) openInbox(ctx context.Context, op string, resp *http.Response, left *int64) (*inbox, error) {
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, e.statusError(op, resp)
	}
	in := &inbox{ctx: ctx, body: resp.Body}
	lr := &limitReader{r: resp.Body, left: left, what: "a response", max: e.max}
	switch t := mediaType(resp); t {
	case typeJSON:
		b, err := io.ReadAll(lr)
		if err != nil {
			discard(resp)
			return nil, readErr(ctx, err)
		}
		ms, err := decodeMessages(b)
		if err != nil {
			discard(resp)
			return nil, err
		}
		in.queue = ms
	case typeSSE:
		lr.what = "an SSE stream"
		in.sse = newSSEReader(lr, int(e.max), int(e.max))
	default:
		discard(resp)
		return nil, fmt.Errorf("%w: %s answered with Content-Type %q", ErrMalformed, op, cutText(resp.Header.Get("Content-Type")))
	}
	return in, nil
}

// next returns the next message. At the end of the answer it returns
// io.EOF (or errIncomplete for an SSE stream that ended inside an event).
func (in *inbox) next() (message, error) {
	for len(in.queue) == 0 {
		if in.sse == nil {
			return message{}, io.EOF
		}
		ev, err := in.sse.next()
		if err != nil {
			return message{}, readErr(in.ctx, err)
		}
		if ev.name != "" && ev.name != "message" {
			continue
		}
		ms, err := decodeMessages(ev.data)
		if err != nil {
			return message{}, err
		}
		in.queue = ms
	}
	m := in.queue[0]
	in.queue = in.queue[1:]
	return m, nil
}

// resumable reports the SSE event id to resume from and how long to wait
// first, when the answer was an SSE stream that gave one.
func (in *inbox) resumable() (string, time.Duration, bool) {
	if in.sse == nil || in.sse.lastID == "" {
		return "", 0, false
	}
	return in.sse.lastID, in.sse.retry, true
}

func (in *inbox) close() { _ = in.body.Close() }

// accepted checks the answer to a notification or a response POSTed to
// the upstream: any 2xx, its body discarded.
func (e *endpoint) accepted(op string, resp *http.Response) error {
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return e.statusError(op, resp)
	}
	discard(resp)
	return nil
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctxErr(ctx)
	}
}

// cleanup returns a context for ending a session after ctx ended: not
// cancelled with ctx, bounded by cleanupTimeout (or the endpoint's Timeout,
// if shorter).
func (e *endpoint) cleanup(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), min(cleanupTimeout, e.timeout))
}
