package mcphandler

import (
	"context"
	"time"

	"github.com/mcphandler/mcphandler/internal/jsonrpc"
)

// The caller checks of a POST's stream (see reauth.go): the watch a wait
// arms, the check before a confirmed or approved call runs, and the check
// of the final message.

// callerWatch re-checks the caller of a POST while it waits: Authenticate
// every KeepAlive and the caller's expiry, on timers of their own (no
// goroutine between checks). When a check fails, the stream ends with the
// failure (stream.loseLocked) and ctx is cancelled with errCallerLost, so
// that every wait on the stream ends. Its fields but ctx are guarded by
// the stream's mu.
type callerWatch struct {
	ctx     context.Context
	cancel  context.CancelCauseFunc
	tick    *time.Timer // Authenticate again; nil without Authenticate
	exp     *time.Timer // the expiry; nil while none is known
	expAt   time.Time
	stopped bool           // the request ended or the caller failed: no more checks
	failed  *callerFailure // the caller failed: the stream ended with it
}

// newCallerWatch returns a watch without checks yet.
func newCallerWatch() *callerWatch {
	w := &callerWatch{}
	w.ctx, w.cancel = context.WithCancelCause(context.Background())
	return w
}

// watchCaller arms the caller watch of s, once per stream, and returns the
// channel closed when its caller fails a check. It returns nil when
// nothing can fail: the stream has no caller (it is not a POST's, or the
// handler answers for a replica that took a call over), or there is
// neither an Authenticate hook nor an expiry. Every wait of a POST calls
// it before it starts waiting, and selects on what it returns.
func (s *stream) watchCaller() <-chan struct{} {
	if s == nil || s.caller == nil || !s.caller.checkable() {
		return nil
	}
	if w := s.watch.Load(); w != nil {
		return w.ctx.Done()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if w := s.watch.Load(); w != nil {
		return w.ctx.Done()
	}
	w := newCallerWatch()
	s.watch.Store(w)
	if s.done {
		w.stopped = true // nothing left to wait for
		return w.ctx.Done()
	}
	rq := s.caller
	if rq.h.cfg.Authenticate != nil {
		w.tick = time.AfterFunc(rq.h.cfg.Sessions.KeepAlive, s.tickCaller)
	}
	w.expire(s, rq.id.Expires)
	return w.ctx.Done()
}

// watchContext returns ctx, cancelled too (with errCallerLost as the
// cause) when the stream's caller fails a check, and what releases it:
// the wait of a call that takes a context (a task's result, an approval)
// arms the watch with it.
func (s *stream) watchContext(ctx context.Context) (context.Context, func()) {
	if s.watchCaller() == nil {
		return ctx, func() {}
	}
	w := s.watch.Load()
	c, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(w.ctx, func() { cancel(errCallerLost) })
	return c, func() { stop(); cancel(nil) }
}

// tickCaller is the watch's KeepAlive check: Authenticate runs without
// the stream's lock (it may be slow), then the stream ends or the next
// check is due.
func (s *stream) tickCaller() {
	rq := s.caller
	got, err := rq.h.streams.recheckWait(rq.r, rq.id)
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.watch.Load()
	if w.stopped || s.done {
		return
	}
	if err != nil {
		s.loseLocked(rq.h.streams.authFailure(rq.r, err))
		return
	}
	w.expire(s, got.Expires)
	w.tick.Reset(rq.h.cfg.Sessions.KeepAlive)
}

// expire moves the watch's expiry earlier to t (a zero or later t changes
// nothing); at the expiry the stream ends. s.mu is held, or w is not
// shared yet.
func (w *callerWatch) expire(s *stream, t time.Time) {
	if t.IsZero() || !w.expAt.IsZero() && !t.Before(w.expAt) {
		return
	}
	w.expAt = t
	if w.exp == nil {
		w.exp = time.AfterFunc(time.Until(t), s.expireCaller)
	} else {
		w.exp.Reset(time.Until(t))
	}
}

// expireCaller ends the stream at its caller's expiry.
func (s *stream) expireCaller() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w := s.watch.Load(); w.stopped || s.done {
		return
	}
	s.loseLocked(s.caller.h.streams.authFailure(s.caller.r, errCredentialsExpired))
}

// stopLocked ends the watch's checks.
func (w *callerWatch) stopLocked() {
	w.stopped = true
	if w.tick != nil {
		w.tick.Stop()
	}
	if w.exp != nil {
		w.exp.Stop()
	}
}

// unwatch stops the watch of rq's stream when rq ends (serveRequest):
// after it, nothing is written to the response on rq's behalf. A request
// whose caller failed is reported to Config.Interceptors with the error
// the client got.
func (rq *request) unwatch() {
	s := rq.st
	w := s.watch.Load()
	if w == nil {
		return
	}
	s.mu.Lock()
	w.stopLocked()
	f := w.failed
	s.mu.Unlock()
	if f != nil {
		rq.ic.failed(rpcError(f.code, f.msg)) // intercept.go
	}
}

// loseLocked ends the stream because its caller failed (f): the failure
// is its final message, every wait on it ends, and nothing more is sent.
func (s *stream) loseLocked(f *callerFailure) {
	w := s.watch.Load()
	if w == nil {
		w = newCallerWatch()
		s.watch.Store(w)
	}
	w.stopLocked()
	w.failed = f
	w.cancel(errCallerLost)
	s.finishLocked(jsonrpc.AppendError(nil, s.caller.msgID, rpcError(f.code, f.msg)), f)
}

// callerLost reports whether the stream ended because its caller failed.
func (s *stream) callerLost() bool {
	if s.watch.Load() == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.watch.Load().failed != nil
}

// callerHolds checks the stream's caller now — Authenticate and the
// expiry — and reports whether it still holds; when it does not, the
// stream ends with the failure. A confirmed or approved call checks it
// before it runs, so that a decision made after its caller's credentials
// failed never runs the tool on that caller's request.
func (s *stream) callerHolds() bool {
	if s == nil || s.caller == nil {
		return true
	}
	f := s.callerFailure(true)
	s.mu.Lock()
	defer s.mu.Unlock()
	if f != nil && !s.done {
		s.loseLocked(f)
	}
	w := s.watch.Load()
	return w == nil || w.failed == nil
}

// checkable reports whether anything can fail rq's caller: an
// Authenticate hook or an expiry.
func (rq *request) checkable() bool {
	return rq.h.cfg.Authenticate != nil || !rq.id.Expires.IsZero()
}

// callerFailure checks the caller of s before its final message goes, or
// with always before a decision runs: the expiry, then (with always, or
// for a request that waited or is older than KeepAlive) Authenticate. It
// returns the failure, or nil. A request that answers quickly pays a
// clock read.
func (s *stream) callerFailure(always bool) *callerFailure {
	rq := s.caller
	if rq == nil || !rq.checkable() {
		return nil
	}
	h, now := rq.h, time.Now()
	if exp := rq.id.Expires; !exp.IsZero() && !now.Before(exp) {
		return h.streams.authFailure(rq.r, errCredentialsExpired)
	}
	if h.cfg.Authenticate == nil || !always && s.watch.Load() == nil && now.Sub(rq.start) < h.cfg.Sessions.KeepAlive {
		return nil
	}
	got, err := h.streams.recheckWait(rq.r, rq.id)
	if err == nil && !got.Expires.IsZero() && !now.Before(got.Expires) {
		err = errCredentialsExpired
	}
	if err != nil {
		return h.streams.authFailure(rq.r, err)
	}
	return nil
}
