package upstream

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/mcphandler/mcphandler/internal/jsonrpc"
)

// legacyVersion is the revision of the HTTP+SSE transport.
const legacyVersion = "2024-11-05"

// legacy is one session of the 2024-11-05 HTTP+SSE transport (see
// https://modelcontextprotocol.io/specification/2024-11-05/basic/transports#http-with-sse):
// a GET stream, whose first event names the endpoint that messages are
// POSTed to, and which carries every answer and question of the upstream.
// Closing the stream ends the session.
//
// A goroutine of its own (pump) reads the stream and hands its events to
// the operation's goroutine, which does everything else; close stops the
// pump and waits for it.
type legacy struct {
	c        *call
	msgURL   string // the message URL (the endpoint event's)
	version  string // "" until initialize succeeded
	nextID   int
	inflight []byte // the id of a request sent and not yet answered
	logging  bool
	// toolsChanged: the upstream declared tools.listChanged (WatchTools).
	toolsChanged bool

	stop   context.CancelFunc // ends the GET
	events chan pumped        // from the pump
	quit   chan struct{}      // closed by close: the pump stops sending
	wg     sync.WaitGroup     // the pump
}

// pumped is one event of the stream, or why it ended.
type pumped struct {
	ev  event
	err error
}

// openLegacy opens the stream, reads its endpoint event (which must name a
// URL of the stream's own origin: the endpoint's Header goes there), then
// initializes as openSession does. The session is returned even on error:
// close it.
func openLegacy(ctx context.Context, c *call) (*legacy, error) {
	l := &legacy{c: c, events: make(chan pumped), quit: make(chan struct{})}
	// The stream outlives ctx until close, which sends notifications/cancelled
	// on the session the stream holds.
	gctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	l.stop = stop
	if err := l.connect(ctx, gctx); err != nil {
		if ctx.Err() != nil {
			err = ctxErr(ctx)
		}
		return l, err
	}

	p, err := l.nextEvent(ctx)
	if err != nil {
		return l, err
	}
	if p.name != "endpoint" {
		return l, fmt.Errorf("%w: the stream's first event is not the endpoint", ErrMalformed)
	}
	if l.msgURL, err = c.ep.sameOrigin(strings.TrimSpace(string(p.data))); err != nil {
		return l, err
	}

	res, err := l.roundTrip(ctx, "initialize", c.withMeta([]member{
		{"protocolVersion", str(legacyVersion)},
		{"capabilities", c.caps.raw},
		{"clientInfo", c.ep.clientInfo},
	}))
	if err != nil {
		return l, err
	}
	m := members(res)
	v, _ := jsonrpc.String(m["protocolVersion"])
	if v != legacyVersion && !slices.Contains(sessionVersions, v) {
		return l, fmt.Errorf("%w: initialize agreed on version %q", ErrUnsupported, cutText(v))
	}
	l.version = v
	if caps := m["capabilities"]; isObjectBytes(caps) {
		_, l.logging = members(caps)["logging"]
		l.toolsChanged = toolsListChanged(caps)
	}
	if err := l.post(ctx, "POST notifications/initialized", jsonrpc.AppendRequest(nil, nil, "notifications/initialized", nil)); err != nil {
		return l, err
	}
	if c.ep.logLevel != "" && l.logging {
		_, err := l.roundTrip(ctx, "logging/setLevel", c.withMeta([]member{{"level", str(c.ep.logLevel)}}))
		if _, refused := err.(*RPCError); err != nil && !refused {
			return l, err
		}
	}
	return l, nil
}

// connect GETs the stream on gctx and starts the pump on it. Until the pump
// runs, the end of ctx ends gctx too, so that an upstream that holds back
// the stream's header or trickles an error body holds nothing past ctx.
func (l *legacy) connect(ctx, gctx context.Context) error {
	defer context.AfterFunc(ctx, l.stop)()
	ep := l.c.ep
	resp, err := ep.send(gctx, "GET", http.MethodGet, ep.url.String(), nil, func(h http.Header) {
		h.Set("Accept", typeSSE)
	})
	if err != nil {
		return err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return ep.statusError("GET", resp)
	}
	if t := mediaType(resp); t != typeSSE {
		discard(resp)
		return fmt.Errorf("%w: GET answered with Content-Type %q", ErrMalformed, cutText(resp.Header.Get("Content-Type")))
	}
	left := ep.max
	r := newSSEReader(&limitReader{r: resp.Body, left: &left, what: "an SSE stream", max: ep.max}, int(ep.max), int(ep.max))
	l.wg.Add(1)
	go l.pump(r, resp.Body)
	return nil
}

// sameOrigin resolves the endpoint event's URL against the stream's and
// checks it has the same scheme, host and port.
func (e *endpoint) sameOrigin(ref string) (string, error) {
	r, err := url.Parse(ref)
	if err != nil || ref == "" {
		return "", fmt.Errorf("%w: the endpoint event holds no URL", ErrMalformed)
	}
	u := e.url.ResolveReference(r)
	if u.Scheme != e.url.Scheme || u.Host != e.url.Host || r.User != nil {
		return "", fmt.Errorf("%w: the endpoint event names another origin", ErrMalformed)
	}
	return u.String(), nil
}

// pump reads the stream's events into l.events until it ends or close.
func (l *legacy) pump(r *sseReader, body io.ReadCloser) {
	defer l.wg.Done()
	defer body.Close()
	for {
		ev, err := r.next()
		select {
		case l.events <- pumped{ev, err}:
		case <-l.quit:
			return
		}
		if err != nil {
			return
		}
	}
}

// nextEvent waits for the stream's next event with data; the end of the
// stream is ErrMalformed (the session ended under the operation).
func (l *legacy) nextEvent(ctx context.Context) (event, error) {
	ev, err := l.next(ctx)
	if err == io.EOF || err == errIncomplete {
		return event{}, fmt.Errorf("%w: the SSE stream ended", ErrMalformed)
	}
	return ev, err
}

// next waits for the stream's next event with data. At the end of the
// stream it returns io.EOF (or errIncomplete, when it ended inside an
// event).
func (l *legacy) next(ctx context.Context) (event, error) {
	select {
	case p := <-l.events:
		return p.ev, p.err
	case <-ctx.Done():
		return event{}, ctxErr(ctx)
	}
}

// request sends one request of the operation (tools/call carries the
// call's progress token) and returns its result.
func (l *legacy) request(ctx context.Context, method string, params []member, _ string) ([]byte, error) {
	return l.roundTrip(ctx, method, l.c.withMeta(params, l.c.progressMeta(method)))
}

// roundTrip POSTs the request to the endpoint and handles the stream's
// messages until its response.
func (l *legacy) roundTrip(ctx context.Context, method string, params []byte) ([]byte, error) {
	l.nextID++
	id := []byte(itoa(l.nextID))
	if method != "initialize" { // which must never be cancelled
		// In flight from before it is sent: the upstream may run it before
		// it accepts it.
		l.inflight = id
	}
	if err := l.post(ctx, "POST "+method, jsonrpc.AppendRequest(nil, id, method, params)); err != nil {
		return nil, err
	}
	for {
		ev, err := l.nextEvent(ctx)
		if err != nil {
			return nil, err
		}
		if ev.name != "" && ev.name != "message" {
			continue
		}
		ms, err := decodeMessages(ev.data)
		if err != nil {
			return nil, err
		}
		for i := range ms {
			res, done, err := l.c.handle(ctx, &ms[i], id, l.reply)
			if done {
				l.inflight = nil
			}
			if done || err != nil {
				return res, err
			}
		}
	}
}

// post POSTs one message to the endpoint; any 2xx accepts it.
func (l *legacy) post(ctx context.Context, op string, msg []byte) error {
	resp, err := l.c.ep.send(ctx, op, http.MethodPost, l.msgURL, msg, nil)
	if err != nil {
		return err
	}
	return l.c.ep.accepted(op, resp)
}

func (l *legacy) reply(ctx context.Context, msg []byte) error {
	return l.post(ctx, "POST response", msg)
}

// close ends the session, even after ctx ended (within cleanupTimeout):
// notifications/cancelled for a request still unanswered, then the end of
// the stream. It waits for the pump.
func (l *legacy) close(ctx context.Context) {
	if l.inflight != nil && l.version != "" {
		cctx, cancel := l.c.ep.cleanup(ctx)
		_ = l.post(cctx, "POST notifications/cancelled", jsonrpc.AppendRequest(nil, nil, "notifications/cancelled", object(
			member{"requestId", l.inflight},
			member{"reason", str("the gateway's call ended")},
		)))
		cancel()
	}
	l.stop()
	close(l.quit)
	l.wg.Wait()
}
