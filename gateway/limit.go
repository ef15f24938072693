package gateway

import (
	"context"
	"errors"
	"sync"
	"time"
)

// ErrBusy is the cause of a list or call of an upstream that was not
// contacted because Config.MaxConcurrent requests to it were in flight
// from this replica, for longer than busyWait. It says nothing of the
// upstream's health: no breaker counts it.
var ErrBusy = errors.New("gateway: too many requests in flight to the upstream")

// The defaults of MaxConcurrent.
const (
	defaultMaxConcurrent = 64
	// busyWait is how long a request past MaxConcurrent waits for one in
	// flight to end.
	busyWait = time.Second
)

// inflight bounds the requests in flight from this replica to each
// upstream URL. An entry lives while a request holds or waits for one of
// its slots, so the map holds no more URLs than requests in flight. It is
// safe for concurrent use.
type inflight struct {
	max int // <= 0: unbounded
	mu  sync.Mutex
	m   map[string]*slots
}

type slots struct {
	sem  chan struct{} // a token per request in flight
	refs int           // requests holding or waiting for a slot
}

func newInflight(max int) *inflight { return &inflight{max: max, m: map[string]*slots{}} }

// acquire takes a slot of url, waiting up to busyWait (or until ctx
// ends) when all are taken, and returns the function that gives it back;
// ErrBusy when none came free, or ctx's error.
func (f *inflight) acquire(ctx context.Context, url string) (func(), error) {
	if f.max <= 0 {
		return func() {}, nil
	}
	f.mu.Lock()
	s := f.m[url]
	if s == nil {
		s = &slots{sem: make(chan struct{}, f.max)}
		f.m[url] = s
	}
	s.refs++
	f.mu.Unlock()
	select {
	case s.sem <- struct{}{}:
		return func() { <-s.sem; f.unref(url, s) }, nil
	default:
	}
	t := time.NewTimer(busyWait)
	defer t.Stop()
	select {
	case s.sem <- struct{}{}:
		return func() { <-s.sem; f.unref(url, s) }, nil
	case <-t.C:
		f.unref(url, s)
		return nil, ErrBusy
	case <-ctx.Done():
		f.unref(url, s)
		return nil, ctx.Err()
	}
}

func (f *inflight) unref(url string, s *slots) {
	f.mu.Lock()
	if s.refs--; s.refs == 0 {
		delete(f.m, url)
	}
	f.mu.Unlock()
}

// len is how many URLs have requests in flight or waiting.
func (f *inflight) len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.m)
}
