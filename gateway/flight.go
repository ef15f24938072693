package gateway

import (
	"context"
	"sync"
)

// flights makes concurrent fetches of one list one fetch: when a list
// expires under load, the requests that find it stale at once wait for
// one request upstream instead of each making their own. It is safe for
// concurrent use.
type flights struct {
	mu sync.Mutex
	m  map[[32]byte]*flight
}

type flight struct {
	done chan struct{}
	l    *list
	err  error
}

func newFlights() *flights { return &flights{m: map[[32]byte]*flight{}} }

// do returns the list of key that fn fetches: fn runs once for all the
// callers that ask while it runs, on a goroutine of its own with ctx's
// values but not its cancellation (fn bounds itself: Config.Timeout), so
// that the first caller's going away fails none of the others. Each
// caller waits until fn returns or its own ctx ends.
func (fs *flights) do(ctx context.Context, key [32]byte, fn func(context.Context) (*list, error)) (*list, error) {
	fs.mu.Lock()
	f, ok := fs.m[key]
	if !ok {
		f = &flight{done: make(chan struct{})}
		fs.m[key] = f
		go func() {
			f.l, f.err = fn(context.WithoutCancel(ctx))
			fs.mu.Lock()
			delete(fs.m, key)
			fs.mu.Unlock()
			close(f.done)
		}()
	}
	fs.mu.Unlock()
	select {
	case <-f.done:
		return f.l, f.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
