package redisstore

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcphandler/mcphandler/session"
)

// cache keeps, when Options.CacheTTL is positive, the sessions this replica
// read recently, so that most requests of a live session need no Redis
// round trip. Every Update and Delete, on any replica, publishes the
// session id on the store's eviction channel; each replica drops its copy
// when the id arrives. A copy is used for at most CacheTTL (and at most a
// quarter of the session's TTL, so that reads through to Redis keep
// extending its idle lifetime), which bounds staleness even if an eviction
// is lost.
//
// The cache serves only while its eviction subscription is confirmed:
// live holds a token, nonzero while Redis is known to deliver this
// replica's evictions, and a new token every time that is established
// again. A copy is served only under the token it was read under, so a
// copy read before the subscription was lost — when evictions may have
// been missed — is never served again. While live is zero, Get reads
// through to Redis like a store without a cache.
type cache struct {
	ttl time.Duration

	mu      sync.RWMutex // guards entries and ops
	entries map[string]cacheEntry
	ops     int // inserts since the last sweep

	gen  atomic.Uint64 // bumped by every eviction; a read that saw it move caches nothing
	live atomic.Uint64 // see above; written with the mu of the eviction channel's shard held
	next uint64        // the last token given out; guarded by that mu

	start sync.Once     // starts the subscriber goroutine
	ready chan struct{} // closed after the subscriber's first attempt
	lost  chan struct{} // signals the subscriber that live dropped to zero
}

type cacheEntry struct {
	s     session.Session
	until time.Time
	live  uint64 // the token it was read under
}

func newCache(ttl time.Duration) *cache {
	return &cache{
		ttl: ttl, entries: make(map[string]cacheEntry),
		ready: make(chan struct{}), lost: make(chan struct{}, 1),
	}
}

// evictChannel carries the ids of sessions written on some replica (the
// store prefixes it like every channel).
const evictChannel = "store/evict"

// Backoff of the cache's subscriber between failed attempts.
const (
	cacheMinBackoff = 50 * time.Millisecond
	cacheMaxBackoff = time.Second
)

// startCache starts, once, the goroutine that keeps the cache's eviction
// subscription, and waits until its first attempt to subscribe ended or
// ctx is done, so that a store whose Redis is healthy caches from its
// first read on. The Store owns the goroutine and Close stops it; ctx
// only bounds the wait, so a request that gave up cannot disable the
// cache.
func (s *Store) startCache(ctx context.Context) {
	c := s.cache
	c.start.Do(func() {
		if !s.bg.start(s.keepCache) {
			close(c.ready) // closed store: nothing to wait for
		}
	})
	select {
	case <-c.ready:
		return // the usual case; asking ctx for Done may allocate
	default:
	}
	select {
	case <-c.ready:
	case <-ctx.Done():
	}
}

// keepCache is the cache's subscriber. It subscribes to the eviction
// channel, with evictions applied by the dispatcher itself so that none
// is dropped, retrying with a capped backoff until it works; then, each
// time the subscription's connection is lost, it confirms the
// subscription again on the new connection (go-redis resubscribes by
// itself), which gives the cache a new token. It returns when the store
// closes.
func (s *Store) keepCache() {
	c := s.cache
	p := &s.ps
	var sub *subscription
	first := true
	defer func() {
		if first {
			close(c.ready)
		}
	}()
	d := cacheMinBackoff
	t := time.NewTimer(0)
	defer t.Stop()
	<-t.C
	for {
		var err error
		switch {
		case sub == nil:
			sub, err = s.subscribe(p.ctx, evictChannel, c.evict)
			if first {
				first = false
				close(c.ready)
			}
		case c.live.Load() == 0 && s.br.allow() == nil:
			ctx, cancel := s.opCtx(p.ctx)
			err = s.confirm(ctx, sub)
			cancel()
		}
		if err == nil && c.live.Load() != 0 {
			d = cacheMinBackoff
			select {
			case <-p.quit:
				return
			case <-c.lost:
				continue
			}
		}
		t.Reset(d)
		select {
		case <-p.quit:
			return
		case <-t.C:
		}
		d = min(2*d, cacheMaxBackoff)
	}
}

// up gives the cache a new token, if it has none, once its subscription
// was confirmed. The caller holds the mu of the eviction channel's shard.
func (c *cache) up() {
	if c.live.Load() == 0 {
		c.next++
		c.live.Store(c.next)
	}
}

// down stops the cache from serving until up. The caller holds the mu of
// the eviction channel's shard.
func (c *cache) down() {
	if c.live.Swap(0) != 0 {
		select {
		case c.lost <- struct{}{}:
		default:
		}
	}
}

func (c *cache) get(id string, live uint64, now time.Time) (*session.Session, bool) {
	c.mu.RLock()
	e, ok := c.entries[id]
	c.mu.RUnlock()
	if !ok || e.live != live || !now.Before(e.until) {
		return nil, false
	}
	s := e.s
	s.Subscriptions = slices.Clone(e.s.Subscriptions)
	return &s, true
}

// put keeps s, read under token live, unless an eviction happened since
// gen was read or the token changed.
func (c *cache) put(s *session.Session, gen, live uint64, now time.Time) {
	ttl := min(c.ttl, ttlOf(s)/4)
	e := cacheEntry{s: *s, until: now.Add(ttl), live: live}
	e.s.Subscriptions = slices.Clone(s.Subscriptions)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen.Load() != gen || c.live.Load() != live {
		return
	}
	if c.ops++; c.ops >= 1024 {
		c.ops = 0
		for k, v := range c.entries {
			if !now.Before(v.until) || v.live != live {
				delete(c.entries, k)
			}
		}
	}
	c.entries[s.ID] = e
}

func (c *cache) evict(id string) {
	c.mu.Lock()
	c.gen.Add(1)
	delete(c.entries, id)
	c.mu.Unlock()
}

// evictEverywhere drops id here and tells the other replicas to drop it.
func (s *Store) evictEverywhere(ctx context.Context, id string) {
	if s.cache == nil {
		return
	}
	s.cache.evict(id)
	s.Publish(ctx, evictChannel, []byte(id))
}
