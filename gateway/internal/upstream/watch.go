package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/mcphandler/mcphandler/internal/jsonrpc"
)

// The conditions that end a watch besides those of every operation (see
// [WatchTools]).
var (
	// ErrNoListChanged: the upstream does not notify changes of its tool
	// list: it does not declare them, refuses to deliver them, or has no
	// stream to deliver them on. Watching it again will not help.
	ErrNoListChanged = errors.New("upstream: the upstream does not notify tool list changes")
	// ErrWatchEnded: the upstream ended the watch's stream (it closed it,
	// or answered subscriptions/listen). Nothing is wrong: watch again.
	ErrWatchEnded = errors.New("upstream: the upstream ended the watch")
)

// Methods and keys of a watch.
const (
	methodToolsChanged = "notifications/tools/list_changed"
	methodAcknowledged = "notifications/subscriptions/acknowledged"
	metaSubscriptionID = reservedMeta + "subscriptionId"
)

// WatchTools watches the upstream's tool list for the downstream client
// whose capabilities are caps (nil: none), and calls changed for each
// notifications/tools/list_changed the upstream sends; other
// notifications are ignored. With ep.Era Probe it runs [Detect] first.
// In each era:
//
//   - Stateless: POST subscriptions/listen with the filter
//     {"toolsListChanged":true}, the _meta and the headers every request
//     carries. The answer's first message must be
//     notifications/subscriptions/acknowledged (carrying, if any, the
//     listen request's id as its subscriptionId); after it, a
//     notification counts only if its _meta
//     "io.modelcontextprotocol/subscriptionId" is the listen request's id,
//     the same JSON value. The upstream's requests on the stream, which
//     this era cannot answer, are ignored.
//   - Sessions: a session of its own (initialize, notifications/initialized),
//     then GET with Accept: text/event-stream and the session's headers;
//     the notifications come on that stream. The session is ended
//     (DELETE) when the watch ends, within 5 more seconds. A stream that
//     breaks off is not resumed.
//   - Legacy: a session of its own (the GET stream, initialize,
//     notifications/initialized), whose stream carries the notifications.
//
// In Sessions and Legacy the upstream's requests on the stream are
// answered as during [ListTools]: ping is, anything else is refused with
// -32601, at most 64 per watch ([ErrTooMany]); each answer is bounded by
// the Timeout. No log messages are asked for: Endpoint.LogLevel is not
// used.
//
// WatchTools blocks, and never reconnects, until one of:
//
//   - ctx ends: it returns ctx's error (its cause, if it has one);
//   - the upstream cannot notify: an error that is [ErrNoListChanged]
//     when initialize's capabilities do not say tools.listChanged is true
//     (Sessions, Legacy), GET is answered 405 (Sessions), subscriptions/listen
//     is answered -32601 or acknowledged without toolsListChanged true
//     (Stateless). Watching again will not help;
//   - the upstream ends the stream, closing it or answering
//     subscriptions/listen with a result: an error that is [ErrWatchEnded];
//   - anything else: the errors of the other operations (*StatusError,
//     *RPCError, [ErrMalformed], [ErrTooLarge], [ErrTooMany], [ErrUnsupported],
//     the HTTP client's), or the stream broke off.
//
// But for ErrNoListChanged, the caller may watch again, after a backoff of
// its own. A change made while no watch is open is not notified: list the
// tools again after each (re)connection.
//
// Bounds: Endpoint.Timeout (60 s by default) bounds the connection —
// Detect, the session's opening, and the wait for the GET's answer or for
// the listen's acknowledgement — and not the watch that follows, which
// ctx alone bounds in time. Endpoint.MaxResponseBytes (4 MiB by default)
// bounds the whole stream, keep-alives included, as for any SSE answer:
// a watch that received that much ends with [ErrTooLarge] (at a few bytes
// per keep-alive and about a hundred per notification, after tens of
// thousands of them), and the caller watches again. The HTTP client's own
// Timeout (Endpoint.HTTP), if set, bounds each exchange with its body, so
// it ends the watch after that long too: leave it zero for watches.
// Redirects are never followed, so Endpoint.Header goes nowhere but
// Endpoint.URL's origin (Legacy: the message endpoint on that origin).
//
// Concurrency: changed is called from WatchTools' goroutine, one call at a
// time, never after WatchTools returned. The stream is not read while it
// runs, so notifications that come faster wait in the connection rather
// than pile up, and WatchTools returns only once changed has returned.
// WatchTools is safe for concurrent use; each watch has its own session or
// stream, and has ended everything it started (Legacy's reading goroutine
// included) when it returns.
func WatchTools(ctx context.Context, ep Endpoint, caps json.RawMessage, changed func()) error {
	if changed == nil {
		return errors.New("upstream: WatchTools needs a changed function")
	}
	e, err := ep.check()
	if err != nil {
		return err
	}
	cc, err := parseCaps(caps)
	if err != nil {
		return err
	}
	e.logLevel = "" // a watch relays no log messages: it asks for none

	// cctx bounds the connection. The stream's requests run on sctx, which
	// only ctx ends once the watch is connected: until then the end of
	// cctx ends it too.
	cctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	sctx, cancelStream := context.WithCancelCause(ctx)
	defer cancelStream(nil)
	stop := context.AfterFunc(cctx, func() { cancelStream(context.Cause(cctx)) })
	defer stop()
	w := &watch{c: &call{ep: e, caps: cc}, changed: changed, connected: func() { stop() }}

	era := ep.Era
	if era == Probe {
		if era, _, err = detect(cctx, e); err != nil {
			return err
		}
	}
	switch era {
	case Stateless:
		return w.stateless(sctx)
	case Sessions:
		return w.sessions(cctx, sctx)
	case Legacy:
		return w.legacy(cctx, sctx)
	}
	return fmt.Errorf("upstream: unknown era %v", era)
}

// watch is one WatchTools. It is used by one goroutine.
type watch struct {
	c         *call
	changed   func()
	connected func() // the connection is made: the Timeout no longer ends the stream
	sub       []byte // Stateless: the listen request's id, which tags its notifications
}

// stateless watches with subscriptions/listen, on sctx.
func (w *watch) stateless(sctx context.Context) error {
	st := &stateless{c: w.c}
	id, in, err := st.open(sctx, "subscriptions/listen",
		[]member{{"notifications", []byte(`{"toolsListChanged":true}`)}}, "")
	if err != nil {
		return listenRefused(err)
	}
	defer in.close()
	m, err := in.next()
	switch {
	case err == io.EOF || err == errIncomplete:
		return fmt.Errorf("%w: the answer to subscriptions/listen ended before its acknowledgement", ErrMalformed)
	case err != nil:
		return err
	}
	if m.kind == jsonrpc.KindResponse {
		if _, _, err := w.c.handle(sctx, &m, id, nil); err != nil {
			return listenRefused(err)
		}
		return fmt.Errorf("%w: subscriptions/listen answered without an acknowledgement", ErrMalformed)
	}
	if m.kind != jsonrpc.KindNotification || m.Method != methodAcknowledged || !isObjectBytes(m.Params) {
		return fmt.Errorf("%w: the first message of subscriptions/listen's answer is not its acknowledgement", ErrMalformed)
	}
	p := members(m.Params)
	if tag, ok := subscriptionID(m.Params); ok && !bytes.Equal(tag, id) {
		return fmt.Errorf("%w: an acknowledgement of another subscription", ErrMalformed)
	}
	if f := p["notifications"]; !isObjectBytes(f) || string(members(f)["toolsListChanged"]) != "true" {
		return fmt.Errorf("%w: subscriptions/listen was acknowledged without toolsListChanged", ErrNoListChanged)
	}
	w.connected()
	w.sub = id
	return w.run(sctx, in.next, nil)
}

// listenRefused is err, or ErrNoListChanged when err is the upstream's
// -32601 to subscriptions/listen (as a JSON-RPC error or in an HTTP error's
// body).
func listenRefused(err error) error {
	var re *RPCError
	if errors.As(err, &re) && re.Code == jsonrpc.CodeMethodNotFound {
		return fmt.Errorf("%w: subscriptions/listen is not served (%v)", ErrNoListChanged, err)
	}
	return err
}

// sessions watches with the GET stream of a session opened on cctx; the
// GET runs on sctx.
func (w *watch) sessions(cctx, sctx context.Context) error {
	s, err := openSession(cctx, w.c)
	defer s.close(sctx)
	if err != nil {
		return err
	}
	if !s.toolsChanged {
		return fmt.Errorf("%w: initialize does not declare tools.listChanged", ErrNoListChanged)
	}
	ep := w.c.ep
	resp, err := ep.send(sctx, "GET", http.MethodGet, ep.url.String(), nil, func(h http.Header) {
		h.Set("Accept", typeSSE)
		s.headers(h)
	})
	w.connected()
	if err != nil {
		return err
	}
	switch {
	case resp.StatusCode == http.StatusMethodNotAllowed:
		discard(resp)
		return fmt.Errorf("%w: GET answered 405: the upstream offers no stream", ErrNoListChanged)
	case resp.StatusCode >= 200 && resp.StatusCode <= 299 && mediaType(resp) != typeSSE:
		discard(resp)
		return fmt.Errorf("%w: GET answered with Content-Type %q", ErrMalformed, cutText(resp.Header.Get("Content-Type")))
	}
	left := ep.max
	in, err := ep.openInbox(sctx, "GET", resp, &left)
	if err != nil {
		return err
	}
	defer in.close() // before the session's end
	return w.run(sctx, in.next, s.reply)
}

// legacy watches with the stream of a session opened on cctx, read until
// sctx ends.
func (w *watch) legacy(cctx, sctx context.Context) error {
	l, err := openLegacy(cctx, w.c)
	defer l.close(sctx)
	w.connected()
	if err != nil {
		return err
	}
	if !l.toolsChanged {
		return fmt.Errorf("%w: initialize does not declare tools.listChanged", ErrNoListChanged)
	}
	var queue []message
	next := func() (message, error) {
		for len(queue) == 0 {
			ev, err := l.next(sctx)
			if err != nil {
				return message{}, err
			}
			if ev.name != "" && ev.name != "message" {
				continue
			}
			if queue, err = decodeMessages(ev.data); err != nil {
				return message{}, err
			}
		}
		m := queue[0]
		queue = queue[1:]
		return m, nil
	}
	return w.run(sctx, next, l.reply)
}

// run handles the stream's messages, from next, until it ends or fails:
// a tools list change calls changed, other notifications are dropped, a
// request is answered with reply (as during a list: handle with no Asker)
// or ignored when reply is nil, and a response is the listen's end
// (Stateless) or ErrMalformed.
func (w *watch) run(ctx context.Context, next func() (message, error), reply replyFunc) error {
	for {
		m, err := next()
		switch {
		case err == io.EOF || err == errIncomplete:
			return fmt.Errorf("%w: the stream closed", ErrWatchEnded)
		case err != nil && (ctx.Err() != nil || errors.Is(err, ErrTooLarge) || errors.Is(err, ErrMalformed)):
			return err
		case err != nil:
			return fmt.Errorf("upstream: the watch's stream broke off: %w", err)
		}
		switch m.kind {
		case jsonrpc.KindNotification:
			if m.Method == methodToolsChanged && w.ours(m.Params) {
				w.changed()
			}
			continue
		case jsonrpc.KindRequest:
			if reply == nil {
				continue // Stateless: no way to answer
			}
		}
		rctx, cancel := context.WithTimeout(ctx, w.c.ep.timeout)
		_, done, err := w.c.handle(rctx, &m, w.sub, reply)
		cancel()
		if err != nil {
			return err
		}
		if done {
			return fmt.Errorf("%w: subscriptions/listen was answered", ErrWatchEnded)
		}
	}
}

// ours reports whether a notification with params is for this watch: on
// Stateless, whether it carries the listen request's id as its
// subscriptionId; in the other eras, every notification on the stream is.
func (w *watch) ours(params []byte) bool {
	if w.sub == nil {
		return true
	}
	tag, ok := subscriptionID(params)
	return ok && bytes.Equal(tag, w.sub)
}

// subscriptionID returns the _meta "io.modelcontextprotocol/subscriptionId"
// of a notification's params, as sent, if it has one.
func subscriptionID(params []byte) ([]byte, bool) {
	if !isObjectBytes(params) {
		return nil, false
	}
	meta := members(params)["_meta"]
	if !isObjectBytes(meta) {
		return nil, false
	}
	tag, ok := members(meta)[metaSubscriptionID]
	return tag, ok
}

// toolsListChanged reports whether a server's capabilities object (valid
// JSON) declares tools.listChanged true.
func toolsListChanged(caps []byte) bool {
	tools := members(caps)["tools"]
	return isObjectBytes(tools) && string(members(tools)["listChanged"]) == "true"
}
