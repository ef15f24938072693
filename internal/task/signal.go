package task

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/mcphandler/mcphandler/internal/revs"
	"github.com/mcphandler/mcphandler/session"
)

// Replicas tell each other through two kinds of signed message: signals on
// one channel, which every Manager that runs tasks subscribes to (a task
// was cancelled, or answered: its runner re-reads the record), and status
// notifications on the channel of each tenant (what a listener forwards to
// clients). A signal carries no decision — the runner acts only on the
// record it reads — so a lost, replayed or late one costs latency at most.
// A message that does not verify, or is older than messageWindow, is
// dropped.

const (
	signalChannel = "task-signal"
	signalCancel  = "cancel"
	signalInput   = "input"
	// messageWindow is how far a message's timestamp may be from the
	// receiver's clock.
	messageWindow = 30 * time.Second
)

type signalMsg struct {
	ID   string `json:"id"`
	Kind string `json:"k"`
}

// listenSignals subscribes this Manager to the signal channel, once.
func (m *Manager) listenSignals(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	if m.sub != nil {
		return nil
	}
	sub, err := m.cfg.Store.Subscribe(ctx, signalChannel)
	if err != nil {
		return err
	}
	m.sub = sub
	go m.dispatch(sub)
	return nil
}

// dispatch hands the signals for this Manager's runs to them. It runs
// until the subscription closes (at Close).
func (m *Manager) dispatch(sub session.Subscription) {
	for b := range sub.C() {
		p, err := m.signal.OpenMessage(signalChannel, time.Now(), messageWindow, b)
		var s signalMsg
		if err != nil || json.Unmarshal(p, &s) != nil {
			m.cfg.Logger.Warn("task: dropped a signal that failed verification", "err", err)
			continue
		}
		m.mu.Lock()
		r := m.runs[s.ID]
		m.mu.Unlock()
		switch {
		case r == nil:
		case s.Kind == signalCancel:
			go r.check()
		case s.Kind == signalInput:
			select {
			case r.wake <- struct{}{}:
			default:
			}
		}
	}
}

// sendSignal tells whichever Manager runs task id to re-read it.
func (m *Manager) sendSignal(ctx context.Context, id, kind string) {
	b, _ := json.Marshal(signalMsg{ID: id, Kind: kind})
	if _, err := m.cfg.Store.Publish(context.WithoutCancel(ctx), signalChannel, m.signal.SignMessage(signalChannel, time.Now(), b)); err != nil {
		m.cfg.Logger.Warn("task: publishing a signal failed; the runner notices at its next renewal", "task", id, "err", err)
	}
}

type statusMsg struct {
	Owner string       `json:"o"`
	Task  DetailedTask `json:"t"`
	// Rev is the record's revision: a listener forwards a task's
	// notifications in increasing revision only (0, from an earlier
	// release: as they come).
	Rev uint64 `json:"r,omitempty"`
}

// publishStatus publishes the task as it now is on its tenant's channel.
func (m *Manager) publishStatus(ctx context.Context, id string, r *taskRecord) {
	ch := tenantChannel(r.Ten)
	b, _ := json.Marshal(statusMsg{Owner: r.Own, Task: r.detailed(id), Rev: r.Rev})
	if _, err := m.cfg.Store.Publish(context.WithoutCancel(ctx), ch, m.status.SignMessage(ch, time.Now(), b)); err != nil {
		m.cfg.Logger.Warn("task: publishing a status notification failed", "task", id, "err", err)
	}
}

// Notification is one change of a task, as published by the Manager that
// made it: the task in full, as tasks/get would have answered then.
type Notification struct {
	owner string
	Task  DetailedTask
}

// For reports whether the task notified belongs to o: a listener must
// forward only the notifications of its own identity.
func (n *Notification) For(o Owner) bool { return n.owner == o.digest() }

// Listener receives the status notifications of one tenant's tasks, from
// every replica. Its goroutine, started by Listen, runs until Close.
type Listener struct {
	sub  session.Subscription
	c    chan Notification
	done chan struct{}
	once sync.Once
}

// listenBuffer is how many notifications a Listener holds for a slow
// reader; more are dropped (delivery is at most once, as for PubSub).
const listenBuffer = 64

// maxListenTasks bounds the tasks whose last revision a Listener
// remembers (each for messageWindow after its last notification).
const maxListenTasks = 4096

// Listen subscribes to the status notifications of tenant's tasks. The
// caller must Close the Listener.
func (m *Manager) Listen(ctx context.Context, tenant string) (*Listener, error) {
	ch := tenantChannel(digest("tenant", tenant))
	sub, err := m.cfg.Store.Subscribe(ctx, ch)
	if err != nil {
		return nil, err
	}
	l := &Listener{sub: sub, c: make(chan Notification, listenBuffer), done: make(chan struct{})}
	go func() {
		defer close(l.c)
		// A copy of a genuine notification published again while fresh,
		// or one older than a notification forwarded, is not forwarded.
		order := revs.Window[string]{Span: messageWindow, Max: maxListenTasks}
		for b := range sub.C() {
			now := time.Now()
			p, err := m.status.OpenMessage(ch, now, messageWindow, b)
			var s statusMsg
			if err != nil || json.Unmarshal(p, &s) != nil || !validID(s.Task.TaskID) || !s.Task.Status.valid() ||
				s.Rev > 0 && !order.Take(s.Task.TaskID, s.Rev, now) {
				continue
			}
			select {
			case l.c <- Notification{owner: s.Owner, Task: s.Task}:
			case <-l.done:
				return
			default: // a slow reader misses it
			}
		}
	}()
	return l, nil
}

// C delivers the notifications; it is closed once the Listener is.
func (l *Listener) C() <-chan Notification { return l.c }

// Close stops the Listener. It is safe to call more than once.
func (l *Listener) Close() error {
	var err error
	l.once.Do(func() {
		close(l.done)
		err = l.sub.Close()
	})
	return err
}

// Close stops the Manager: every task it still runs is marked failed
// (the server shut down) and its Run's context cancelled with ErrClosed;
// later calls fail with ErrClosed. It waits at most Lease for the store.
func (m *Manager) Close() error {
	return m.close(true)
}

// close is Close; with fail false it only stops, writing nothing, as a
// crashed process would (tests).
func (m *Manager) close(fail bool) error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	runs := make([]*Run, 0, len(m.runs))
	for _, r := range m.runs {
		runs = append(runs, r)
	}
	sub := m.sub
	m.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.Lease)
	defer cancel()
	for _, r := range runs {
		r.stop(ErrClosed)
		if fail {
			m.fail(ctx, r.id, r.by, msgClosed)
		}
	}
	if sub != nil {
		return sub.Close()
	}
	return nil
}
