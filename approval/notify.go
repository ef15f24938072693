package approval

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Bounds of the notifications of new approvals (Config.OnPending).
const (
	// notifyWorkers is how many OnPending calls run at once per Store.
	notifyWorkers = 4
	// notifyQueue is how many notices wait for a worker; one past it is
	// dropped, and logged.
	notifyQueue = 256
	// DefaultNotifyTimeout is the default of Config.NotifyTimeout.
	DefaultNotifyTimeout = 30 * time.Second
)

// notifier runs Config.OnPending off the callers' goroutines: a bounded
// queue and a few workers, started with the first notice and stopped by
// Close.
type notifier struct {
	hook    func(ctx context.Context, a *Approval)
	timeout time.Duration
	logger  *slog.Logger

	queue  chan *Approval // nil until the first notice
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	closed bool
}

// notify hands a, a new pending approval, to the hook, without waiting:
// when notifyQueue notices wait already, or the Store is closed, a is
// dropped (logged).
func (n *notifier) notify(a *Approval) {
	if n.hook == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return
	}
	if n.queue == nil {
		n.start()
	}
	select {
	case n.queue <- a:
	default:
		n.logger.Warn("approval: OnPending is behind: a notice dropped", "approval", a.ID, "waiting", notifyQueue)
	}
}

// start starts the workers; n.mu is held.
func (n *notifier) start() {
	n.queue = make(chan *Approval, notifyQueue)
	n.ctx, n.cancel = context.WithCancel(context.Background())
	for range notifyWorkers {
		n.wg.Go(func() {
			for {
				select {
				case a := <-n.queue:
					if n.ctx.Err() != nil {
						return // closed: what waits is dropped
					}
					n.run(a)
				case <-n.ctx.Done():
					return
				}
			}
		})
	}
}

// run calls the hook for a, within the timeout; a panic is logged.
func (n *notifier) run(a *Approval) {
	ctx, cancel := context.WithTimeout(n.ctx, n.timeout)
	defer cancel()
	defer func() {
		if v := recover(); v != nil {
			n.logger.Error("approval: OnPending panicked", "approval", a.ID, "panic", v)
		}
	}()
	n.hook(ctx, a)
}

// close stops the workers: a hook running has its context cancelled, and
// notices still waiting are dropped.
func (n *notifier) close() {
	n.mu.Lock()
	n.closed = true
	if n.cancel != nil {
		n.cancel()
	}
	n.mu.Unlock()
	n.wg.Wait()
}
