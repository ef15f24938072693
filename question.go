package mcphandler

import (
	"context"

	"github.com/mcphandler/mcphandler/internal/jsonrpc"
	"github.com/mcphandler/mcphandler/session"
)

// question is one server-to-client request on the stream of a POST of a
// 2025 session, and what its wait selects on: what answers it (replies),
// the client's disconnect (gone) and the caller's failed re-check (lost).
// Every wait for the client asks through one: a tool's question
// (Exchange.request), a confirm (confirmCall.wait) and an approval's URL
// elicitation (confirmCall.waitApproval). What an answer means, and what
// else the wait selects on, is the asker's.
//
// The client posts its response to any replica, which publishes it,
// signed, on the question's reply channel (deliverResponse); the question
// subscribes to that channel before its request is sent, so no answer is
// missed. A question belongs to the goroutine that asked it, which closes
// it when its wait ends.
type question struct {
	bus     *replicaBus
	st      *stream
	id      []byte               // the request's id, as JSON
	channel string               // replyChannel of the session and the id
	sub     session.Subscription // nil: the subscription failed (see hearing)

	// gone is closed when the client's connection for the request ends.
	gone <-chan struct{}
	// lost is closed when the request's caller fails a re-check (see
	// stream.watchCaller); nil when nothing can fail it.
	lost <-chan struct{}
}

// hearing is what a question does when it cannot subscribe to its reply
// channel.
type hearing uint8

const (
	// mustHear: the failure is the question's: nothing is watched or
	// sent, and the asker gets the store's error.
	mustHear hearing = iota
	// mayNotHear: the question goes on without replies, for an asker that
	// learns the answer another way (an approval's decision).
	mayNotHear
)

// newQuestion prepares the question id of x's session, in this order:
// it subscribes to its reply channel in ctx, then arms the watch of x's
// caller (stream.watchCaller). It sends nothing: send puts the request on
// the stream. A failed subscription returns the store's error and a nil
// question with mustHear; with mayNotHear the question has no replies and
// the error is nil. x must have a session.
func newQuestion(ctx context.Context, rb *replicaBus, x *Exchange, id string, h hearing) (*question, error) {
	q := &question{bus: rb, st: x.st, id: jsonrpc.AppendString(nil, id), channel: replyChannel(x.sess.ID, id), gone: x.gone}
	switch sub, err := rb.cfg.Store.Subscribe(ctx, q.channel); {
	case err == nil:
		q.sub = sub
	case h == mustHear:
		return nil, err
	}
	q.lost = q.st.watchCaller()
	return q, nil
}

// send puts the request, method with params, on the stream (SSE). Its
// error is the stream's: the client cannot be reached on it.
func (q *question) send(method string, params []byte) error {
	return q.st.send(jsonrpc.AppendRequest(nil, q.id, method, params))
}

// replies delivers the signed messages published for the question, each
// to be verified with open; it is closed if the subscription ends (the
// store's connection was lost), and nil for a question without a
// subscription, which never delivers.
func (q *question) replies() <-chan []byte {
	if q.sub == nil {
		return nil
	}
	return q.sub.C()
}

// open verifies a message received from replies and returns its payload,
// a reply; a message that does not verify is dropped (logged, rate
// limited) and open reports false.
func (q *question) open(b []byte) ([]byte, bool) {
	return q.bus.openMessage(q.bus.macs.reply, q.channel, b)
}

// cancel tells the client the server stopped waiting for the answer
// (notifications/cancelled); a stream that cannot carry it is ignored.
func (q *question) cancel() {
	stoppedWaiting(q.st, q.id)
}

// close ends the subscription. It is safe to call more than once.
func (q *question) close() {
	if q.sub != nil {
		q.sub.Close()
	}
}

// stoppedWaiting sends on st the notifications/cancelled of the request
// id (JSON) the server no longer waits for; its error is ignored (the
// client is gone, or will not be told).
func stoppedWaiting(st *stream, id []byte) {
	p := append([]byte(`{"requestId":`), id...)
	p = append(p, `,"reason":"the server stopped waiting"}`...)
	st.send(jsonrpc.AppendRequest(nil, nil, "notifications/cancelled", p))
}
