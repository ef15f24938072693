package redisstore

import (
	"context"
	"crypto/rand"
	"errors"
	"hash/fnv"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcphandler/mcphandler/session"
)

// SubscriptionBuffer is how many messages a subscription holds before the
// dispatcher starts dropping messages for it: the one goroutine that
// serves all subscriptions of a connection never waits for a slow reader.
// Each subscription's buffer is allocated when it subscribes and lives as
// long as it does (a session's open stream holds one), so it is kept small:
// 16 messages, some 0.5 KB; the reader of an open stream drains it as fast
// as its client's connection takes the events.
const SubscriptionBuffer = 16

// errClosed is returned by calls that need the Pub/Sub connection after
// Close.
var errClosed = errors.New("store closed")

// probeInterval is how often the store checks, while the host holds
// subscriptions, that each of its Pub/Sub connections still hears what is
// published through the client (see shard.check); a connection found
// deaf is replaced, and the next check of it waits twice as long, up to
// probeMaxInterval, until one passes.
const (
	probeInterval    = time.Second
	probeMaxInterval = 30 * time.Second
)

// Cluster channels are sharded: each is given one of these hash tags,
// picked by a hash of its name, so that a store subscribes through at
// most len(shardTags) connections, one per slot. The tags' slots are
// spread evenly over the 16384 (slot[i] lies in [1024i, 1024(i+1))), so
// that an even split of the slots between masters splits the channels
// evenly too.
var shardTags = [16]struct {
	tag  string
	slot int
}{
	{"ps3", 818}, {"ps21", 1704}, {"ps61", 2668}, {"ps43", 3148},
	{"ps2", 4883}, {"ps20", 5769}, {"ps60", 6733}, {"ps42", 7277},
	{"ps1", 9072}, {"ps23", 9962}, {"ps63", 10798}, {"ps41", 11278},
	{"ps0", 13137}, {"ps22", 14027}, {"ps62", 14863}, {"ps40", 15407},
}

// pubsubState is the Pub/Sub half of a Store: its shards (one Pub/Sub
// connection each, with the local subscribers of its channels and the
// dispatcher goroutine that reads it), and what they share.
//
// On a single node or behind Sentinel there is one shard, whose
// connection subscribes with SUBSCRIBE and is reached like every other
// command (the failover client dials the current master). On a cluster
// there is a shard per hash tag in use, whose connection goes to the
// master of the tag's slot and subscribes with SSUBSCRIBE.
type pubsubState struct {
	mu      sync.Mutex // guards shards and closed
	shards  map[string]*shard
	closed  bool
	cluster *redis.ClusterClient // the client, if it is a cluster client
	id      string               // names this store's probe channels

	token atomic.Uint64
	quit  chan struct{} // closed by Close
	ctx   context.Context
	stop  context.CancelFunc
	watch sync.Once // starts the probe of the connections
}

// shard is one Pub/Sub connection of a Store.
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
// Replacement: go-redis reconnects a broken connection to the same
// address by itself. When that address is no longer the right one — a
// cluster node that stopped serving the shard's slot, or a connection the
// probe found deaf (its server is not the one the client publishes to,
// e.g. an old master after a Sentinel failover) — the dispatcher replaces
// the *redis.PubSub with a new one (stale is set meanwhile) and subscribes
// it to every channel again; changes asked for meanwhile wait for it.
//
// Locks: wire is a semaphore held, with a context, around every command
// the store sends on the connection, and while ps is replaced, so that
// callers wait for each other within their OpTimeout rather than on
// go-redis's own mutex; mu guards the fields below it and is never held
// during I/O. Order: wire before mu.
type shard struct {
	s     *Store
	tag   string // the cluster hash tag; "" for the single shard of a node
	probe string // the Redis name of the shard's probe channel
	wire  chan struct{}

	mu       sync.Mutex
	ps       *redis.PubSub // nil while a replacement is pending
	chans    map[string]*chanState
	sent     map[string]struct{}
	unsubs   map[string]int // cluster: SUNSUBSCRIBE replies still to come, by channel
	barriers map[string]*barrier
	epoch    uint64 // incremented when the connection is lost or replaced
	stale    bool   // the dispatcher must replace ps
	closed   bool
	host     int // open subscriptions of the host (not the store's own)

	deaf      int       // replacements in a row the probe asked for
	nextProbe time.Time // used by the probe goroutine only

	done chan struct{} // closed when the dispatcher returns
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

func (p *pubsubState) init(c redis.UniversalClient) {
	p.shards = make(map[string]*shard)
	p.cluster, _ = c.(*redis.ClusterClient)
	p.id = rand.Text()[:12]
	p.quit = make(chan struct{})
	p.ctx, p.stop = context.WithCancel(context.Background())
}

// channelName returns the Redis channel of channel, and the hash tag of
// its shard: on a single node the prefixed name and "", on a cluster the
// prefix, the hash tag in braces, and the name.
func (s *Store) channelName(channel string) (name, tag string) {
	if s.ps.cluster == nil {
		return s.prefix + channel, ""
	}
	h := fnv.New32a()
	h.Write([]byte(channel))
	tag = shardTags[h.Sum32()%uint32(len(shardTags))].tag
	return s.prefix + "{" + tag + "}" + channel, tag
}

// shardOf returns the shard of tag, creating it (and starting its
// dispatcher) if needed; nil after Close.
func (s *Store) shardOf(tag string) *shard {
	p := &s.ps
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	if sh := p.shards[tag]; sh != nil {
		return sh
	}
	probe := s.prefix + "store/probe/" + p.id
	if tag != "" {
		probe = s.prefix + "{" + tag + "}store/probe/" + p.id
	}
	sh := &shard{
		s: s, tag: tag, probe: probe, wire: make(chan struct{}, 1),
		chans: make(map[string]*chanState), sent: make(map[string]struct{}),
		unsubs: make(map[string]int), barriers: make(map[string]*barrier),
		done: make(chan struct{}),
	}
	// The probe channel is always subscribed; its messages are dropped.
	ps := &subscription{s: s, sh: sh, channel: probe, fn: func(string) {}, c: make(chan []byte)}
	sh.chans[probe] = &chanState{subs: map[*subscription]struct{}{ps: {}}}
	if p.cluster == nil {
		// No channel yet: this makes no connection, the first command does.
		sh.ps = s.c.Subscribe(context.Background())
	} else {
		// The dispatcher finds the master of the tag's slot first.
		sh.stale = true
	}
	p.shards[tag] = sh
	go sh.dispatch()
	return sh
}

// acquire takes the wire, giving up when ctx ends or the store closes.
func (sh *shard) acquire(ctx context.Context) error {
	select {
	case sh.wire <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-sh.s.ps.quit:
		return errClosed
	}
}

// tryAcquire takes the wire if it is free.
func (sh *shard) tryAcquire() bool {
	select {
	case sh.wire <- struct{}{}:
		return true
	default:
		return false
	}
}

func (sh *shard) release() { <-sh.wire }

// conn returns the shard's connection, or nil while a replacement is
// pending. The caller holds the wire.
func (sh *shard) conn() *redis.PubSub {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.stale || sh.closed {
		return nil
	}
	return sh.ps
}

// reconcile sends the SUBSCRIBE and UNSUBSCRIBE (SSUBSCRIBE and
// SUNSUBSCRIBE on a cluster) that bring Redis in line with the local
// subscribers. The caller holds the wire. Like go-redis, which remembers a
// channel as subscribed (or not) even when the command fails, it updates
// sent before sending.
func (sh *shard) reconcile(ctx context.Context, ps *redis.PubSub) error {
	var add, del []string
	sh.mu.Lock()
	for ch := range sh.chans {
		if _, ok := sh.sent[ch]; !ok {
			add = append(add, ch)
			sh.sent[ch] = struct{}{}
		}
	}
	for ch := range sh.sent {
		if _, ok := sh.chans[ch]; !ok {
			del = append(del, ch)
			delete(sh.sent, ch)
			if sh.tag != "" {
				sh.unsubs[ch]++
			}
		}
	}
	sh.mu.Unlock()
	var err error
	if len(del) > 0 {
		if sh.tag != "" {
			err = ps.SUnsubscribe(ctx, del...)
		} else {
			err = ps.Unsubscribe(ctx, del...)
		}
	}
	if len(add) > 0 {
		var e error
		if sh.tag != "" {
			e = ps.SSubscribe(ctx, add...)
		} else {
			e = ps.Subscribe(ctx, add...)
		}
		if err == nil {
			err = e
		}
	}
	return err
}

// subscription is a local subscriber of one channel.
type subscription struct {
	s       *Store
	sh      *shard
	channel string // the Redis channel, prefix and hash tag included
	c       chan []byte
	// fn, if set, receives the messages instead of c: the dispatcher calls
	// it, with the shard's mu held, so it must be quick and must not call
	// the store. The store's own subscriptions use it, so that none of
	// their messages is ever dropped.
	fn     func(string)
	once   sync.Once
	closed bool // guarded by sh.mu; set once c is closed
}

// C implements [session.Subscription].
func (sub *subscription) C() <-chan []byte { return sub.c }

// Close implements [session.Subscription]. C is closed and no message is
// delivered after Close starts. When sub was the store's last subscriber
// of the channel, Close also unsubscribes the connection and waits, at
// most OpTimeout, until Redis confirmed it, so that a Publish after Close
// does not count this replica. A Redis that does not answer only delays
// Close (the unsubscription is then left to the next Subscribe or to the
// dispatcher), which always returns nil.
func (sub *subscription) Close() error {
	sub.once.Do(func() { sub.s.unsubscribe(sub, true) })
	return nil
}

// Publish implements [session.Store] with PUBLISH on the store's prefixed
// channel (SPUBLISH of the hash-tagged channel on a cluster, which Redis
// delivers within the shard that serves the channel's slot); it does not
// wait for delivery.
//
// The count: Redis counts each subscribed connection of the server that
// took the message once — the master (of the channel's slot, on a
// cluster), where every store's connection for the channel is, since the
// store keeps its connections on the master (see "Pub/Sub" in the package
// documentation). So each other replica with subscribers counts once,
// while this store's own connection is replaced by its number of local
// subscribers of the channel (which is what a single-process caller
// expects). In particular the result is 0 exactly when Redis delivered the
// message to nobody — except while a failover moves the subscriptions to
// the new master, when a replica still subscribed on the old one is
// neither counted nor reached. Subscribers whose buffer is full still
// count.
func (s *Store) Publish(ctx context.Context, channel string, msg []byte) (int, error) {
	if err := s.br.allow(); err != nil {
		return 0, unavailable("publish", err)
	}
	octx, cancel := s.opCtx(ctx)
	defer cancel()
	ch, tag := s.channelName(channel)
	n, err := s.publish(octx, ch, msg)
	s.observe(ctx, err)
	if err != nil {
		return 0, unavailable("publish", err)
	}
	if n > 0 {
		p := &s.ps
		p.mu.Lock()
		sh := p.shards[tag]
		p.mu.Unlock()
		if sh != nil {
			sh.mu.Lock()
			if st := sh.chans[ch]; st != nil {
				n += int64(len(st.subs)) - 1
			}
			sh.mu.Unlock()
		}
	}
	return int(n), nil
}

// publish sends msg on the Redis channel ch: PUBLISH, or SPUBLISH on a
// cluster.
func (s *Store) publish(ctx context.Context, ch string, msg any) (int64, error) {
	if s.ps.cluster != nil {
		return s.c.SPublish(ctx, ch, msg).Result()
	}
	return s.c.Publish(ctx, ch, msg).Result()
}

// Subscribe implements [session.Store]. It returns once Redis confirmed
// that the store's Pub/Sub connection is subscribed to channel, so a
// Publish made after Subscribe returned, from any replica, reaches the
// subscription. A channel this store already listens to needs no round
// trip; otherwise Subscribe sends SUBSCRIBE (SSUBSCRIBE on a cluster) and
// PING on the connection (opening it and starting its dispatcher on first
// use) and waits for the pong, all within OpTimeout. While the circuit
// breaker is open it fails at once.
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
	name, tag := s.channelName(channel)
	sh := s.shardOf(tag)
	if sh == nil {
		return nil, unavailable("subscribe", errClosed)
	}
	sub := &subscription{s: s, sh: sh, channel: name, fn: fn}
	if fn == nil {
		sub.c = make(chan []byte, SubscriptionBuffer)
	} else {
		sub.c = make(chan []byte)
	}

	sh.mu.Lock()
	if sh.closed {
		sh.mu.Unlock()
		return nil, unavailable("subscribe", errClosed)
	}
	st := sh.chans[sub.channel]
	if st == nil {
		st = &chanState{subs: make(map[*subscription]struct{}, 1)}
		sh.chans[sub.channel] = st
	}
	st.subs[sub] = struct{}{}
	if fn == nil {
		sh.host++
	}
	confirmed := st.confirmed
	sh.mu.Unlock()
	if fn == nil {
		s.ps.watch.Do(func() { s.bg.start(s.watch) })
	}
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
	sh.mu.Lock()
	closed := sub.closed
	sh.mu.Unlock()
	if closed { // Close ran meanwhile
		return nil, unavailable("subscribe", errClosed)
	}
	return sub, nil
}

// confirm makes sure Redis subscribed the shard's connection to the
// channel of sub, an open subscription: holding the wire, it sends the
// pending subscription changes and a PING barrier, and waits for the pong.
// While the connection is being replaced it only registers the barrier,
// which the dispatcher sends once the new connection is subscribed. If
// the connection was not lost meanwhile, it marks the channel confirmed,
// so that later subscribers of it need no round trip. The caller bounds
// ctx.
func (s *Store) confirm(ctx context.Context, sub *subscription) error {
	sh := sub.sh
	sh.mu.Lock()
	st := sh.chans[sub.channel]
	sh.mu.Unlock()
	if st == nil {
		return errClosed
	}
	if err := sh.acquire(ctx); err != nil {
		return err
	}
	var err error
	var tok string
	var b *barrier
	if ps := sh.conn(); ps == nil {
		tok, b, err = sh.ping(ctx, nil)
	} else if err = sh.reconcile(ctx, ps); err == nil {
		tok, b, err = sh.ping(ctx, ps)
	}
	sh.release()
	if err != nil {
		if !errors.Is(err, errClosed) {
			// A command failed on the connection: go-redis drops it and
			// opens another, and messages may be lost in between.
			sh.lost()
		}
		return err
	}
	if err := sh.wait(ctx, tok, b); err != nil {
		return err
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.epoch == b.epoch {
		if sh.chans[sub.channel] == st {
			st.confirmed = true
			if s.cache != nil && sub.channel == s.evictName {
				s.cache.up()
			}
		}
		// The probe channel was subscribed at the latest by the first
		// reconcile of this epoch, before this barrier.
		if pst := sh.chans[sh.probe]; pst != nil {
			if _, ok := sh.sent[sh.probe]; ok {
				pst.confirmed = true
			}
		}
	}
	return nil
}

// ping registers a barrier and sends PING <token> on ps, unless ps is nil
// (the dispatcher sends it when it has a connection again). The caller
// holds the wire and has already sent the commands the barrier confirms.
func (sh *shard) ping(ctx context.Context, ps *redis.PubSub) (string, *barrier, error) {
	tok := "mcph-barrier-" + strconv.FormatUint(sh.s.ps.token.Add(1), 36)
	b := &barrier{done: make(chan error, 1)}
	sh.mu.Lock()
	if sh.closed {
		sh.mu.Unlock()
		return "", nil, errClosed
	}
	b.epoch = sh.epoch
	sh.barriers[tok] = b
	sh.mu.Unlock()
	if ps == nil {
		return tok, b, nil
	}
	if err := ps.Ping(ctx, tok); err != nil {
		sh.mu.Lock()
		delete(sh.barriers, tok)
		sh.mu.Unlock()
		return "", nil, err
	}
	return tok, b, nil
}

// wait waits for the pong of a barrier made by ping.
func (sh *shard) wait(ctx context.Context, tok string, b *barrier) error {
	select {
	case err := <-b.done:
		return err
	case <-ctx.Done():
		sh.mu.Lock()
		delete(sh.barriers, tok)
		sh.mu.Unlock()
		return ctx.Err()
	}
}

// unsubscribe removes sub, closing its channel. When sub was the last
// local subscriber of a channel Redis was told about and confirm is set,
// it also unsubscribes the connection and waits for Redis to confirm it.
func (s *Store) unsubscribe(sub *subscription, confirm bool) {
	sh := sub.sh
	sh.mu.Lock()
	if sub.closed { // the store was closed
		sh.mu.Unlock()
		return
	}
	sub.closed = true
	close(sub.c)
	if sub.fn == nil {
		sh.host--
	}
	st := sh.chans[sub.channel]
	delete(st.subs, sub)
	stale := false
	if len(st.subs) == 0 {
		delete(sh.chans, sub.channel)
		_, stale = sh.sent[sub.channel]
	}
	sh.mu.Unlock()
	if !stale || !confirm {
		return
	}
	ctx, cancel := s.opCtx(context.Background())
	defer cancel()
	if sh.acquire(ctx) != nil {
		return
	}
	ps := sh.conn()
	if ps == nil { // the new connection will not subscribe it
		sh.release()
		return
	}
	err := sh.reconcile(ctx, ps)
	var tok string
	var b *barrier
	if err == nil {
		tok, b, err = sh.ping(ctx, ps)
	}
	sh.release()
	if err == nil {
		sh.wait(ctx, tok, b)
	} else if !errors.Is(err, errClosed) {
		sh.lost()
	}
}

// dispatch is the shard's goroutine: it reads the shard's Pub/Sub
// connection, hands messages to the local subscribers of their channel and
// pongs to the barriers waiting for them, and (re)connects, or replaces
// the connection, with a capped backoff when it fails. It returns when
// Close closes the store.
func (sh *shard) dispatch() {
	p := &sh.s.ps
	defer close(sh.done)
	connected := false
	failures := 0
	var ps *redis.PubSub
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
			var err error
			if ps, err = sh.connect(); err != nil {
				if sh.isClosed() {
					return
				}
				failures++
				continue
			}
			connected = true
		}
		// No read deadline: the read waits as long as the connection is
		// up. Close (or the probe) unblocks it by closing the connection.
		m, err := ps.Receive(p.ctx)
		if err != nil {
			if sh.isClosed() {
				return
			}
			var re redis.Error
			if sh.tag != "" && errors.As(err, &re) {
				// MOVED, ASK, CLUSTERDOWN...: this node does not serve
				// the slot (any more).
				sh.replaceSoon()
			}
			sh.lost()
			connected = false
			failures++
			continue
		}
		failures = 0
		if !sh.handle(ps, m) {
			connected = false
		}
	}
}

// handle acts on one message read from ps: a message goes to the local
// subscribers of its channel, a pong to the barriers waiting for it. It
// returns false when the connection must be replaced (the server dropped a
// subscription because the node no longer serves the slot).
func (sh *shard) handle(ps *redis.PubSub, m any) bool {
	switch m := m.(type) {
	case *redis.Message:
		if !sh.deliver(m) && sh.tryAcquire() {
			// A channel nobody here listens to any more: an
			// unsubscription is pending, send it.
			ctx, cancel := context.WithTimeout(sh.s.ps.ctx, sh.s.opTimeout)
			err := sh.reconcile(ctx, ps)
			cancel()
			sh.release()
			if err != nil && !sh.isClosed() {
				sh.lost()
			}
		}
	case *redis.Pong:
		sh.pong(m.Payload)
	case *redis.Subscription:
		if m.Kind == "sunsubscribe" && sh.droppedByServer(m.Channel) {
			// The node stopped serving the slot (a failover, a
			// resharding) and unsubscribed us: move to its new master.
			sh.replaceSoon()
			sh.lost()
			return false
		}
	}
	return true
}

// connect returns the shard's connection, replacing it first if it is
// stale, after checking it with a PING bounded by OpTimeout; it sends the
// pending subscription changes and re-sends the PING of every waiting
// barrier, whose first PING may have gone down with the old connection
// (or was never sent, during a replacement). A new connection is
// subscribed to every channel of sent before its first pong, so a pong on
// it is as good a confirmation; a barrier answered twice is released
// once. On a cluster, a connection that fails is replaced next time: its
// node may be gone.
func (sh *shard) connect() (*redis.PubSub, error) {
	p := &sh.s.ps
	ctx, cancel := context.WithTimeout(p.ctx, sh.s.opTimeout)
	defer cancel()
	if err := sh.acquire(ctx); err != nil {
		return nil, err
	}
	defer sh.release()
	sh.mu.Lock()
	stale := sh.stale || sh.ps == nil
	sh.mu.Unlock()
	if stale {
		if err := sh.replace(ctx); err != nil {
			return nil, err
		}
	}
	ps := sh.conn()
	if ps == nil {
		return nil, errClosed
	}
	err := ps.Ping(ctx)
	if err == nil {
		err = sh.reconcile(ctx, ps)
	}
	if err == nil {
		sh.mu.Lock()
		toks := make([]string, 0, len(sh.barriers)+1)
		for tok := range sh.barriers {
			toks = append(toks, tok)
		}
		// The dispatcher's own barrier: its pong confirms the probe
		// channel on this connection.
		toks = append(toks, probeToken+strconv.FormatUint(sh.epoch, 36))
		sh.mu.Unlock()
		for _, tok := range toks {
			if err = ps.Ping(ctx, tok); err != nil {
				break
			}
		}
	}
	if err != nil && sh.tag != "" {
		sh.replaceSoon()
	}
	return ps, err
}

// replace swaps the shard's connection for a new, unsubscribed one: on a
// single node, from the client (which dials the current master); on a
// cluster, from the client of the node that serves the tag's slot, once a
// CLUSTER SLOTS answer agrees with the client's slot map on which node
// that is and the node itself says it is a master (otherwise it asks the
// client to reload the map and fails, to be tried again). A replica
// serving the slot would accept the subscription and receive the
// messages its master publishes, without the master counting it: Publish
// would report 0 for a message a replica got. The caller holds the wire.
func (sh *shard) replace(ctx context.Context) error {
	s := sh.s
	var ps *redis.PubSub
	if cc := s.ps.cluster; cc != nil {
		node, err := cc.MasterForKey(ctx, "{"+sh.tag+"}")
		if err != nil {
			cc.ReloadState(ctx)
			return err
		}
		if err := sh.checkMaster(ctx, cc, node); err != nil {
			cc.ReloadState(ctx)
			return err
		}
		ps = node.SSubscribe(context.Background())
	} else {
		ps = s.c.Subscribe(context.Background())
	}
	sh.mu.Lock()
	if sh.closed {
		sh.mu.Unlock()
		ps.Close()
		return errClosed
	}
	old := sh.ps
	sh.ps, sh.stale = ps, false
	clear(sh.sent)
	clear(sh.unsubs)
	sh.lostLocked()
	sh.mu.Unlock()
	if old != nil {
		old.Close()
	}
	return nil
}

// checkMaster asks the cluster which node serves the tag's slot, and
// node what it is, and returns an error unless node is that master.
func (sh *shard) checkMaster(ctx context.Context, cc *redis.ClusterClient, node *redis.Client) error {
	role, err := node.Do(ctx, "role").Slice()
	if err != nil {
		return err
	}
	if len(role) == 0 || role[0] != "master" {
		return errors.New("the slot map names a node that is no longer a master")
	}
	addr := node.Options().Addr
	slot := -1
	for _, t := range shardTags {
		if t.tag == sh.tag {
			slot = t.slot
		}
	}
	slots, err := cc.ClusterSlots(ctx).Result()
	if err != nil {
		return err
	}
	for _, r := range slots {
		if r.Start <= slot && slot <= r.End && len(r.Nodes) > 0 {
			if r.Nodes[0].Addr != addr {
				return errors.New("the cluster's slot map changed: " + r.Nodes[0].Addr + " serves the slot, not " + addr)
			}
			return nil
		}
	}
	return errors.New("no node serves slot " + strconv.Itoa(slot))
}

// replaceSoon marks the connection stale, so that the dispatcher replaces
// it when it next connects.
func (sh *shard) replaceSoon() {
	sh.mu.Lock()
	sh.stale = true
	sh.mu.Unlock()
	if cc := sh.s.ps.cluster; cc != nil {
		cc.ReloadState(sh.s.ps.ctx)
	}
}

// droppedByServer reports whether a SUNSUBSCRIBE reply for ch was sent by
// Redis on its own, not in answer to one of ours: ch is still wanted and
// no SUNSUBSCRIBE of ours awaits its reply.
func (sh *shard) droppedByServer(ch string) bool {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if n := sh.unsubs[ch]; n > 0 {
		if n == 1 {
			delete(sh.unsubs, ch)
		} else {
			sh.unsubs[ch] = n - 1
		}
		return false
	}
	_, wanted := sh.sent[ch]
	return wanted
}

func (sh *shard) isClosed() bool {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.closed
}

// deliver hands m to every local subscriber of its channel, dropping it for
// those whose buffer is full. Each subscriber gets its own copy. It reports
// whether the channel has local subscribers.
func (sh *shard) deliver(m *redis.Message) bool {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	st := sh.chans[m.Channel]
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

// probeToken starts the PING payload of the barrier connect sends for
// the dispatcher itself, followed by the epoch it was sent in.
const probeToken = "mcph-probe-"

// pong releases the barrier of token, if one waits for it; a pong of the
// dispatcher's own barrier, sent in the current epoch, confirms the probe
// channel.
func (sh *shard) pong(token string) {
	sh.mu.Lock()
	if e, ok := strings.CutPrefix(token, probeToken); ok {
		if e == strconv.FormatUint(sh.epoch, 36) {
			if _, sent := sh.sent[sh.probe]; sent && sh.chans[sh.probe] != nil {
				sh.chans[sh.probe].confirmed = true
			}
		}
		sh.mu.Unlock()
		return
	}
	b := sh.barriers[token]
	delete(sh.barriers, token)
	sh.mu.Unlock()
	if b != nil {
		b.done <- nil
	}
}

// lost records that the connection broke, or may have: no channel is
// known to be subscribed any more until a new barrier shows it, and the
// session cache stops serving if its evictions came through this shard.
func (sh *shard) lost() {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.lostLocked()
}

func (sh *shard) lostLocked() {
	sh.epoch++
	clear(sh.unsubs) // the replies to come, if any, died with the connection
	for _, st := range sh.chans {
		st.confirmed = false
	}
	if c := sh.s.cache; c != nil && sh.chans[sh.s.evictName] != nil {
		c.down()
	}
}

// watch is the goroutine that, while the host holds subscriptions, checks
// every probeInterval that each shard's connection hears what the client
// publishes (see check). The Store owns it; it starts at the host's first
// Subscribe and stops on Close.
func (s *Store) watch() {
	t := time.NewTicker(probeInterval)
	defer t.Stop()
	for {
		select {
		case <-s.ps.quit:
			return
		case now := <-t.C:
			s.ps.mu.Lock()
			shards := make([]*shard, 0, len(s.ps.shards))
			for _, sh := range s.ps.shards {
				shards = append(shards, sh)
			}
			s.ps.mu.Unlock()
			for _, sh := range shards {
				if now.After(sh.nextProbe) {
					sh.check(now)
				}
			}
		}
	}
}

// check publishes on the shard's probe channel, to which only this
// store's connection is subscribed, through the client: if Redis counts
// no receiver, the connection is not on the server the client publishes
// to — an old master after a failover (which Sentinel turns into a
// replica, dropping its clients, only seconds later), a node that no
// longer serves the slot — or is dead without the operating system having
// said so. Then check replaces it. It checks only a shard whose probe
// subscription is confirmed on the current connection, and that holds
// subscriptions of the host; it sends nothing while the breaker is open,
// and a failing PUBLISH is left to the breaker. These PUBLISHes do not
// feed the breaker.
func (sh *shard) check(now time.Time) {
	s := sh.s
	sh.mu.Lock()
	st := sh.chans[sh.probe]
	ok := sh.host > 0 && !sh.stale && !sh.closed && st != nil && st.confirmed
	epoch, ps := sh.epoch, sh.ps
	sh.mu.Unlock()
	if !ok || s.br.allow() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(s.ps.ctx, s.opTimeout)
	n, err := s.publish(ctx, sh.probe, "")
	cancel()
	if err != nil {
		return
	}
	if n > 0 {
		sh.deaf = 0
		sh.nextProbe = time.Time{}
		return
	}
	// Close the connection holding the wire, so that no command is under
	// way on it; what is asked for meanwhile waits for the new one.
	ctx, cancel = context.WithTimeout(s.ps.ctx, s.opTimeout)
	defer cancel()
	if sh.acquire(ctx) != nil {
		return
	}
	defer sh.release()
	sh.mu.Lock()
	if sh.epoch != epoch || sh.stale || sh.closed || sh.ps != ps {
		sh.mu.Unlock()
		return
	}
	sh.stale = true
	sh.lostLocked()
	sh.mu.Unlock()
	sh.nextProbe = now.Add(min(probeInterval<<min(sh.deaf, 5), probeMaxInterval))
	sh.deaf++
	if cc := s.ps.cluster; cc != nil {
		cc.ReloadState(s.ps.ctx)
	}
	ps.Close() // unblocks the dispatcher, which replaces it
}

// Close stops what the store runs in the background: it closes every open
// subscription's channel, fails Subscribe calls in progress and to come,
// stops the dispatchers, the probe of the connections, the cache's
// subscriber and the breaker's probe, closes the Pub/Sub connections, and
// returns once those goroutines have exited. It does not close the Redis
// client, and the other methods keep working: the cache, if any, no
// longer serves (Get reads Redis), and the circuit breaker is off (every
// call tries Redis). Close is safe to call more than once and
// concurrently with other methods.
func (s *Store) Close() error {
	p := &s.ps
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	shards := make([]*shard, 0, len(p.shards))
	for _, sh := range p.shards {
		shards = append(shards, sh)
	}
	p.mu.Unlock()

	var pss []*redis.PubSub
	for _, sh := range shards {
		sh.mu.Lock()
		sh.closed = true
		for _, st := range sh.chans {
			for sub := range st.subs {
				sub.closed = true
				close(sub.c)
			}
		}
		if s.cache != nil && sh.chans[s.evictName] != nil {
			s.cache.down() // its subscription was closed above
		}
		clear(sh.chans)
		for tok, b := range sh.barriers {
			b.done <- errClosed
			delete(sh.barriers, tok)
		}
		if sh.ps != nil {
			pss = append(pss, sh.ps)
		}
		sh.mu.Unlock()
	}

	close(p.quit)
	p.stop()
	s.bg.close()
	s.br.off.Store(true)
	s.br.open.Store(false)
	var err error
	for _, ps := range pss {
		if e := ps.Close(); e != nil && !errors.Is(e, redis.ErrClosed) && err == nil {
			err = e
		}
	}
	for _, sh := range shards {
		<-sh.done
	}
	return err
}
