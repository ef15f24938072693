package redisstore

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcphandler/mcphandler/session"
)

// SubscriptionBuffer is how many messages a subscription holds before the
// dispatcher starts dropping messages for it: the one goroutine that
// serves all subscriptions of a Store never waits for a slow reader.
const SubscriptionBuffer = 64

// errClosed is returned by calls that need the Pub/Sub connection after
// Close.
var errClosed = errors.New("store closed")

// pubsubState is the Pub/Sub half of a Store: one shared *redis.PubSub,
// the local subscribers of each channel, and the dispatcher goroutine.
//
// Desired and actual state: chans holds the channels with local
// subscribers, sent the channels go-redis was told to subscribe (the set it
// resubscribes after a reconnect). Whoever holds the wire brings sent in
// line with chans (reconcile), so SUBSCRIBE and UNSUBSCRIBE reach Redis in
// an order consistent with the local reference counts, and a change that
// could not be sent in time (a Close while Redis hangs) is sent by the
// next holder.
//
// Confirmation: after reconciling, a caller sends PING <token> on the same
// connection and waits for the dispatcher to read the matching pong. Redis
// answers the commands of a connection in order, so the pong proves Redis
// applied the change; unlike the subscribe confirmations themselves, the
// token cannot be confused with another caller's change or with go-redis's
// resubscription after a reconnect.
//
// Locks: wire is a semaphore held, with a context, around every command
// the store sends on the Pub/Sub connection, so that callers wait for each
// other within their OpTimeout rather than on go-redis's own mutex; mu
// guards the fields below it and is never held during I/O. Order: wire
// before mu.
type pubsubState struct {
	wire chan struct{}

	mu       sync.Mutex
	ps       *redis.PubSub // nil until the first Subscribe
	chans    map[string]*chanState
	sent     map[string]struct{}
	barriers map[string]*barrier
	epoch    uint64 // incremented when the connection is lost
	closed   bool

	token atomic.Uint64
	quit  chan struct{} // closed by Close
	done  chan struct{} // closed when the dispatcher returns
	ctx   context.Context
	stop  context.CancelFunc
}

// chanState is one Redis channel with at least one local subscriber.
type chanState struct {
	subs map[*subscription]struct{}
	// confirmed is set once a barrier showed Redis subscribed the
	// connection to the channel, and cleared when the connection is lost;
	// while it is set, a new subscriber of the channel needs no round
	// trip.
	confirmed bool
}

// barrier is a PING token awaited by a subscription change.
type barrier struct {
	done  chan error // receives nil (pong read) or why it never will be
	epoch uint64
}

func (p *pubsubState) init() {
	p.wire = make(chan struct{}, 1)
	p.chans = make(map[string]*chanState)
	p.sent = make(map[string]struct{})
	p.barriers = make(map[string]*barrier)
	p.quit = make(chan struct{})
	p.done = make(chan struct{})
	p.ctx, p.stop = context.WithCancel(context.Background())
}

// acquire takes the wire, giving up when ctx ends or the store closes.
func (p *pubsubState) acquire(ctx context.Context) error {
	select {
	case p.wire <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-p.quit:
		return errClosed
	}
}

// tryAcquire takes the wire if it is free.
func (p *pubsubState) tryAcquire() bool {
	select {
	case p.wire <- struct{}{}:
		return true
	default:
		return false
	}
}

func (p *pubsubState) release() { <-p.wire }

// reconcile sends the SUBSCRIBE and UNSUBSCRIBE that bring Redis in line
// with the local subscribers. The caller holds the wire. Like go-redis,
// which remembers a channel as subscribed (or not) even when the command
// fails, it updates sent before sending.
func (p *pubsubState) reconcile(ctx context.Context, ps *redis.PubSub) error {
	var add, del []string
	p.mu.Lock()
	for ch := range p.chans {
		if _, ok := p.sent[ch]; !ok {
			add = append(add, ch)
			p.sent[ch] = struct{}{}
		}
	}
	for ch := range p.sent {
		if _, ok := p.chans[ch]; !ok {
			del = append(del, ch)
			delete(p.sent, ch)
		}
	}
	p.mu.Unlock()
	var err error
	if len(del) > 0 {
		err = ps.Unsubscribe(ctx, del...)
	}
	if len(add) > 0 {
		if e := ps.Subscribe(ctx, add...); err == nil {
			err = e
		}
	}
	return err
}

// subscription is a local subscriber of one channel.
type subscription struct {
	s       *Store
	channel string // the Redis channel, prefix included
	c       chan []byte
	// fn, if set, receives the messages instead of c: the dispatcher calls
	// it, with the store's ps.mu held, so it must be quick and must not
	// call the store. The store's own subscriptions use it, so that none
	// of their messages is ever dropped.
	fn     func(string)
	once   sync.Once
	closed bool // guarded by s.ps.mu; set once c is closed
}

// C implements [session.Subscription].
func (sub *subscription) C() <-chan []byte { return sub.c }

// Close implements [session.Subscription]. C is closed and no message is
// delivered after Close starts. When sub was the store's last subscriber
// of the channel, Close also unsubscribes the shared connection and waits,
// at most OpTimeout, until Redis confirmed it, so that a Publish after
// Close does not count this replica. A Redis that does not answer only
// delays Close (the unsubscription is then left to the next Subscribe or
// to the dispatcher), which always returns nil.
func (sub *subscription) Close() error {
	sub.once.Do(func() { sub.s.unsubscribe(sub, true) })
	return nil
}

// Publish implements [session.Store] with PUBLISH on the store's prefixed
// channel; it does not wait for delivery. Redis counts each subscribed
// connection once, so each other replica with subscribers counts once,
// while this store's own connection is replaced by its number of local
// subscribers of the channel (which is what a single-process caller
// expects). In particular the result is 0 exactly when Redis delivered the
// message to nobody. Subscribers whose buffer is full still count.
func (s *Store) Publish(ctx context.Context, channel string, msg []byte) (int, error) {
	if err := s.br.allow(); err != nil {
		return 0, unavailable("publish", err)
	}
	octx, cancel := s.opCtx(ctx)
	defer cancel()
	ch := s.prefix + channel
	n, err := s.c.Publish(octx, ch, msg).Result()
	s.observe(ctx, err)
	if err != nil {
		return 0, unavailable("publish", err)
	}
	if n > 0 {
		p := &s.ps
		p.mu.Lock()
		if st := p.chans[ch]; st != nil {
			n += int64(len(st.subs)) - 1
		}
		p.mu.Unlock()
	}
	return int(n), nil
}

// Subscribe implements [session.Store]. It returns once Redis confirmed
// that the store's Pub/Sub connection is subscribed to channel, so a
// Publish made after Subscribe returned, from any replica, reaches the
// subscription. A channel this store already listens to needs no round
// trip; otherwise Subscribe sends SUBSCRIBE and PING on the shared
// connection (opening it and starting the dispatcher on first use) and
// waits for the pong, all within OpTimeout. While the circuit breaker is
// open it fails at once.
//
// Messages are delivered in publication order to a buffered channel of
// [SubscriptionBuffer] messages; when it is full, messages are dropped for
// that subscription. If the connection drops, go-redis reconnects and
// resubscribes every channel by itself, and delivery resumes; messages
// published meanwhile are lost, as Redis Pub/Sub delivers at most once.
//
// The subscription must be closed. Its Close closes C at once; when it
// was the store's last subscription of the channel, Close also sends
// UNSUBSCRIBE and waits, at most OpTimeout, for Redis to confirm it, so
// that a Publish after Close does not count this replica. [Store.Close]
// closes every open subscription.
func (s *Store) Subscribe(ctx context.Context, channel string) (session.Subscription, error) {
	sub, err := s.subscribe(ctx, channel, nil)
	if err != nil {
		return nil, err
	}
	return sub, nil
}

// subscribe implements Subscribe, delivering to fn instead of a channel
// if fn is set.
func (s *Store) subscribe(ctx context.Context, channel string, fn func(string)) (*subscription, error) {
	if err := s.br.allow(); err != nil {
		return nil, unavailable("subscribe", err)
	}
	octx, cancel := s.opCtx(ctx)
	defer cancel()
	p := &s.ps
	sub := &subscription{s: s, channel: s.prefix + channel, fn: fn}
	if fn == nil {
		sub.c = make(chan []byte, SubscriptionBuffer)
	} else {
		sub.c = make(chan []byte)
	}

	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, unavailable("subscribe", errClosed)
	}
	if p.ps == nil {
		// No channel yet: this makes no connection, the first command does.
		p.ps = s.c.Subscribe(context.Background())
		go s.dispatch(p.ps)
	}
	st := p.chans[sub.channel]
	if st == nil {
		st = &chanState{subs: make(map[*subscription]struct{}, 1)}
		p.chans[sub.channel] = st
	}
	st.subs[sub] = struct{}{}
	confirmed := st.confirmed
	p.mu.Unlock()
	if confirmed {
		return sub, nil
	}

	err := s.confirm(octx, sub)
	if fn == nil {
		// The host's subscriptions feed the breaker; the store's own (the
		// cache's, retried in the background) would make it count time
		// rather than calls.
		s.observe(ctx, err)
	}
	if err != nil {
		// Leave Redis as it is: the next holder of the wire unsubscribes
		// the channel if it has no subscriber left.
		sub.once.Do(func() { s.unsubscribe(sub, false) })
		return nil, unavailable("subscribe", err)
	}
	p.mu.Lock()
	closed := sub.closed
	p.mu.Unlock()
	if closed { // Close ran meanwhile
		return nil, unavailable("subscribe", errClosed)
	}
	return sub, nil
}

// confirm makes sure Redis subscribed the shared connection to the
// channel of sub, an open subscription: holding the wire, it sends the
// pending subscription changes and a PING barrier, and waits for the pong.
// If the connection was not lost meanwhile, it marks the channel
// confirmed, so that later subscribers of it need no round trip. The
// caller bounds ctx.
func (s *Store) confirm(ctx context.Context, sub *subscription) error {
	p := &s.ps
	p.mu.Lock()
	st, ps := p.chans[sub.channel], p.ps
	p.mu.Unlock()
	if st == nil || ps == nil {
		return errClosed
	}
	if err := p.acquire(ctx); err != nil {
		return err
	}
	err := p.reconcile(ctx, ps)
	var tok string
	var b *barrier
	if err == nil {
		tok, b, err = p.ping(ctx, ps)
	}
	p.release()
	if err != nil {
		if !errors.Is(err, errClosed) {
			// A command failed on the connection: go-redis drops it and
			// opens another, and messages may be lost in between.
			s.lost()
		}
		return err
	}
	if err := p.wait(ctx, tok, b); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.epoch == b.epoch && p.chans[sub.channel] == st {
		st.confirmed = true
		if s.cache != nil && sub.channel == s.prefix+evictChannel {
			s.cache.up()
		}
	}
	return nil
}

// ping registers a barrier and sends PING <token> on ps. The caller holds
// the wire and has already sent the commands the barrier confirms.
func (p *pubsubState) ping(ctx context.Context, ps *redis.PubSub) (string, *barrier, error) {
	tok := "mcph-barrier-" + strconv.FormatUint(p.token.Add(1), 36)
	b := &barrier{done: make(chan error, 1)}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return "", nil, errClosed
	}
	b.epoch = p.epoch
	p.barriers[tok] = b
	p.mu.Unlock()
	if err := ps.Ping(ctx, tok); err != nil {
		p.mu.Lock()
		delete(p.barriers, tok)
		p.mu.Unlock()
		return "", nil, err
	}
	return tok, b, nil
}

// wait waits for the pong of a barrier made by ping.
func (p *pubsubState) wait(ctx context.Context, tok string, b *barrier) error {
	select {
	case err := <-b.done:
		return err
	case <-ctx.Done():
		p.mu.Lock()
		delete(p.barriers, tok)
		p.mu.Unlock()
		return ctx.Err()
	}
}

// unsubscribe removes sub, closing its channel. When sub was the last
// local subscriber of a channel Redis was told about and confirm is set,
// it also unsubscribes the connection and waits for Redis to confirm it.
func (s *Store) unsubscribe(sub *subscription, confirm bool) {
	p := &s.ps
	p.mu.Lock()
	if sub.closed { // the store was closed
		p.mu.Unlock()
		return
	}
	sub.closed = true
	close(sub.c)
	st := p.chans[sub.channel]
	delete(st.subs, sub)
	stale := false
	if len(st.subs) == 0 {
		delete(p.chans, sub.channel)
		_, stale = p.sent[sub.channel]
	}
	ps := p.ps
	p.mu.Unlock()
	if !stale || !confirm {
		return
	}
	ctx, cancel := s.opCtx(context.Background())
	defer cancel()
	if p.acquire(ctx) != nil {
		return
	}
	err := p.reconcile(ctx, ps)
	var tok string
	var b *barrier
	if err == nil {
		tok, b, err = p.ping(ctx, ps)
	}
	p.release()
	if err == nil {
		p.wait(ctx, tok, b)
	} else if !errors.Is(err, errClosed) {
		s.lost()
	}
}

// dispatch is the store's goroutine: it reads the shared Pub/Sub
// connection, hands messages to the local subscribers of their channel and
// pongs to the barriers waiting for them, and (re)connects with a capped
// backoff when the connection fails. It returns when Close closes ps.
func (s *Store) dispatch(ps *redis.PubSub) {
	p := &s.ps
	defer close(p.done)
	connected := false
	failures := 0
	for {
		if !connected {
			if failures > 0 {
				d := min(50*time.Millisecond<<min(failures-1, 5), time.Second)
				t := time.NewTimer(d)
				select {
				case <-p.quit:
					t.Stop()
					return
				case <-t.C:
				}
			}
			if err := s.connect(ps); err != nil {
				if p.isClosed() {
					return
				}
				failures++
				continue
			}
			connected = true
		}
		// No read deadline: the read waits as long as the connection is
		// up. Close unblocks it by closing the connection.
		m, err := ps.Receive(p.ctx)
		if err != nil {
			if p.isClosed() {
				return
			}
			s.lost()
			connected = false
			failures++
			continue
		}
		failures = 0
		switch m := m.(type) {
		case *redis.Message:
			if !p.deliver(m) && p.tryAcquire() {
				// A channel nobody here listens to any more: an
				// unsubscription is pending, send it.
				ctx, cancel := context.WithTimeout(p.ctx, s.opTimeout)
				err := p.reconcile(ctx, ps)
				cancel()
				p.release()
				if err != nil && !p.isClosed() {
					s.lost()
				}
			}
		case *redis.Pong:
			p.pong(m.Payload)
		}
	}
}

// connect opens the connection (or checks the one go-redis reopened) with
// a PING bounded by OpTimeout, sends the pending subscription changes, and
// re-sends the PING of every waiting barrier, whose first PING may have
// gone down with the old connection. A new connection was opened with
// every channel of sent subscribed, so a pong on it is as good a
// confirmation; a barrier answered twice is released once.
func (s *Store) connect(ps *redis.PubSub) error {
	p := &s.ps
	ctx, cancel := context.WithTimeout(p.ctx, s.opTimeout)
	defer cancel()
	if err := p.acquire(ctx); err != nil {
		return err
	}
	defer p.release()
	if err := ps.Ping(ctx); err != nil {
		return err
	}
	if err := p.reconcile(ctx, ps); err != nil {
		return err
	}
	p.mu.Lock()
	toks := make([]string, 0, len(p.barriers))
	for tok := range p.barriers {
		toks = append(toks, tok)
	}
	p.mu.Unlock()
	for _, tok := range toks {
		if err := ps.Ping(ctx, tok); err != nil {
			return err
		}
	}
	return nil
}

func (p *pubsubState) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// deliver hands m to every local subscriber of its channel, dropping it for
// those whose buffer is full. Each subscriber gets its own copy. It reports
// whether the channel has local subscribers.
func (p *pubsubState) deliver(m *redis.Message) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.chans[m.Channel]
	if st == nil {
		return false
	}
	for sub := range st.subs {
		if sub.fn != nil {
			sub.fn(m.Payload)
			continue
		}
		select {
		case sub.c <- []byte(m.Payload):
		default:
		}
	}
	return true
}

// pong releases the barrier of token, if one waits for it.
func (p *pubsubState) pong(token string) {
	p.mu.Lock()
	b := p.barriers[token]
	delete(p.barriers, token)
	p.mu.Unlock()
	if b != nil {
		b.done <- nil
	}
}

// lost records that the connection broke, or may have: no channel is
// known to be subscribed any more until a new barrier shows it, and the
// session cache stops serving, as evictions may have been missed.
func (s *Store) lost() {
	p := &s.ps
	p.mu.Lock()
	defer p.mu.Unlock()
	p.epoch++
	for _, st := range p.chans {
		st.confirmed = false
	}
	if s.cache != nil {
		s.cache.down()
	}
}

// Close stops what the store runs in the background: it closes every open
// subscription's channel, fails Subscribe calls in progress and to come,
// stops the dispatcher, the cache's subscriber and the breaker's probe,
// closes the shared Pub/Sub connection, and returns once those goroutines
// have exited. It does not close the Redis client, and the other methods
// keep working: the cache, if any, no longer serves (Get reads Redis),
// and the circuit breaker is off (every call tries Redis). Close is safe
// to call more than once and concurrently with other methods.
func (s *Store) Close() error {
	p := &s.ps
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	for _, st := range p.chans {
		for sub := range st.subs {
			sub.closed = true
			close(sub.c)
		}
	}
	clear(p.chans)
	for tok, b := range p.barriers {
		b.done <- errClosed
		delete(p.barriers, tok)
	}
	if s.cache != nil {
		s.cache.down() // its subscription was closed above
	}
	ps := p.ps
	p.mu.Unlock()

	close(p.quit)
	p.stop()
	s.bg.close()
	s.br.off.Store(true)
	s.br.open.Store(false)
	if ps == nil {
		return nil
	}
	err := ps.Close()
	<-p.done
	if err != nil && !errors.Is(err, redis.ErrClosed) {
		return err
	}
	return nil
}
